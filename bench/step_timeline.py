"""Where the time of one training step goes on the GPU: a step as
bench/compare.py times it (clear the leaves' grads, our FlexSN module's
call, torch.autograd.backward with fixed output grads), profiled with
torch.profiler (CPU and CUDA activity). For the median step it prints the
host's calls that launch work (CUDA runtime and driver calls) and the
device's kernels and memsets, each with its start and end in microseconds
from the step's start on the host, so that idle gaps on the device and
what the host was doing during them can be read off. Also: the step's
time with CUDA events around it (as compare.py times it) and replayed from
a CUDA graph (the device's time alone).

    python3 bench/step_timeline.py [--core lif|2in2st] [--T 4] [--N 4194304]
                                   [--dtype float32] [--system flexsn]
                                   [--trace FILE.json] [--no-profile]
"""

import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--core", default="2in2st")
    p.add_argument("--T", type=int, default=4)
    p.add_argument("--N", type=int, default=4194304)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--system", default="flexsn")
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--trace", default=None, help="also write the chrome trace here")
    p.add_argument("--no-profile", action="store_true",
                   help="only the CUDA-event and replayed times (for A/B runs)")
    a = p.parse_args()
    dev = "cuda"
    dtype = getattr(torch, a.dtype)
    fn, reset = compare.make_system(a.system, a.core, dev)
    n_in = compare.CORE_SHAPES[a.core][0]
    g = torch.Generator().manual_seed(0)
    xs = [(torch.randn(a.T, a.N, generator=g) * 1.5).to(dev, dtype).requires_grad_()
          for _ in range(n_in)]
    reset()
    outs = fn(*xs)
    grads = [torch.randn(o.shape, generator=g).to(dev, o.dtype) for o in outs]
    del outs

    def step():
        for x in xs:
            x.grad = None
        torch.autograd.backward(fn(*xs), grads)

    events_ms = compare.time_cuda(step, reset, 30)
    print(f"{a.system} {a.core} T={a.T} NCL={a.N} {a.dtype} training step: "
          f"CUDA events {events_ms:.4f} ms", flush=True)
    try:
        replay = compare.time_graphed(step, reset, 30)
        print(f"  replayed from a CUDA graph {replay:.4f} ms", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"  graph capture failed: {type(e).__name__}: {e}", flush=True)

    if a.no_profile:
        return
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    for _ in range(5):
        reset()
        step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(a.steps):
            reset()
            torch.cuda.synchronize()
            with torch.profiler.record_function("step"):
                step()
            torch.cuda.synchronize()
    path = a.trace or "/tmp/step_timeline_trace.json"
    prof.export_chrome_trace(path)
    trace = json.load(open(path))["traceEvents"]
    steps = sorted((e for e in trace if e.get("name") == "step" and e.get("ph") == "X"
                    and e.get("cat") in ("user_annotation", "cpu_op")), key=lambda e: e["ts"])
    launches = [e for e in trace if e.get("ph") == "X"
                and e.get("cat") in ("cuda_runtime", "cuda_driver")]
    device = [e for e in trace if e.get("ph") == "X"
              and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    spans = []
    for s in steps:
        t0 = s["ts"]
        nxt = [o["ts"] for o in steps if o["ts"] > t0]
        t1 = min(nxt) if nxt else float("inf")
        dev_ev = [e for e in device if t0 <= e["ts"] < t1]
        host_ev = [e for e in launches if t0 <= e["ts"] < s["ts"] + s["dur"]]
        end = max([e["ts"] + e["dur"] for e in dev_ev] or [t0])
        spans.append((end - t0, s, host_ev, dev_ev))
    spans.sort(key=lambda x: x[0])
    total, s, host_ev, dev_ev = spans[len(spans) // 2]
    t0 = s["ts"]
    print(f"median profiled step: {total:.1f} us from the host's step start to the "
          f"device's last end (steps: {statistics.median([x[0] for x in spans]):.1f} us "
          f"median, host call {s['dur']:.1f} us)")
    rows = [("host", e) for e in host_ev] + [("device", e) for e in dev_ev]
    rows.sort(key=lambda r: r[1]["ts"])
    for where, e in rows:
        name = e["name"]
        if len(name) > 70:
            name = name[:67] + "..."
        print(f"  {where:6s} {e['ts'] - t0:9.1f} {e['ts'] + e['dur'] - t0:9.1f}  {name}")
    busy = sum(e["dur"] for e in dev_ev)
    print(f"  device busy {busy:.1f} us of {total:.1f}")


if __name__ == "__main__":
    main()
