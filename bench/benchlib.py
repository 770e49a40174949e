"""Timing helpers the benchmark scripts share: CUDA-event medians of a
call, replay from a CUDA graph, peak extra memory, copy bandwidth."""

import statistics
import time

import torch


def timed(fn, reps, device=torch.device("cuda")):
    """Median milliseconds of fn() over reps calls, after 3 warm-up calls:
    CUDA events around each call on a GPU, the wall clock on the CPU."""
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        if device.type != "cuda":
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
            continue
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def graphed(step):
    """`step` (a training step) captured once in a CUDA graph: its replay,
    the device's time without the host's per-call cost."""
    # Warmed up on the stream that captures: libraries set up per stream on
    # first use (cuBLAS's workspace), which a capture must not do.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    return graph.replay


def peak_extra_mib(fn, device=torch.device("cuda")):
    """Peak GPU memory fn() allocates beyond what was allocated before, MiB
    (NaN off the GPU)."""
    if device.type != "cuda":
        return float("nan")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def copy_bandwidth(device=torch.device("cuda"), mib=256):
    """Device-to-device copy, bytes read + written per second."""
    a = torch.empty(mib * 2**20 // 4, device=device)
    b = torch.empty_like(a)
    return 2 * a.numel() * 4 / (timed(lambda: b.copy_(a), 20, device) * 1e-3)


def peak_breakdown(fn, top=10):
    """What fn() has allocated at its peak (a GPU run), grouped by where:
    [(MiB, place)], largest first. A place is the innermost Python frame
    outside PyTorch (file:line function), or "backward" for what the
    autograd engine allocates. Memory allocated before fn() is not
    counted."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(stacks="python", max_entries=1_000_000,
                                             clear_history=True)
    try:
        fn()
        torch.cuda.synchronize()
        events = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)

    def replay(stop=None):
        live, cur, peak, peak_at = {}, 0, 0, 0
        for i, e in enumerate(events[:stop]):
            if e["action"] == "alloc":
                live[e["addr"]] = e
                cur += e["size"]
                if cur > peak:
                    peak, peak_at = cur, i + 1
            elif e["action"] == "free_completed" and e["addr"] in live:
                cur -= live.pop(e["addr"])["size"]
        return live, peak_at
    _, peak_at = replay()
    live, _ = replay(peak_at)
    by_place: dict = {}
    for e in live.values():
        place = "backward"
        frames = e.get("frames", [])
        if frames and frames[0].get("name") == "<module>":  # outermost first
            frames = frames[::-1]
        for f in frames:
            name = f.get("filename", "")
            if "/torch/" not in name and not name.startswith("<"):
                place = f"{name.rsplit('/', 1)[-1]}:{f.get('line')} {f.get('name')}"
                break
        by_place[place] = by_place.get(place, 0) + e["size"]
    ranked = sorted(by_place.items(), key=lambda kv: -kv[1])[:top]
    return [(round(size / 2**20, 1), place) for place, size in ranked]
