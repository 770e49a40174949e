# run 144 (part): where the per-call time differs between the functional
# kernel and the module on the GPU host (LIF T=1 NCL=1024)
import os, sys, time, statistics, torch
sys.path.insert(0, "python-bindings/tests")
import flexsn
from cores import lif
dev = "cuda"
x = torch.randn(1, 1024, device=dev); v0 = torch.zeros(1024, device=dev)
xg = x.clone().requires_grad_()
k = flexsn.FlexSNKernel(lif(), 1, 1, backend=dev)
kf = flexsn.FlexSNKernel(lif(), 1, 1, backend=dev, final_state=True)
m = flexsn.FlexSN(lif(), num_states=1).to(dev)
def minf():
    m.reset()
    with torch.no_grad():
        m(x)
def minf_grad():
    m.reset(); m(x)
def mtrain():
    m.reset(); m(xg).sum().backward()
def rep(name, fn, n=2000):
    for _ in range(n // 10): fn()
    torch.cuda.synchronize()
    w = []
    for _ in range(n):
        t = time.perf_counter(); fn(); w.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    print(f"{name:34s} {statistics.median(w) * 1e6:8.1f} us")
cases = {
    "k.run want_seqs=False": lambda: k.run([x], [v0], want_seqs=False),
    "k.run want_seqs=True": lambda: k.run([x], [v0], want_seqs=True),
    "k(x, v0)": lambda: k(x, v0),
    "kf(x, v0)": lambda: kf(x, v0),
    "module infer no_grad": minf,
    "module infer grad on": minf_grad,
    "k(xg, v0) train": lambda: k(xg, v0)[0].sum().backward(),
    "kf(xg, v0) train": lambda: kf(xg, v0)[0].sum().backward(),
    "kf(xg, None-state) train": None,
    "module train": mtrain,
    "torch mul": lambda: x * 2,
    "torch mul+sum bwd": lambda: (xg * 2).sum().backward(),
}
cases.pop("kf(xg, None-state) train")
for rnd in range(2):
    print(f"-- round {rnd}")
    for n, f in cases.items():
        rep(n, f)
for n in ("k(x, v0)", "k.run want_seqs=False", "module train", "k(xg, v0) train"):
    f = cases[n]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(200):
            f()
        torch.cuda.synchronize()
    print(f"== profiler: {n} (200 calls)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))
