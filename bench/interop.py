"""snnTorch's and Norse's own networks against the same networks with their
neurons fused by flexsn (a script, not a test; run it on the GPU machine).

Network (snnTorch's tutorial shape): Linear(784, 1000) -> neuron ->
Linear(1000, 10) -> neuron over [T, B, 784], loss = MSE of the summed
output spikes (every layer's spikes feed the backward). Neurons:

  snntorch       snn.Leaky(beta=0.95), the user's loop over T (each layer
                 stepped in turn, as snnTorch's tutorial writes it)
  snntorch-fused flexsn.from_snntorch of the same Leaky: each layer once over T
                 (forward_sequence)
  norse          norse.torch.LIF(), the multi-step module (a Python loop)
  norse-fused    flexsn.from_norse of the same LIF
  linear-only    the two Linear layers alone over all T (no neuron): the
                 bound the matmuls set on a training step

Per system: the training step (forward, loss, backward; CUDA events, median
of --reps) and its peak extra GPU memory; for the fused systems and the
Linear layers alone, the same step captured once in a CUDA graph and
replayed (what is left when the host's per-call cost is gone); and the neuron layer alone
(the 1000-neuron layer, [T, B, 1000], forward and backward with random
output gradients) beside its floor: the bytes a fused training step must
move (x read, spikes and membrane written; two output gradients and one
saved sequence read, the input gradient written: 7 sequences of 4 bytes)
over the device-to-device copy bandwidth measured in the same run.

    python3 bench/interop.py [--T 25,100] [--batch 128] [--reps 30]
        [--out results.json] [--device cuda]
"""

import argparse
import json
import sys

import torch

from benchlib import copy_bandwidth, graphed, peak_extra_mib, timed










def neuron(system):
    """A constructor of one layer's neuron, and whether it is multi-step."""
    if system == "linear-only":
        return None, True
    import flexsn
    if system.startswith("snntorch"):
        import snntorch as snn
        if system == "snntorch":
            return lambda: snn.Leaky(beta=0.95), False
        return lambda: flexsn.from_snntorch(snn.Leaky(beta=0.95)), True
    import norse.torch as nt
    if system == "norse":
        return lambda: nt.LIF(), True
    return lambda: flexsn.from_norse(nt.LIF()), True


class Net(torch.nn.Module):
    def __init__(self, make, multi, norse):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(784, 1000), torch.nn.Linear(1000, 10)
        self.lif1, self.lif2 = (make(), make()) if make else (None, None)
        self.multi, self.norse = multi, norse

    def forward(self, x):  # [T, B, 784] -> output spikes [T, B, 10]
        if self.lif1 is None:
            return self.fc2(self.fc1(x))
        if self.multi:
            if hasattr(self.lif1, "init_leaky"):  # a fused snnTorch neuron keeps its state
                self.lif1.init_leaky()
                self.lif2.init_leaky()
            run = lambda n, v: n(v) if self.norse else n.forward_sequence(v)  # noqa: E731
            s1 = run(self.lif1, self.fc1(x))[0]
            return run(self.lif2, self.fc2(s1))[0]
        m1, m2, out = self.lif1.init_leaky(), self.lif2.init_leaky(), []
        for t in range(x.shape[0]):
            s1, m1 = self.lif1(self.fc1(x[t]), m1)
            s2, m2 = self.lif2(self.fc2(s1), m2)
            out.append(s2)
        return torch.stack(out)


def layer_step(system, T, B, device):
    make, multi = neuron(system)
    if make is None:
        return None
    lif = make().to(device)
    x = torch.randn(T, B, 1000, device=device, requires_grad=True)
    scale = 40.0 if system.startswith("norse") else 1.0  # Norse's dt * tau_mem_inv = 0.1

    def step():
        if multi:
            if hasattr(lif, "init_leaky"):
                lif.init_leaky()
            run = lif.forward_sequence if hasattr(lif, "forward_sequence") else lif
            spk, mem = run(x * scale)[:2]
            mem = mem if torch.is_tensor(mem) else mem.v
        else:
            m, outs, mems = lif.init_leaky(), [], []
            for t in range(T):
                s, m = lif(x[t], m)
                outs.append(s)
                mems.append(m)
            spk, mem = torch.stack(outs), torch.stack(mems)
        (spk.sum() + mem.sum()).backward()
    return step


def net_step(system, T, B, device):
    make, multi = neuron(system)
    net = Net(make, multi, system.startswith("norse")).to(device)
    x = torch.rand(T, B, 784, device=device) * (40.0 if system.startswith("norse") else 1.0)
    target = torch.rand(B, 10, device=device) * T

    def step():
        loss = torch.nn.functional.mse_loss(net(x).sum(0), target)
        loss.backward()
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", default="25,100")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--systems",
                    default="snntorch,snntorch-fused,norse,norse-fused,linear-only")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    device = torch.device(a.device)
    bw = copy_bandwidth(device)
    rows = []
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s  device "
          f"{torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}")
    print(f"{'system':15s} {'T':>4s} {'net ms':>8s} {'replayed':>9s} {'net MiB':>8s} "
          f"{'layer ms':>9s} {'floor ms':>9s}")
    for T in [int(t) for t in a.T.split(",")]:
        floor_ms = 7 * T * a.batch * 1000 * 4 / bw * 1e3
        for system in a.systems.split(","):
            try:
                net = net_step(system, T, a.batch, device)
                layer = layer_step(system, T, a.batch, device)
            except ImportError as e:
                print(f"{system}: not installed ({e})", file=sys.stderr)
                continue
            replay = float("nan")
            if device.type == "cuda" and system != "snntorch" and system != "norse":
                replay = timed(graphed(net_step(system, T, a.batch, device)), a.reps, device)
            row = {"system": system, "T": T, "batch": a.batch,
                   "net_ms": timed(net, a.reps, device), "net_replayed_ms": replay,
                   "net_peak_mib": peak_extra_mib(net, device),
                   "layer_ms": timed(layer, a.reps, device) if layer else float("nan"),
                   "layer_floor_ms": floor_ms, "copy_tbps": bw / 1e12}
            rows.append(row)
            print(f"{system:15s} {T:4d} {row['net_ms']:8.3f} {replay:9.3f} "
                  f"{row['net_peak_mib']:8.1f} "
                  f"{row['layer_ms']:9.3f} {floor_ms:9.4f}", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
