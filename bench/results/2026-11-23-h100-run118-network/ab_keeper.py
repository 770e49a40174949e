# A/B of the per-call cost (T=1 NCL=1024 lif, cuda): module training step
# and inference, median wall time of 3000 calls.
import os, statistics, sys, time, torch
sys.path.insert(0, "python-bindings/tests")
import flexsn
from cores import lif
m = flexsn.FlexSN(lif(), num_inputs=1, num_states=1).cuda()
x = torch.randn(1, 1024, device="cuda", requires_grad=True)
g = torch.ones(1, 1024, device="cuda")
def train():
    m.reset(); x.grad = None; m(x).backward(g)
def infer():
    with torch.no_grad():
        m.reset(); m(x)
out = []
for name, fn in (("train", train), ("infer", infer)):
    for _ in range(300): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(3000):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    out.append(f"{name} {statistics.median(ts)*1e6:.1f}")
print(os.environ["TAG"], *out)
