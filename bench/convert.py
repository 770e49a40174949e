"""SpikingJelly neurons against their flexsn.convert'ed forms (a script,
not a test; run it on the GPU machine).

1. One neuron layer per class, training (forward and backward with random
   output gradients, [T, NCL]) at T=4 NCL=4M and T=32 NCL=256K: SpikingJelly
   2.0.0's module in step mode "m" (it picks its fastest path itself: its
   CUDA kernels where the class has them, else its PyTorch loop) against the
   converted module (eager, and replayed from a CUDA graph: the device's
   time without the host's per-call cost), beside the floor: the bytes a
   training step that saves its states moves (input read, output and state
   sequences written; the states, the input and the output gradient read
   back, the input gradient written: 5 + 2 x states sequences of 4 bytes)
   over the copy bandwidth measured in the same run. For LIFNode, flexsn's
   own flexsn.neuron.LIFNode too.
2. spiking_resnet18 (CIFAR shapes, T=4, LIF) training step (forward, cross
   entropy, backward) and its peak extra memory, original against converted,
   f32 and bf16 autocast.

Times: CUDA events around the whole call, median of --reps, ms.

    python3 bench/convert.py [--reps 20] [--batch 64] [--classes ...]
        [--out results.json]
"""

import argparse
import copy
import json
import sys
import time
import warnings

import torch

from benchlib import copy_bandwidth, graphed, peak_extra_mib, timed

CLASSES = ["LIFNode", "ParametricLIFNode", "QIFNode", "EIFNode", "IzhikevichNode",
           "KLIFNode", "CUBALIFNode"]
SHAPES = [(4, 4 * 2**20), (32, 256 * 2**10)]










def layer_step(node, T, ncl):
    from spikingjelly.activation_based import functional
    x = torch.randn(T, ncl, device="cuda").mul_(0.8).add_(0.6).requires_grad_()
    g = torch.randn(T, ncl, device="cuda")

    def step():  # (autograd.grad: no accumulation into x.grad, which is not the layer's)
        functional.reset_net(node)
        torch.autograd.grad(node(x), x, g)
    return step


def resnet_step(model, T, batch, dtype):
    from spikingjelly.activation_based import functional
    x = torch.rand(T, batch, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")

    def step():
        functional.reset_net(model)
        with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
            loss = torch.nn.functional.cross_entropy(model(x).mean(0), y)
        loss.backward()
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--classes", default=",".join(CLASSES))
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    import flexsn
    from spikingjelly.activation_based import functional, neuron
    warnings.simplefilter("ignore")
    bw = copy_bandwidth()
    print(f"copy {bw / 1e12:.2f} TB/s, {torch.cuda.get_device_name()}", flush=True)
    rows = []
    print(f"{'class':20s} {'T':>3s} {'NCL':>8s} {'SJ ms':>8s} {'ours ms':>8s} {'x':>6s} "
          f"{'replayed':>8s} {'floor':>7s} {'SJ first s':>10s}")
    for name in a.classes.split(","):
        for T, ncl in SHAPES:
            node = getattr(neuron, name)().cuda()
            node.step_mode = "m"  # (CUBALIFNode takes no step_mode argument)
            ours = flexsn.convert(node)
            t0 = time.perf_counter()
            layer_step(node, T, ncl)()
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            sj = timed(layer_step(node, T, ncl), a.reps)
            fs = timed(layer_step(ours, T, ncl), a.reps)
            replay = timed(graphed(layer_step(copy.deepcopy(ours), T, ncl)), a.reps)
            floor = (5 + 2 * len(node._memories)) * T * ncl * 4 / bw * 1e3
            rows.append({"table": "layer", "class": name, "T": T, "NCL": ncl,
                         "sj_ms": sj, "ours_ms": fs, "ours_replayed_ms": replay,
                         "floor_ms": floor, "sj_first_s": first, "copy_tbps": bw / 1e12})
            if name == "LIFNode":  # flexsn's own LIF module, the same neuron
                native = flexsn.neuron.LIFNode(step_mode="m").cuda()
                rows[-1]["flexsn_lifnode_ms"] = timed(layer_step(native, T, ncl), a.reps)
                rows[-1]["flexsn_lifnode_replayed_ms"] = timed(
                    graphed(layer_step(native, T, ncl)), a.reps)
            print(f"{name:20s} {T:3d} {ncl:8d} {sj:8.3f} {fs:8.3f} {sj / fs:6.1f} "
                  f"{replay:8.3f} {floor:7.3f} {first:10.1f}"
                  + (f"  flexsn LIFNode {rows[-1]['flexsn_lifnode_ms']:.3f} / replayed "
                     f"{rows[-1]['flexsn_lifnode_replayed_ms']:.3f}"
                     if name == "LIFNode" else ""), flush=True)
            del node, ours
            torch.cuda.empty_cache()
    from spikingjelly.activation_based.model import spiking_resnet
    for dtype in (torch.float32, torch.bfloat16):
        torch.manual_seed(0)
        ref = spiking_resnet.spiking_resnet18(spiking_neuron=neuron.LIFNode,
                                              num_classes=10).cuda()
        functional.set_step_mode(ref, "m")
        ours = flexsn.convert(ref)
        for system, model in (("spikingjelly", ref), ("flexsn.convert", ours)):
            step = resnet_step(model, 4, a.batch, dtype)
            ms = timed(step, a.reps)
            mib = peak_extra_mib(step)
            for p in model.parameters():
                p.grad = None
            rows.append({"table": "resnet18", "system": system, "dtype": str(dtype),
                         "T": 4, "batch": a.batch, "ms": ms, "peak_mib": mib})
            print(f"spiking_resnet18 {str(dtype):15s} {system:15s} {ms:8.2f} ms "
                  f"{mib:8.0f} MiB", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
