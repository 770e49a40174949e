"""The native call path (libFlexSNTorch.so) against the ctypes path, in one
process, alternating: user-visible time of a layer call (CUDA events around
the call, median of --reps) for inference and a training step, per core,
shape and dtype, with the floor (minimal bytes / copy bandwidth measured in
the same run). Both modules are bench/compare.py's "flexsn" system; the
ctypes one has its kernels bound while the native operators look absent.

    python3 bench/native_ab.py [--cores lif,2in2st] [--shapes 4x4194304,...]
        [--dtypes float32,bfloat16] [--rounds 3] [--reps 30]
"""

import argparse
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
from flexsn import _native  # noqa: E402


def build(core, dev, native: bool):
    """(fn, reset) of a flexsn layer on the chosen path, bound by a first
    inference and training call."""
    real = _native.ops
    if not native:
        _native.ops = lambda: None
    try:
        fn, reset = compare.make_system("flexsn", core, dev)
        n_in = compare.CORE_SHAPES[core][0]
        xs = [torch.randn(2, 8, device=dev, requires_grad=True) for _ in range(n_in)]
        for dtype in (torch.float32, torch.bfloat16):
            ys = [x.detach().to(dtype).requires_grad_() for x in xs]
            reset()
            with torch.no_grad():
                fn(*ys)
            reset()
            outs = fn(*ys)
            torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
    finally:
        _native.ops = real
    return fn, reset


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cores", default="lif,2in2st")
    p.add_argument("--shapes", default="1x1024,4x4194304,32x262144,256x65536")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--device", default="cuda", help="cuda; cpu only smoke-tests this script")
    a = p.parse_args()
    dev = a.device
    bw = compare.copy_bandwidth(dev)
    name = torch.cuda.get_device_name() if dev == "cuda" else "cpu"
    print(f"{name}: copy {bw / 1e12:.2f} TB/s; torch {torch.__version__}; {_native.status()}")
    for core in a.cores.split(","):
        systems = {"native": build(core, dev, True), "ctypes": build(core, dev, False)}
        n_in = compare.CORE_SHAPES[core][0]
        for shape in a.shapes.split(","):
            T, N = map(int, shape.split("x"))
            for dtype_name in a.dtypes.split(","):
                dtype = getattr(torch, dtype_name)
                xs = [torch.randn(T, N, device=dev).to(dtype) for _ in range(n_in)]
                xg = [x.clone().requires_grad_() for x in xs]
                times = {(s, k): [] for s in systems for k in ("inf", "train")}
                for _ in range(a.rounds):
                    for name, (fn, reset) in systems.items():
                        with torch.no_grad():
                            times[(name, "inf")].append(
                                compare.time_cuda(lambda: fn(*xs), reset, a.reps))
                        reset()
                        grads = [torch.randn_like(o) for o in fn(*xg)]

                        def train():
                            for x in xg:
                                x.grad = None
                            torch.autograd.backward(fn(*xg), grads)
                        times[(name, "train")].append(compare.time_cuda(train, reset, a.reps))
                row = " ".join(
                    f"{s} inf {statistics.median(times[(s, 'inf')]):.4f} train "
                    f"{statistics.median(times[(s, 'train')]):.4f} ms;" for s in systems)
                elem = torch.empty((), dtype=dtype).element_size()
                floor = " ".join(f"{k} {compare.minimal_bytes(core, T, N, elem, k == 'train') / bw * 1e3:.4f}"
                                 for k in ("inf", "train"))
                print(f"{core} T={T} NCL={N} {dtype_name}: floor {floor} ms; {row} rounds "
                      + " ".join(f"{s}/{k}=" + ",".join(f"{v:.3f}" for v in vs)
                                 for (s, k), vs in times.items()))


if __name__ == "__main__":
    main()
