"""A whole spiking network's step, one system's LIF neuron in every layer (a
script, not a test; run it on the GPU machine).

bench/compare.py times one neuron layer alone, where a training step's
fixed host cost (PyTorch's backward hand-off, about 0.1 ms) is exposed in
full. Here the same LIF neuron sits in the four layers of a small spiking
CNN on CIFAR-sized input (multi-step, [T, B, 3, 32, 32]):

    conv3x3(3->w)   BN LIF            32x32
    conv3x3(w->2w)  BN LIF  maxpool   32x32 -> 16x16
    conv3x3(2w->4w) BN LIF  maxpool   16x16 -> 8x8
    conv3x3(4w->4w) BN LIF  maxpool   8x8 -> 4x4
    flatten, linear(4w*16 -> 10), mean over T

Convolutions, batch norm, pooling and the linear layer see T*B images (the
time steps folded into the batch). Systems, the neuron (tau 2, threshold
1, hard reset to 0, sigmoid surrogate of alpha 4) as each writes it:

  flexsn         flexsn.FlexSN over compare.py's lif core
  sj-flexsn      SpikingJelly 2.0.0's FlexSN over the same core
  sj-lifnode     SpikingJelly's LIFNode(step_mode="m") (its Triton path)
  torch-eager    the step loop in plain PyTorch
  torch-compile  the whole network, torch-eager's neurons, under
                 torch.compile
  flexsn-compile the whole network, our neurons, under torch.compile
                 (each FlexSN the package's operators in the compiled graph)

Per system: the training step (forward, cross-entropy, backward; no
optimizer step) and inference (evaluation mode, no_grad), CUDA events around the call,
median of --reps; peak extra GPU memory of a training step; the first
training step's time (compiles included); and the loss and the last
layer's weight gradient against torch-eager's (or the first system's,
without it) from the same weights and input (thresholds make a 1-ulp difference flip a spike, so these are
reported, not asserted).

    python3 bench/network.py [--T 4,16] [--batch 64] [--width 64]
        [--dtypes float32,bfloat16] [--systems flexsn,...] [--reps 30]
        [--out bench/results/network] [--device cpu (a smoke run)]
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compare  # noqa: E402  (the cores and the plain-PyTorch step)

SYSTEMS = ["flexsn", "flexsn-compile", "sj-flexsn", "sj-lifnode", "torch-eager",
           "torch-compile"]


def neuron_factory(system):
    """A zero-argument constructor of the system's multi-step LIF module, or
    None when it is not installed."""
    from torch import nn
    if system in ("flexsn", "flexsn-compile", "sj-flexsn", "sj-lifnode"):
        return compare.module_factory(system.split("-compile")[0], "lif")
    if system in ("torch-eager", "torch-compile"):
        loop = compare.torch_loops()["lif"]

        class LoopLIF(nn.Module):
            def forward(self, x):
                return loop(x)[0]
        return LoopLIF
    raise ValueError(f"unknown system {system}")


def build_net(make_neuron, width):
    import torch
    from torch import nn

    class Folded(nn.Module):
        """Stateless layers applied to [T, B, ...] as [T*B, ...]."""

        def __init__(self, *layers):
            super().__init__()
            self.body = nn.Sequential(*layers)

        def forward(self, x):
            T, B = x.shape[:2]
            y = self.body(x.flatten(0, 1))
            return y.view(T, B, *y.shape[1:])

    w = width

    def block(cin, cout):
        return Folded(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.n1 = block(3, w), make_neuron()
            self.c2, self.n2, self.p2 = block(w, 2 * w), make_neuron(), Folded(nn.MaxPool2d(2))
            self.c3, self.n3, self.p3 = block(2 * w, 4 * w), make_neuron(), Folded(nn.MaxPool2d(2))
            self.c4, self.n4, self.p4 = block(4 * w, 4 * w), make_neuron(), Folded(nn.MaxPool2d(2))
            self.fc = Folded(nn.Flatten(), nn.Linear(4 * w * 16, 10))

        def reset(self):
            for m in (self.n1, self.n2, self.n3, self.n4):
                if hasattr(m, "reset"):
                    m.reset()

        def forward(self, x):
            self.reset()
            x = self.n1(self.c1(x))
            x = self.p2(self.n2(self.c2(x)))
            x = self.p3(self.n3(self.c3(x)))
            x = self.p4(self.n4(self.c4(x)))
            return self.fc(x).mean(0)
    torch.manual_seed(0)  # the same weights for every system
    return Net()


def time_cuda(fn, reps):
    """compare.py's timer: CUDA events around each call, median."""
    return compare.time_cuda(fn, lambda: None, reps, warmup=3)


def run_system(system, args, dtype, data, reference):
    import torch
    import torch.nn.functional as F
    make = neuron_factory(system)
    if make is None:
        return None
    dev = args.device
    net = build_net(make, args.width).to(dev, dtype)
    model = net
    if system in ("torch-compile", "flexsn-compile"):
        torch._dynamo.reset()
        model = torch.compile(net)
    x, y = data

    def train():
        net.zero_grad(set_to_none=True)
        F.cross_entropy(model(x).float(), y).backward()

    def infer():  # evaluation mode: batch norm from its running statistics
        net.eval()
        with torch.no_grad():
            model(x)
        net.train()
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    res = {}
    t0 = time.perf_counter()
    train()
    sync()
    res["first_training_s"] = time.perf_counter() - t0
    # The same weights, input and one step as torch-eager's: the loss and
    # the last layer's weight gradient.
    net.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x).float(), y)
    loss.backward()
    res["loss"] = loss.item()
    grad = net.fc.body[1].weight.grad.float()
    if reference is not None:
        ref_loss, ref_grad = reference
        res["loss_diff"] = abs(res["loss"] - ref_loss)
        res["fc_grad_rel_diff"] = ((grad - ref_grad).abs().max()
                                   / ref_grad.abs().max().clamp_min(1e-30)).item()
    res["_reference"] = (res["loss"], grad)
    res["training_ms"] = time_cuda(train, args.reps)
    res["inference_ms"] = time_cuda(infer, args.reps)
    res["peak_extra_mib"] = float("nan")
    if dev == "cuda":
        net.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        train()
        torch.cuda.synchronize()
        res["peak_extra_mib"] = (torch.cuda.max_memory_allocated() - base) / 2**20
    del net, model
    if dev == "cuda":
        torch.cuda.empty_cache()
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--T", default="4", help="time steps, a comma-separated list")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke run of the script")
    p.add_argument("--out", default=os.path.join(HERE, "results", "network"))
    args = p.parse_args()
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("network.py times CUDA steps: it needs a GPU (--device cpu: a smoke run)")
    os.makedirs(args.out, exist_ok=True)
    systems = [s for s in args.systems.split(",") if s]
    # torch-eager first: the others are compared with it.
    systems.sort(key=lambda s: s != "torch-eager")
    versions = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                "torch": torch.__version__}
    try:
        from importlib.metadata import version
        versions["spikingjelly"] = version("spikingjelly")
    except Exception:  # noqa: BLE001 (not installed)
        pass
    print(versions, flush=True)
    results = {"versions": versions, "args": vars(args), "cases": []}
    for T, dtype_name in [(int(t), d) for t in args.T.split(",") for d in args.dtypes.split(",")]:
        dtype = getattr(torch, dtype_name)
        g = torch.Generator().manual_seed(1)
        x = torch.rand(T, args.batch, 3, 32, 32, generator=g).to(args.device, dtype) * 2
        y = torch.randint(0, 10, (args.batch,), generator=g).to(args.device)
        reference, ref_name = None, None
        print(f"T={T} batch={args.batch} width={args.width} {dtype_name}", flush=True)
        for system in systems:
            try:
                res = run_system(system, args, dtype, (x, y), reference)
            except Exception as e:  # noqa: BLE001 (one system failing ends no other)
                res = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
            if res is None:
                print(f"  {system:14s} not installed", flush=True)
                continue
            ref = res.pop("_reference", None)
            if reference is None and ref is not None:  # torch-eager when run
                reference, ref_name = ref, system
            if "error" in res:
                print(f"  {system:14s} {res['error']}", flush=True)
            else:
                extra = ""
                if "loss_diff" in res:
                    extra = (f"  vs {ref_name}: loss {res['loss_diff']:.1e}, "
                             f"fc grad {res['fc_grad_rel_diff']:.1e}")
                print(f"  {system:14s} training {res['training_ms']:.3f} ms  inference "
                      f"{res['inference_ms']:.3f} ms  peak +{res['peak_extra_mib']:.0f} MiB  "
                      f"first {res['first_training_s']:.2f} s{extra}", flush=True)
            if "loss_diff" in res:
                res["compared_with"] = ref_name
            results["cases"].append({"system": system, "T": T, "dtype": dtype_name, **res})
            with open(os.path.join(args.out, "results.json"), "w") as f:
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
