"""First-use time of a FlexSN neuron: building the module (trace + IR) and
its first training call (compile or cache load, forward, backward), in a
fresh process each. Run twice against one cache directory: the first
process compiles (cold), the second finds CUDA programs on disk (warm).

    python3 bench/first_call.py [cpu|cuda]

Prints one line per process; the process's own torch import and CUDA
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
from cores import tutorial
x = torch.randn(16, 4096, device=dev, requires_grad=True)
y = torch.randn(16, 4096, device=dev)
t2 = time.perf_counter()
m = flexsn.FlexSN(tutorial(), num_inputs=2, num_states=2, backend=dev.type)
t3 = time.perf_counter()
s1, s2 = m(x, y)
(s1 + s2).sum().backward()
if dev.type == "cuda":
    torch.cuda.synchronize()
t4 = time.perf_counter()
print(f"torch import + device init {{t1 - t0:.2f}} s | build FlexSN {{t3 - t2:.3f}} s | "
      f"first training call {{t4 - t3:.3f}} s | flexsn total {{t4 - t2:.3f}} s")
"""


def main():
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    here = os.path.dirname(os.path.abspath(__file__))
    tests = os.path.join(here, "..", "python-bindings", "tests")
    code = CHILD.format(tests=tests, device=device)
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "FLEXSN_CACHE_DIR": cache}
        for label in ("cold (compiles)", "warm (disk cache)"):
            out = subprocess.run([sys.executable, "-c", code], env=env,
                                 capture_output=True, text=True)
            if out.returncode:
                sys.exit(out.stderr)
            print(f"{device} {label:18s} {out.stdout.strip()}")


if __name__ == "__main__":
    main()
