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
