"""Where the per-call time of a FlexSN training step goes (LIF, T=1,
NCL=1024): cProfile of the Python side and torch.profiler's CPU-side view
(CUDA runtime/driver calls included), on the device given.

    python3 bench/profile_call.py [cuda|cpu]
"""
import cProfile
import os
import pstats
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "python-bindings", "tests"))
import flexsn  # noqa: E402
from cores import lif  # noqa: E402

dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
m = flexsn.FlexSN(lif(), num_states=1).to(dev)
x = torch.randn(1, int(os.environ.get("NCL", 1024)), device=dev, requires_grad=True)
g = torch.randn(1, x.shape[1], device=dev)
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)


def step():
    m.reset()
    x.grad = None
    torch.autograd.backward(m(x), g)


def inference():
    m.reset()
    with torch.no_grad():
        m(x)


for fn in (inference, step):
    for _ in range(200):
        fn()
    sync()
    t = time.perf_counter()
    for _ in range(2000):
        fn()
    sync()
    print(f"{fn.__name__}: {(time.perf_counter() - t) / 2000 * 1e6:.1f} us per call (mean, synchronized at the end)")
pr = cProfile.Profile()
pr.enable()
for _ in range(1000):
    step()
sync()
pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(20)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    for _ in range(200):
        step()
    sync()
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
