"""Per-step networks as their users write them, against flexsn.multistep of
the same network and the same network written layer by layer by hand (a
script, not a test; run it on the GPU machine).

Networks (training step: forward, loss, backward):

  tutorial5  snnTorch tutorial 5's MLP, 784-1000-10, Leaky(beta=0.95) in both
             layers, its membranes carried in attributes; loss = the MSE of
             the summed output spikes
  tutorial7  snnTorch tutorial 7's conv net at N-MNIST shapes (2x34x34):
             Conv2d(2,12,5) MaxPool Leaky Conv2d(12,32,5) MaxPool Leaky
             Flatten Linear(800,10) Leaky(output=True), init_hidden, atan
  norse      Norse SequentialState(Linear(784,1000), LIFCell, Linear(1000,10),
             LICell); loss = the MSE of the summed LI output
  inline     tutorial 5's MLP with its neurons written in the loop body as
             plain PyTorch (mem = beta * mem + cur; spk = atan(mem - 1);
             mem = mem - spk): systems loop, compiled, backend
  sj         SpikingJelly's single-step MLP, Linear(784,1000) LIFNode
             Linear(1000,10) LIFNode, called once per step (its own neurons:
             loop, compiled, backend; flexsn.convert'ed: converted, multistep)

Systems:

  loop       the library's own neurons, the network called once per step
  converted  the same loop with flexsn.from_snntorch / from_norse neurons
  multistep  flexsn.multistep(network), one call over [T, B, ...]
  layers     the network written layer by layer: stateless layers over the
             steps folded into the batch, each neuron one forward_sequence
  compiled   the loop with the library's own neurons under torch.compile
             (Inductor)
  backend    the loop with the library's own neurons, unchanged, under
             torch.compile with backend=flexsn.backend (each neuron's
             per-step work rolled into one scan, the layers that feed it
             batched over the steps)
  graphs     backend with mode="reduce-overhead": the compiled step
             replayed from CUDA graphs (compare with multistep replayed)

Per system: the training step (CUDA events, median of --reps) and its peak
extra GPU memory; the first step's wall time (for the compiled systems,
their compile); for multistep and layers also the step captured in a CUDA
graph and replayed. Beside them, the neuron layers' floor: the bytes a fused
training step of every neuron layer must move (7 sequences of 4 bytes per
neuron and step: the input read, spikes and membrane written, two output
gradients and one saved sequence read, the input gradient written) over
the device-to-device copy bandwidth measured in the same run.

    python3 bench/multistep.py [--T 25] [--batch 128] [--reps 20]
        [--nets tutorial5,tutorial7,norse]
        [--systems loop,converted,multistep,layers,compiled,backend,graphs]
        [--no-cudnn] [--profile] [--out results.json]
"""

import argparse
import json
import sys
import time

import torch
from torch import nn

from benchlib import copy_bandwidth, graphed, peak_extra_mib, timed


class Tutorial5(nn.Module):
    def __init__(self, make):
        super().__init__()
        self.fc1, self.lif1 = nn.Linear(784, 1000), make()
        self.fc2, self.lif2 = nn.Linear(1000, 10), make()
        self.reset()

    def reset(self):
        self.mem1, self.mem2 = self.lif1.init_leaky(), self.lif2.init_leaky()

    def forward(self, x):
        spk1, self.mem1 = self.lif1(self.fc1(x), self.mem1)
        spk2, self.mem2 = self.lif2(self.fc2(spk1), self.mem2)
        return spk2


def tutorial7(make):
    return nn.Sequential(nn.Conv2d(2, 12, 5), nn.MaxPool2d(2), make(),
                         nn.Conv2d(12, 32, 5), nn.MaxPool2d(2), make(),
                         nn.Flatten(), nn.Linear(32 * 5 * 5, 10), make(output=True))


def snntorch_neuron(system, init_hidden):
    import snntorch as snn
    from snntorch import surrogate
    import flexsn

    def make(output=False):
        n = snn.Leaky(beta=0.95 if not init_hidden else 0.5, spike_grad=surrogate.atan(),
                      init_hidden=init_hidden, output=output)
        return flexsn.from_snntorch(n) if system not in ("loop", "compiled", "backend", "graphs") else n
    return make


def norse_net(system):
    import norse.torch as nt
    import flexsn
    wrap = (lambda c: flexsn.from_norse(c, superspike="released")) \
        if system not in ("loop", "compiled", "backend", "graphs") else (lambda c: c)
    return nt.SequentialState(nn.Linear(784, 1000), wrap(nt.LIFCell()),
                              nn.Linear(1000, 10), wrap(nt.LICell()))


class InlineMLP(nn.Module):
    """Tutorial 5's MLP, its Leaky neurons written out in the loop."""

    def __init__(self):
        super().__init__()
        from snntorch import surrogate
        self.fc1, self.fc2 = nn.Linear(784, 1000), nn.Linear(1000, 10)
        self.spike = surrogate.atan()

    def forward(self, x):
        mem1 = torch.zeros(x.shape[1], 1000, device=x.device)
        mem2 = torch.zeros(x.shape[1], 10, device=x.device)
        out = []
        for t in range(x.shape[0]):
            mem1 = 0.95 * mem1 + self.fc1(x[t])
            spk1 = self.spike(mem1 - 1.0)
            mem1 = mem1 - spk1
            mem2 = 0.95 * mem2 + self.fc2(spk1)
            spk2 = self.spike(mem2 - 1.0)
            mem2 = mem2 - spk2
            out.append(spk2)
        return torch.stack(out)


def sj_net(system):
    import flexsn
    from spikingjelly.activation_based import neuron
    net = nn.Sequential(nn.Linear(784, 1000), neuron.LIFNode(), nn.Linear(1000, 10),
                        neuron.LIFNode())
    return flexsn.convert(net) if system in ("converted", "multistep") else net


def _compiled(fn, system):
    """`fn` as the system compiles it (as it is for an eager system)."""
    import flexsn
    if system == "compiled":
        return torch.compile(fn)
    if system == "backend":
        return torch.compile(fn, backend=flexsn.backend)
    if system == "graphs":
        return torch.compile(fn, backend=flexsn.backend, mode="reduce-overhead")
    return fn


def _begin(system, model):
    """A step of graphs begins as a training loop's does under CUDA graphs:
    a new step (the graphs reuse the last one's memory) and no gradients
    (zero_grad(set_to_none=True): a gradient the backward graph wrote is
    its memory, which the next replay overwrites)."""
    if system == "graphs":
        torch.compiler.cudagraph_mark_step_begin()
        for p in model.parameters():
            p.grad = None


def build(net, system, T, B, device):
    """(step function, neuron elements per step) of one network and system;
    None where the network has no such system."""
    import flexsn
    torch.manual_seed(0)
    if (net == "inline" and system not in ("loop", "compiled", "backend", "graphs")) or \
            (net == "sj" and system == "layers"):
        return None
    if net == "inline":
        model = InlineMLP().to(device)
        x = torch.rand(T, B, 784, device=device)
        neurons = 1010
    elif net == "sj":
        model = sj_net(system).to(device)
        x = torch.rand(T, B, 784, device=device) * 3
        neurons = 1010
    elif net == "tutorial5":
        model = Tutorial5(snntorch_neuron(system, False)).to(device)
        x = torch.rand(T, B, 784, device=device)
        neurons = 1010
    elif net == "tutorial7":
        model = tutorial7(snntorch_neuron(system, True)).to(device)
        x = (torch.rand(T, B, 2, 34, 34, device=device) > 0.8).float()
        neurons = 12 * 15 * 15 + 32 * 5 * 5 + 10
    else:
        model = norse_net(system).to(device)
        x = torch.rand(T, B, 784, device=device) * 40
        neurons = 1010
    target = torch.rand(B, 10, device=device) * T * 0.2

    def reset():
        if net == "tutorial5":
            model.reset()
        elif net == "tutorial7":
            from snntorch import utils
            utils.reset(model)
        elif net == "sj":
            from spikingjelly.activation_based import functional
            functional.reset_net(model)

    if net == "inline":  # the loop is the model's own forward
        torch._dynamo.reset()
        run = _compiled(model, system)

        def step():
            _begin(system, model)
            loss = nn.functional.mse_loss(run(x).sum(0), target)
            loss.backward()
        return step, neurons
    if system in ("loop", "converted", "compiled", "backend", "graphs"):
        def forward():
            reset()
            outs, state = [], None
            for t in range(T):
                if net == "norse":
                    o, state = model(x[t], state)
                else:
                    o = model(x[t])
                outs.append(o[0] if isinstance(o, tuple) else o)
            return torch.stack(outs)
        # each network and system compiles from nothing: the closures share
        # one code object, whose recompiles would otherwise add up to
        # Dynamo's recompile limit and fall back to eager
        torch._dynamo.reset()
        forward = _compiled(forward, system)
    elif system == "multistep":
        ms = flexsn.multistep(model)

        def forward():
            reset()
            o = ms(x)
            if net == "norse":
                o = o[0]
            return o[0] if isinstance(o, tuple) else o
    else:  # layers: written by hand, layer by layer
        forward = _layers(net, model, x, reset)

    def step():
        _begin(system, model)
        loss = nn.functional.mse_loss(forward().sum(0), target)
        loss.backward()
    return step, neurons


def _fold(layer, x):
    return layer(x.flatten(0, 1)).unflatten(0, x.shape[:2])


def _layers(net, model, x, reset):
    if net == "tutorial5":
        def forward():
            reset()
            s1 = model.lif1.forward_sequence(_fold(model.fc1, x))[0]
            return model.lif2.forward_sequence(_fold(model.fc2, s1))[0]
        return forward
    if net == "tutorial7":
        m = model

        def forward():
            reset()
            h = _fold(lambda v: m[1](m[0](v)), x)
            h = m[2].forward_sequence(h)
            h = _fold(lambda v: m[4](m[3](v)), h)
            h = m[5].forward_sequence(h)
            h = _fold(lambda v: m[7](m[6](v)), h)
            return m[8].forward_sequence(h)[0]
        return forward

    def forward():
        h = model[1].forward_sequence(_fold(model[0], x))[0]
        return model[3].forward_sequence(_fold(model[2], h))[0]
    return forward


def _profile(net, system, step, device):
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda"
                                           else [])
    with profile(activities=activities) as p:
        for _ in range(5):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize()
    print(f"===== {net} {system}, 5 steps")
    sort = "cuda_time_total" if device.type == "cuda" else "cpu_time_total"
    print(p.key_averages().table(sort_by=sort, row_limit=14, max_name_column_width=60),
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=25)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--nets", default="tutorial5,tutorial7,norse")
    ap.add_argument("--systems", default="loop,converted,multistep,layers")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default="")
    ap.add_argument("--profile", action="store_true",
                    help="also print each system's kernels and host time (torch.profiler, "
                         "5 steps)")
    ap.add_argument("--no-cudnn", action="store_true",
                    help="convolutions without cuDNN (its workspace out of the peaks)")
    a = ap.parse_args()
    device = torch.device(a.device)
    torch.backends.cudnn.enabled = not a.no_cudnn
    bw = copy_bandwidth(device)
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s  device {name}  T={a.T} B={a.batch}")
    print(f"{'net':10s} {'system':10s} {'ms':>8s} {'replayed':>9s} {'MiB':>8s} "
          f"{'floor ms':>9s} {'first s':>8s}")
    rows = []
    for net in a.nets.split(","):
        for system in a.systems.split(","):
            try:
                built = build(net, system, a.T, a.batch, device)
            except ImportError as e:
                print(f"{net} {system}: not installed ({e})", file=sys.stderr)
                continue
            if built is None:
                continue
            step, neurons = built
            floor = 7 * a.T * a.batch * neurons * 4 / bw * 1e3
            start = time.perf_counter()
            step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            first = time.perf_counter() - start
            replay = float("nan")
            if device.type == "cuda" and system in ("multistep", "layers"):
                replay = timed(graphed(build(net, system, a.T, a.batch, device)[0]),
                               a.reps, device)
            row = {"net": net, "system": system, "T": a.T, "batch": a.batch,
                   "ms": timed(step, a.reps, device), "replayed_ms": replay,
                   "peak_mib": peak_extra_mib(step, device), "neuron_floor_ms": floor,
                   "first_s": first,
                   "copy_tbps": bw / 1e12, "device": name}
            rows.append(row)
            if a.profile:
                _profile(net, system, step, device)
            print(f"{net:10s} {system:10s} {row['ms']:8.3f} {replay:9.3f} "
                  f"{row['peak_mib']:8.1f} {floor:9.4f} {first:8.2f}", flush=True)
            if a.out:
                with open(a.out, "w") as f:
                    json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
