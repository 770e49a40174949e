"""First-use time of a FlexSN neuron: building the module (trace + IR) and
its first training call (compile or cache load, forward, backward), in a
fresh process each. Run twice against one cache directory: the first
process compiles (cold), the second finds on disk what the first wrote
(warm): CUDA programs' PTX and manifests, CPU kernels' object files.
The first call's time is split into our compiler's (MLIR to PTX, or on
the CPU MLIR to LLVM plus the JIT's optimization and code generation, or
the object file's load, which each kernel's first lookup runs); the rest
is tracing, PyTorch and our launches (on CUDA the first launch of each
kernel entry holds the driver's PTX-to-SASS compile).

    python3 bench/first_call.py [cpu|cuda] [--ops=N]

--ops=N times a generated core of N ops (two inputs, two states) instead of
the tutorial's neuron.

Prints one line per process (cold: both caches empty; warm: both filled
by the cold process); the process's own torch import and CUDA
initialisation are reported separately, since no library can avoid them."""

import os
import subprocess
import sys
import tempfile

CHILD = r"""
import sys, time
sys.path.insert(0, {tests!r})
t0 = time.perf_counter()
import torch
dev = torch.device({device!r})
if dev.type == "cuda":
    torch.zeros(1, device=dev); torch.cuda.synchronize()
t1 = time.perf_counter()
import flexsn
from flexsn import _capi
from cores import tutorial
# Where the first call's time goes: our compiler (MLIR -> PTX, or the CPU
# JIT); the rest is tracing, launches, PyTorch's own first use of its ops
# and autograd.
spent = {{"compile": 0.0}}
def timed(what, fn):
    def wrapper(*args):
        t = time.perf_counter()
        try:
            return fn(*args)
        finally:
            spent[what] += time.perf_counter() - t
    return wrapper
_capi.program_create = timed("compile", _capi.program_create)
# On the CPU a kernel's first lookup runs LLVM's optimizer and code
# generation for that kernel (the JIT compiles it then): counted with our
# compiler's time.
_capi.kernel_get = timed("compile", _capi.kernel_get)
from flexsn import surrogate
x = torch.randn(16, 4096, device=dev, requires_grad=True)
y = torch.randn(16, 4096, device=dev)
OPS = {ops}


def chain(x, y, v, w):
    # OPS ops on the step's values (add, mul, sub, a tanh every 7th), then
    # a spike and two state updates: a core far larger than a neuron model's.
    vals = [v, w, x, y]
    for i in range(OPS):
        a, b = vals[-1], vals[-1 - (i % 3 + 1)]
        vals.append(torch.tanh(a) if i % 7 == 3 else (a + b, a * b, a - b)[i % 3])
    s = surrogate.ATan()(vals[-1] - 1.0)
    return s, vals[-1] * 0.5, torch.tanh(vals[-2]), torch.tanh(vals[-3])


t2 = time.perf_counter()
m = flexsn.FlexSN(chain if OPS else tutorial(), num_inputs=2, num_states=2,
                  backend=dev.type)
t3 = time.perf_counter()
s1, s2 = m(x, y)
(s1 + s2).sum().backward()
if dev.type == "cuda":
    torch.cuda.synchronize()
t4 = time.perf_counter()
print(f"torch import + device init {{t1 - t0:.2f}} s | build FlexSN {{t3 - t2:.3f}} s | "
      f"first training call {{t4 - t3:.3f}} s (compile {{spent['compile']:.3f}}) | "
      f"flexsn total {{t4 - t2:.3f}} s")
"""


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--ops=")]
    ops = [int(a[6:]) for a in sys.argv[1:] if a.startswith("--ops=")]
    device = args[0] if args else "cpu"
    here = os.path.dirname(os.path.abspath(__file__))
    tests = os.path.join(here, "..", "python-bindings", "tests")
    code = CHILD.format(tests=tests, device=device, ops=ops[-1] if ops else 0)
    with tempfile.TemporaryDirectory() as cache:
        # Both caches start empty: ours and the CUDA driver's compute cache
        # (its PTX -> SASS results), each in a directory of this run. The
        # cold process fills both, the warm one reads both. (Until session
        # 18 the cold process ran with the driver's cache off, so the warm
        # one compiled PTX to SASS again.)
        env = {**os.environ, "FLEXSN_CACHE_DIR": os.path.join(cache, "flexsn"),
               "CUDA_CACHE_PATH": os.path.join(cache, "cuda")}
        env.pop("CUDA_CACHE_DISABLE", None)
        for label in ("cold (compiles)", "warm (disk cache)"):
            out = subprocess.run([sys.executable, "-c", code], env=env,
                                 capture_output=True, text=True)
            if out.returncode:
                sys.exit(out.stderr)
            print(f"{device} {label:18s} {out.stdout.strip()}")


if __name__ == "__main__":
    main()
