"""Eager per-rep times of our lif module, f32 against bf16 (run 164)."""
import os, statistics, sys, time
import torch
sys.path.insert(0, "bench")
import compare
from torch.profiler import profile, ProfilerActivity

def reps_of(fn, reset, n=200):
    for _ in range(10):
        reset(); fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        reset()
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    ts.sort()
    q = lambda p: ts[int(p * (len(ts) - 1))]
    return f"min {ts[0]:6.1f} p25 {q(.25):6.1f} med {q(.5):6.1f} p75 {q(.75):6.1f} us"

for T, N in ((32, 262144), (4, 4194304)):
    for dt in ("float32", "bfloat16", "float32", "bfloat16"):
        dtype = getattr(torch, dt)
        fn, reset = compare.make_system("flexsn", "lif", "cuda")
        x = (torch.randn(T, N) * 1.5).to("cuda", dtype)
        with torch.no_grad():
            r = reps_of(lambda: fn(x), reset)
        xg = x.clone().requires_grad_()
        reset(); g = torch.randn(T, N, device="cuda").to(dtype)
        def tr():
            xg.grad = None
            torch.autograd.backward(fn(xg), [g])
        rt = reps_of(tr, reset)
        # host time of the call alone (no events, no sync inside)
        with torch.no_grad():
            torch.cuda.synchronize()
            hs = []
            for _ in range(200):
                reset(); t = time.perf_counter(); fn(x); hs.append((time.perf_counter() - t) * 1e6)
                torch.cuda.synchronize()
        print(f"lif T={T} {dt:8s} inference {r} | host {statistics.median(hs):5.1f} us | training {rt}", flush=True)
# one bf16 and one f32 inference call, profiled
for dt in ("float32", "bfloat16"):
    dtype = getattr(torch, dt)
    fn, reset = compare.make_system("flexsn", "lif", "cuda")
    x = (torch.randn(32, 262144) * 1.5).to("cuda", dtype)
    with torch.no_grad():
        for _ in range(5): reset(); fn(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            for _ in range(20):
                reset(); fn(x); torch.cuda.synchronize()
    print(dt); print(p.key_averages().table(sort_by="cpu_time_total", row_limit=15))
