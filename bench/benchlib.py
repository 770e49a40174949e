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


def peak_breakdown(fn, top=10, points=24) -> dict:
    """What fn() has allocated at its peak (a GPU run), grouped by where,
    and when the peak comes. "places": [(MiB, place)], largest first, a
    place the innermost Python frame outside PyTorch (file:line function),
    or "backward" for what the autograd engine allocates; "peak_at": the
    peak's position in fn()'s allocator events (0 its start, 1 its end);
    "curve_mib": the live MiB at `points` evenly spaced events; "peak_place":
    where the allocation that made the peak came from. Memory allocated
    before fn() is not counted."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(stacks="python", max_entries=1_000_000,
                                             clear_history=True)
    try:
        fn()
        torch.cuda.synchronize()
        events = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)

    def place_of(e):
        frames = e.get("frames", [])
        if frames and frames[0].get("name") == "<module>":  # outermost first
            frames = frames[::-1]
        for f in frames:
            name = f.get("filename", "")
            if "/torch/" not in name and not name.startswith("<"):
                return f"{name.rsplit('/', 1)[-1]}:{f.get('line')} {f.get('name')}"
        return "backward"

    samples = {round(i * (len(events) - 1) / max(points - 1, 1)) for i in range(points)}

    def replay(stop=None):
        live, cur, peak, peak_at, curve = {}, 0, 0, 0, []
        for i, e in enumerate(events[:stop]):
            if e["action"] == "alloc":
                live[e["addr"]] = e
                cur += e["size"]
                if cur > peak:
                    peak, peak_at = cur, i + 1
            elif e["action"] == "free_completed" and e["addr"] in live:
                cur -= live.pop(e["addr"])["size"]
            if i in samples:
                curve.append(round(cur / 2**20, 1))
        return live, peak_at, curve
    _, peak_at, curve = replay()
    live, _, _ = replay(peak_at)
    by_place: dict = {}
    for e in live.values():
        place = place_of(e)
        by_place[place] = by_place.get(place, 0) + e["size"]
    ranked = sorted(by_place.items(), key=lambda kv: -kv[1])[:top]
    return {"places": [(round(size / 2**20, 1), place) for place, size in ranked],
            "peak_at": round(peak_at / max(len(events), 1), 3), "curve_mib": curve,
            "peak_place": place_of(events[peak_at - 1]) if peak_at else None}


# (category, name fragments), first match wins: cuDNN's batch norms and
# layout changes before its convolutions, convolutions' implicit GEMMs
# before plain GEMMs
_KERNEL_CATEGORIES = (
    ("neuron", ("core_forward", "core_backward", "core_infer", "lif", "neuron",
                "spike", "flexsn")),
    ("batch norm", ("batch_norm", "batchnorm", "bn_fw", "bn_bw", "welford")),
    ("layout change", ("nchwtonhwc", "nhwctonchw", "transpose", "permute")),
    ("convolution", ("conv", "fprop", "dgrad", "wgrad", "implicit", "winograd",
                     "cudnn", "xmma")),
    ("matmul", ("gemm", "gemv", "cublas", "cutlass", "matmul", "addmm", "::mm", "bmm")),
    ("pooling", ("pool",)),
    ("reduction", ("reduce", "sum", "mean", "norm")),
)


def kernel_category(name: str) -> str:
    """The kind of work a kernel (or, off the GPU, an operator) does, from
    its name."""
    low = name.lower()
    for category, fragments in _KERNEL_CATEGORIES:
        if any(f in low for f in fragments):
            return category
    return "elementwise and other"


def profile_by_category(fn, steps: int, device, top: int = 8) -> dict:
    """fn() run `steps` times under torch.profiler: the device's time per
    step (ms) by kernel category, the `top` kernels by time, and every
    kernel as [ms per step, launches per step, category, name]; on a GPU
    also the host's own CPU time per step by operator or runtime call
    (`host_top`, [ms, calls per step, name]). On the CPU, operators' own
    CPU time instead (a smoke run: no kernels)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + \
        ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    fn()  # outside the trace: one-off work
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    with profile(activities=activities) as prof:
        for _ in range(steps):
            fn()
        sync()
    by_category: dict = {}
    kernels = []
    host = []
    averages = prof.key_averages()
    if device.type == "cuda":
        # the host's side of a step: operators and runtime calls by their
        # own CPU time (a compiled step without graphs is bound by it)
        host = sorted(((round(e.self_cpu_time_total / 1e3 / steps, 4), e.count / steps,
                        e.key[:120]) for e in averages
                       if e.device_type == DeviceType.CPU and e.self_cpu_time_total > 0),
                      reverse=True)
    for e in averages:
        if device.type == "cuda":
            if e.device_type != DeviceType.CUDA:
                continue
            us = e.self_device_time_total
        else:
            if not e.key.startswith("aten::"):
                continue
            us = e.self_cpu_time_total
        if us <= 0:
            continue
        ms = us / 1e3 / steps
        category = kernel_category(e.key)
        by_category[category] = by_category.get(category, 0.0) + ms
        kernels.append((round(ms, 4), e.count / steps, category, e.key[:160]))
    kernels.sort(reverse=True)
    return {"ms_per_step": {k: round(v, 4) for k, v in
                            sorted(by_category.items(), key=lambda kv: -kv[1])},
            "top_kernels": [(ms, category, name[:90]) for ms, _, category, name in kernels[:top]],
            "kernels": kernels,
            "launches_per_step": round(sum(k[1] for k in kernels), 1),
            "host_ms_per_step": round(sum(h[0] for h in host), 4),
            "host_top": host[:top * 3]}

