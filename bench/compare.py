"""Side-by-side timings of one neuron layer, as a user sees them (a script,
not a test; run it on the GPU machine, one run per table).

Systems, each timed with CUDA events around the Python call (median of
--reps, after warm-up; with --device cpu, wall time around the call and a
host copy for the floor), inference and training (forward + backward with
random output gradients):

  flexsn        this package: flexsn.FlexSN(core, num_states=...)
  sj-flexsn     SpikingJelly 2.0.0's FlexSN (same core), when importable
  sj-lifnode    SpikingJelly's LIFNode(step_mode="m") (lif only)
  torch-eager   the step loop in plain PyTorch
  torch-compile the same loop under torch.compile
  torch-compile-step  the single step under torch.compile, looped in Python
  floor         the fewest bytes the job must move / device copy bandwidth
                measured in this run
  eager floor   PyTorch's cheapest eager call moving those bytes, timed as
                the systems are (one elementwise op; for training, the op
                and its backward through autograd): what PyTorch itself
                takes eagerly for them on this host (not a strict bound: a
                system whose forward kernel covers the host's way to the
                backward can beat it; --no-eager-floor leaves it out)

Minimal bytes (b = bytes per element, T*NCL elements per sequence):
inference reads the inputs and writes the outputs, (n_in + n_out) T NCL b;
training also writes the state sequences it needs (forward) and reads them
back with the inputs and output gradients to write the input gradients
(backward), (3 n_in + 2 n_out + 2 n_states) T NCL b. A core's kernels may
move fewer: lif's f32 training saves h and writes only the final state
(six sequences a step against this formula's seven), so its replayed
step can read under this floor.

With --graph, also each system's call and training step captured whole
into a CUDA graph (torch.cuda.graph) and replayed: the device's time with
the host out of the way, for a user who captures a step. --graph-calls N
captures N calls in one graph and divides its replay time among them (a
graph's own launch swamps kernels of 10 us or less).

Also: peak extra GPU memory of a training step, first-call time of our
package at each T (a fresh process, an empty compilation cache), and
kernel-only figures from `flexsn-run --bench` when --flexsn-run is given.

    python3 bench/compare.py [--reps 30] [--out DIR] [--cores lif,2in2st]
        [--shapes 4x4194304,32x262144,256x65536] [--dtypes float32,bfloat16]
        [--systems flexsn,sj-flexsn,...] [--flexsn-run build/bin/flexsn-run] [--graph [--graph-calls N]]
    python3 bench/compare.py --report DIR   # results.json -> tables + plot

Results go to DIR/results.json (appended per case, so a run cut short
keeps what it measured); --report writes DIR/tables.md and DIR/lif.png.
"""

import argparse
import fnmatch
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CORE_SHAPES = {"lif": (1, 1, 1), "2in2st": (2, 2, 2)}  # (n_in, n_states, n_out)


def minimal_bytes(core, T, N, elem, training):
    n_in, n_st, n_out = CORE_SHAPES[core]
    per = (3 * n_in + 2 * n_out + 2 * n_st) if training else (n_in + n_out)
    return per * T * N * elem


# --- cores --------------------------------------------------------------------
# Ours and SpikingJelly's take the same Python core (a user's function with a
# surrogate spike). The plain-PyTorch baselines use a straight-through spike
# written with ordinary ops, so that torch.compile can fuse it.

# The arithmetic of each core, with its spike function as an argument:
# the surrogate for ours and SpikingJelly's, the straight-through spike for
# the plain-PyTorch loops.
def _lif_step(x, v, spike):
    h = v + (x - v) / 2.0
    s = spike(h - 1.0)
    return s, h * (1.0 - s)


def _tut_step(x, y, v, rho, spike):
    import torch
    h = 0.5 * v + x
    s1 = spike(h - (rho + 1.0))
    s2 = spike(h - 1.0)
    rho = 0.9 * rho + s1
    v1 = h * (1.0 - s1)
    v2 = h - s2
    yy = torch.sigmoid(y)
    v = v1 * yy + v2 * (1.0 - yy)
    return s1, s2, v, rho


# Module globals, not closures: SpikingJelly refuses a core that captures a
# module (its surrogate) in a closure.
_SPIKE = {}


def _lif(x, v):
    return _lif_step(x, v, _SPIKE["sigmoid"])


def _tut(x, y, v, rho):
    return _tut_step(x, y, v, rho, _SPIKE["atan"])


def _cores(surrogates):
    _SPIKE["sigmoid"] = surrogates.Sigmoid()
    _SPIKE["atan"] = surrogates.ATan()
    return {"lif": _lif, "2in2st": _tut}


def flexsn_cores():
    from flexsn import surrogate
    return _cores(surrogate)


def sj_cores():
    from spikingjelly.activation_based import surrogate
    return _cores(surrogate)


def torch_steps():
    """The plain-PyTorch single steps: core -> step(*inputs_t, *states) ->
    (*outputs_t, *new states)."""
    import torch

    def heaviside_sigmoid(x, alpha=4.0):
        sg = torch.sigmoid(alpha * x)
        return (x >= 0).to(x.dtype).detach() + (sg - sg.detach())

    def heaviside_atan(x, alpha=2.0):
        sg = torch.atan(math.pi / 2 * alpha * x) / math.pi + 0.5
        return (x >= 0).to(x.dtype).detach() + (sg - sg.detach())

    def lif(x, v):
        return _lif_step(x, v, heaviside_sigmoid)

    def tut(x, y, v, rho):
        return _tut_step(x, y, v, rho, heaviside_atan)
    return {"lif": lif, "2in2st": tut}


def step_loop(step, core):
    """The loop over T of a single step (states from zeros), returning the
    stacked output sequences."""
    import torch
    n_in, n_st, n_out = CORE_SHAPES[core]

    def run(*xs):
        states = [torch.zeros_like(xs[0][0]) for _ in range(n_st)]
        outs = [[] for _ in range(n_out)]
        for t in range(xs[0].shape[0]):
            r = step(*[x[t] for x in xs], *states)
            for k in range(n_out):
                outs[k].append(r[k])
            states = list(r[n_out:])
        return tuple(torch.stack(o) for o in outs)
    return run


def torch_loops():
    """The whole loop in plain PyTorch (torch.compile unrolls it)."""
    return {core: step_loop(step, core) for core, step in torch_steps().items()}


# --- systems ------------------------------------------------------------------

def module_factory(name, core):
    """A zero-argument constructor of the multi-step module of system `name`
    ("flexsn", "sj-flexsn", "sj-lifnode") over `core`, or None when the
    system does not apply or is not installed."""
    n_st = CORE_SHAPES[core][1]
    if name == "flexsn":
        import flexsn
        fn = flexsn_cores()[core]
        return lambda: flexsn.FlexSN(fn, num_states=n_st)
    if name == "sj-flexsn":
        try:
            from spikingjelly.activation_based.neuron.flexsn import FlexSN
        except Exception:
            return None
        fn = sj_cores()[core]
        return lambda: FlexSN(fn, num_states=n_st, step_mode="m")
    if name == "sj-lifnode":
        if core != "lif":
            return None
        try:
            from spikingjelly.activation_based import neuron, surrogate
        except Exception:
            return None
        return lambda: neuron.LIFNode(tau=2.0, v_threshold=1.0, v_reset=0.0,
                                      surrogate_function=surrogate.Sigmoid(),
                                      step_mode="m")
    raise ValueError(f"no module for system {name}")


def make_system(name, core, dev):
    """A callable (inputs...) -> tuple of outputs, with a reset, or None
    when the system does not apply or is not installed."""
    import torch
    if name in ("flexsn", "sj-flexsn", "sj-lifnode"):
        make = module_factory(name, core)
        if make is None:
            return None
        m = make().to(dev)
        return lambda *xs: _tuple(m(*xs)), m.reset
    if name == "torch-eager":
        return torch_loops()[core], (lambda: None)
    if name in ("torch-compile", "torch-compile-step"):
        # Each case compiles afresh: Dynamo keys its cache on the code
        # object, which every case shares, and past 8 recompiles it runs the
        # function eagerly.
        torch._dynamo.reset()
    if name == "torch-compile":
        return torch.compile(torch_loops()[core]), (lambda: None)
    if name == "torch-compile-step":
        # The single step compiled, the loop over T in Python: how a long T
        # is run under torch.compile (the whole loop unrolls T steps into
        # one graph, whose compile at T=256 takes minutes).
        return step_loop(torch.compile(torch_steps()[core]), core), (lambda: None)
    raise ValueError(f"unknown system {name}")


def without_fast_path(built):
    """Our module of make_system("flexsn", ...) with FlexSN.forward's fast
    path off: every call takes the general path (for A/B timings)."""
    call, reset = built
    reset.__self__.__dict__["_fast"] = lambda inputs: None
    return call, reset


def _tuple(r):
    return r if isinstance(r, tuple) else (r,)


# --device cpu times the host's wall clock around each call.
WALL_CLOCK = False


def time_cuda(fn, reset, reps, warmup=5):
    import torch
    for _ in range(warmup):
        reset()
        fn()
    sync()
    times = []
    for _ in range(reps):
        reset()
        if WALL_CLOCK:  # --device cpu: wall time
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
            continue
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def sync():
    import torch
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def copy_bandwidth(dev):
    """Bytes read + written per second of a large device-to-device copy."""
    import torch
    if dev == "cpu":
        n = 1 << 24
        src = torch.empty(n)
        dst = torch.empty_like(src)
        t = time.perf_counter()
        for _ in range(5):
            dst.copy_(src)
        return 2 * n * 4 * 5 / (time.perf_counter() - t)
    n = 256 * 1024 * 1024  # 1 GiB of float32
    src = torch.empty(n, device=dev)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n * 4 / (statistics.median(times) * 1e-3)


def time_graphed(body, reset, reps, calls=1):
    """Median time of one replay of `body` (reset first) captured whole into
    a CUDA graph, over `calls`: the device's time for the call with no host
    in between. With calls > 1 the graph holds that many calls and the
    replay's time is divided among them, so that a graph's launch (10-20
    us, varying by 10 us) does not swamp a small kernel.
    Warm-up on a side stream, as capture requires."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            reset()
            body()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            reset()
            body()
    try:
        return time_cuda(graph.replay, lambda: None, reps) / calls
    finally:
        del graph
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def run_case(system, core, T, N, dtype_name, reps, dev, graph=False, graph_calls=1,
             first_only=False):
    import torch
    dtype = getattr(torch, dtype_name)
    made = make_system(system, core, dev)
    if made is None:
        return None
    fn, reset = made
    n_in = CORE_SHAPES[core][0]
    # Data drawn on the CPU: after a failed CUDA graph capture (--graph),
    # every later draw from the CUDA generator in the process failed
    # ("Offset increment outside graph capture"), so one case's
    # failure failed all the cases after it.
    g = torch.Generator().manual_seed(0)
    xs = [(torch.randn(T, N, generator=g) * 1.5).to(dev, dtype) for _ in range(n_in)]
    result = {}
    t0 = time.perf_counter()
    with torch.no_grad():
        reset()
        fn(*xs)
    sync()
    result["first_inference_s"] = time.perf_counter() - t0
    if not first_only:
        with torch.no_grad():
            result["inference_ms"] = time_cuda(lambda: fn(*xs), reset, reps)
    xg = [x.clone().requires_grad_() for x in xs]
    reset()
    outs = fn(*xg)
    grads = [torch.randn(o.shape, generator=g).to(dev, o.dtype) for o in outs]
    del outs  # its graph would keep the leaves' gradient accumulators alive

    def train():
        for x in xg:
            x.grad = None
        o = fn(*xg)
        torch.autograd.backward(o, grads)
    t0 = time.perf_counter()
    reset()
    train()
    sync()
    result["first_training_s"] = time.perf_counter() - t0
    if first_only:
        return result
    result["training_ms"] = time_cuda(train, reset, reps)
    if dev == "cpu":
        result["peak_extra_mib"] = float("nan")
        return result
    # Peak memory beyond what the inputs, gradients and output grads hold.
    reset()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(dev)
    base = torch.cuda.memory_allocated(dev)
    train()
    torch.cuda.synchronize()
    result["peak_extra_mib"] = (torch.cuda.max_memory_allocated(dev) - base) / 2**20
    if graph:
        # The whole call, and the whole training step, replayed from a CUDA
        # graph: what a user who captures a step gets, host overhead gone.
        def infer():
            with torch.no_grad():
                fn(*xs)
        # Fresh leaves: with the eager timings' xg, the first captured step
        # of a process failed (cudaErrorStreamCaptureInvalidated, ours and
        # torch.compile alike); with these it captures. Likely cause: a
        # leaf's gradient accumulator made on the
        # default stream, which the backward's end then synchronizes with.
        leaves = [x.detach().clone().requires_grad_() for x in xs]

        def train_captured():
            for x in leaves:
                x.grad = None
            torch.autograd.backward(fn(*leaves), grads)
        for what, body in (("inference", infer), ("training", train_captured)):
            try:
                result[f"graph_{what}_ms"] = time_graphed(body, reset, reps, graph_calls)
                result["graph_calls"] = graph_calls
            except Exception as e:  # noqa: BLE001 (a system that cannot be captured)
                result[f"graph_{what}_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    return result


def first_call(core, T, N, dev):
    """Our first call (trace, compile, load, run) in a fresh process with an
    empty compilation cache: inference, then a training step."""
    code = f"""
import time, torch, sys
sys.path.insert(0, {HERE!r})
t0 = time.perf_counter()
import compare, flexsn
cores = compare.flexsn_cores()
m = flexsn.FlexSN(cores[{core!r}], num_states={CORE_SHAPES[core][1]}).to({dev!r})
xs = [torch.randn({T}, {N}, device={dev!r}) for _ in range({CORE_SHAPES[core][0]})]
# PyTorch's own first backward with gradient tensors (it imports sympy)
# stays out of our time.
w = torch.ones(2, device={dev!r}, requires_grad=True)
(w * 2).backward(torch.ones(2, device={dev!r}))
torch.cuda.synchronize() if {dev!r} == "cuda" else None
t1 = time.perf_counter()
with torch.no_grad():
    m(*xs)
torch.cuda.synchronize() if {dev!r} == "cuda" else None; t2 = time.perf_counter()
m.reset()
xg = [x.clone().requires_grad_() for x in xs]
o = m(*xg); o = o if isinstance(o, tuple) else (o,)
torch.autograd.backward(o, [torch.ones_like(t) for t in o])
torch.cuda.synchronize() if {dev!r} == "cuda" else None; t3 = time.perf_counter()
print(t2 - t1, t3 - t2)
"""
    with tempfile.TemporaryDirectory() as cache:
        # Cold for the driver too: its own PTX cache would serve a program
        # an earlier process of this run compiled.
        env = dict(os.environ, FLEXSN_CACHE_DIR=cache, CUDA_CACHE_DISABLE="1")
        r = subprocess.run([sys.executable, "-c", code], env=env,
                           capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return {"error": r.stderr[-500:]}
    inf, train = map(float, r.stdout.split()[-2:])
    return {"first_inference_s": inf, "first_training_s": train}


def eager_floor(core, T, N, dtype_name, reps, dev):
    """PyTorch's cheapest eager call that moves the case's minimal bytes,
    timed as the systems are (time_cuda): for inference one elementwise op,
    z * 2, whose read and write are each half the inference floor's bytes;
    for training the same op on a tensor that requires grad and its
    backward through the autograd engine (MulBackward: grad * 2, stolen by
    z's accumulator, no copy), each of the two kernels moving half the
    training floor's bytes. One launch per kernel at about a copy's speed
    and PyTorch's own least host time: what PyTorch itself takes eagerly
    for these bytes on this host, where the floor column is the device
    alone. Not a strict bound on other systems: between the training
    step's two launches the host's time shows only where the forward
    kernel is too short to cover it, and this forward is short."""
    import torch
    dtype = getattr(torch, dtype_name)
    elem = 2 if dtype_name == "bfloat16" else 4
    numel = {w: minimal_bytes(core, T, N, elem, w == "training") // (2 * elem)
             for w in ("inference", "training")}
    numel["training"] //= 2  # the forward's and the backward's kernels share it
    z = torch.randn(numel["inference"], device=dev).to(dtype)
    with torch.no_grad():
        inference = time_cuda(lambda: z * 2, lambda: None, reps)
    del z
    z = torch.randn(numel["training"], device=dev).to(dtype).requires_grad_()
    g = torch.randn(numel["training"], device=dev).to(dtype)

    def step():
        z.grad = None
        (z * 2).backward(g)
    training = time_cuda(step, lambda: None, reps)
    del z, g
    return {"inference_ms": inference, "training_ms": training}


def kernel_only(flexsn_run, core, T, N, dtype_name):
    """flexsn-run --bench figures (kernel time and % of copy) per variant."""
    src = {"lif": "examples/lif.mlir", "2in2st": "examples/two_in_two_state.mlir"}[core]
    dt = {"float32": "f32", "bfloat16": "bf16"}[dtype_name]
    out = {}
    for variant in ("inference", "final_state", "forward", "backward"):
        cmd = [flexsn_run, os.path.join(ROOT, src), "--backend=cuda", "--bench",
               f"--T={T}", f"--ncl={N}", f"--dtype={dt}", f"--variant={variant}"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        out[variant] = (r.stdout + r.stderr).strip().splitlines()[-3:]
    return out


def append(path, record):
    data = json.load(open(path)) if os.path.exists(path) else {"runs": []}
    data["runs"].append(record)
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=1)
    os.replace(path + ".tmp", path)


def measure(args):
    import torch
    global WALL_CLOCK
    dev = args.device
    WALL_CLOCK = dev == "cpu"
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "results.json")
    versions = {"torch": torch.__version__,
                "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
                "python": sys.version.split()[0]}
    try:
        import spikingjelly
        from importlib.metadata import version
        versions["spikingjelly"] = version("spikingjelly")
    except Exception:
        versions["spikingjelly"] = None
    try:
        import triton
        versions["triton"] = triton.__version__
    except Exception:
        pass
    import flexsn
    versions["flexsn"] = flexsn.__file__
    versions["flexsn_call_path"] = flexsn.call_path()
    bw = copy_bandwidth(dev)
    append(path, {"kind": "setup", "versions": versions, "copy_bytes_per_s": bw})
    print(f"{versions['device']}: copy {bw / 1e12:.2f} TB/s; torch {versions['torch']}, "
          f"spikingjelly {versions['spikingjelly']}; flexsn call path "
          f"{versions['flexsn_call_path']}", flush=True)
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")]
    for core in args.cores.split(","):
        for T, N in shapes:
            for dtype_name in args.dtypes.split(","):
                elem = 2 if dtype_name == "bfloat16" else 4
                floor = {k: minimal_bytes(core, T, N, elem, k == "training") / bw * 1e3
                         for k in ("inference", "training")}
                append(path, {"kind": "floor", "core": core, "T": T, "N": N,
                              "dtype": dtype_name, "inference_ms": floor["inference"],
                              "training_ms": floor["training"]})
                print(f"{core} T={T} NCL={N} {dtype_name}: floor inference "
                      f"{floor['inference']:.4f} ms, training {floor['training']:.4f} ms",
                      flush=True)
                if args.eager_floor and not args.first_only:
                    ef = eager_floor(core, T, N, dtype_name, args.reps, dev)
                    append(path, {"kind": "eager_floor", "core": core, "T": T, "N": N,
                                  "dtype": dtype_name, **ef})
                    print(f"  {'eager floor':14s} inference {ef['inference_ms']:.4f} ms  "
                          f"training {ef['training_ms']:.4f} ms", flush=True)
                    if dev == "cuda":
                        torch.cuda.empty_cache()
                for system in args.systems.split(","):
                    name = f"{system}:{core}:{T}:{dtype_name}"
                    if any(fnmatch.fnmatch(name, pat) for pat in args.skip.split(",") if pat):
                        append(path, {"kind": "skipped", "system": system, "core": core,
                                      "T": T, "N": N, "dtype": dtype_name})
                        continue
                    try:
                        r = run_case(system, core, T, N, dtype_name, args.reps, dev,
                                     graph=args.graph, graph_calls=args.graph_calls,
                                     first_only=args.first_only)
                    except Exception as e:  # a peer that cannot run a case
                        r = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                    if dev == "cuda":
                        torch.cuda.empty_cache()
                    if r is None:
                        continue
                    kind = "first_only" if args.first_only else "time"
                    append(path, {"kind": kind, "system": system, "core": core,
                                  "T": T, "N": N, "dtype": dtype_name, **r})
                    if args.first_only:
                        print(f"  {system:14s} " + (
                            f"first inference {r['first_inference_s']:.2f} s, first training "
                            f"{r['first_training_s']:.2f} s" if "error" not in r
                            else r["error"]), flush=True)
                        continue
                    print(f"  {system:14s} " + (
                        f"inference {r['inference_ms']:.4f} ms  training "
                        f"{r['training_ms']:.4f} ms  peak +{r['peak_extra_mib']:.0f} MiB  "
                        f"first {r['first_inference_s']:.2f}/{r['first_training_s']:.2f} s"
                        if "error" not in r else r["error"]), flush=True)
                    if args.graph and "error" not in r and dev == "cuda":
                        print(f"  {system:14s} graph replay: " + "  ".join(
                            f"{w} {r[f'graph_{w}_ms']:.4f} ms" if f"graph_{w}_ms" in r
                            else f"{w} {r.get(f'graph_{w}_error')}"
                            for w in ("inference", "training")), flush=True)
                if args.flexsn_run:
                    k = kernel_only(args.flexsn_run, core, T, N, dtype_name)
                    append(path, {"kind": "kernel", "core": core, "T": T, "N": N,
                                  "dtype": dtype_name, "lines": k})
                    for v, lines in k.items():
                        print(f"  kernel {v:12s} " + " | ".join(lines), flush=True)
    if args.first_call:
        for core in args.cores.split(","):
            for T in (4, 32, 256):
                r = first_call(core, T, 65536, dev)
                append(path, {"kind": "first_call", "core": core, "T": T, **r})
                print(f"first call {core} T={T}: {r}", flush=True)


# --- report -------------------------------------------------------------------

SYSTEMS = ["flexsn", "sj-flexsn", "sj-lifnode", "torch-compile", "torch-compile-step",
           "torch-eager"]


def case_table(cases, systems, cell):
    """The lines of a markdown table with a row per case and a column per
    system, each cell cell(case, system)."""
    lines = ["| case | " + " | ".join(systems) + " |", "|---|" + "---|" * len(systems)]
    for key in cases:
        core, T, N, dt = key
        lines.append("| " + " | ".join([f"{core} T={T} NCL={N} {dt}"] +
                                       [cell(key, s) for s in systems]) + " |")
    return lines


def report(out):
    data = json.load(open(os.path.join(out, "results.json")))["runs"]
    setup = [r for r in data if r["kind"] == "setup"][-1]
    v = setup["versions"]
    lines = [f"Device: {v['device']}; copy {setup['copy_bytes_per_s'] / 1e12:.2f} TB/s "
             f"(read + write, measured in the same run); torch {v['torch']}, "
             f"triton {v.get('triton')}, spikingjelly {v.get('spikingjelly')}; flexsn "
             f"call path: {v.get('flexsn_call_path', 'ctypes (before the native path)')}.", ""]
    cases = []
    for r in data:
        key = (r.get("core"), r.get("T"), r.get("N"), r.get("dtype"))
        if r["kind"] == "floor" and key not in cases:
            cases.append(key)
    times = {}
    floors = {}
    eager_floors = {}
    for r in data:
        key = (r.get("core"), r.get("T"), r.get("N"), r.get("dtype"))
        if r["kind"] == "time":
            times[key + (r["system"],)] = r
        elif r["kind"] == "floor":
            floors[key] = r
        elif r["kind"] == "eager_floor":
            eager_floors[key] = r
    skipped = {(r["core"], r["T"], r["N"], r["dtype"], r["system"])
               for r in data if r["kind"] == "skipped"}
    present = [s for s in SYSTEMS if any(k[-1] == s for k in times)]
    tables = [(w, w, f"### {w} (ms, CUDA events around the call, median)")
              for w in ("inference", "training")]
    ncalls = sorted({r.get("graph_calls", 1) for r in times.values() if "graph_calls" in r})
    per = "" if ncalls in ([], [1]) else \
        f", per call of {'/'.join(map(str, ncalls))} captured in one graph"
    tables += [(w, f"graph_{w}", f"### {w}, the whole {'call' if w == 'inference' else 'step'}"
                f" replayed from a CUDA graph (ms, median of replays{per})")
               for w in ("inference", "training")
               if any(f"graph_{w}_ms" in r or f"graph_{w}_error" in r for r in times.values())]
    if eager_floors:
        lines += ["Eager floor: PyTorch's cheapest eager call moving the same minimal "
                  "bytes (`eager_floor()`: one elementwise op; for training that op "
                  "and its backward through autograd), timed as the systems are.", ""]
    for what, field, title in tables:
        # The eager floor stands beside the eager timings only.
        ef = bool(eager_floors) and field == what

        def cell(key, s, what=what, field=field):
            if s == "floor":
                return f"{floors[key][what + '_ms']:.4f}"
            if s == "eager floor":
                r = eager_floors.get(key)
                return "–" if r is None else f"{r[what + '_ms']:.4f}"
            r = times.get(key + (s,))
            if r is None:
                return "not run" if key + (s,) in skipped else "–"
            if "error" in r or f"{field}_error" in r:
                return "error"
            return f"{r[field + '_ms']:.4f}" if f"{field}_ms" in r else "–"
        lines += [title, ""]
        lines += case_table(cases, ["floor"] + (["eager floor"] if ef else []) + present, cell)
        lines.append("")
    lines.append("### peak extra GPU memory in training (MiB)")
    lines.append("")

    def peak(key, s):
        r = times.get(key + (s,))
        return "–" if r is None or "error" in r else f"{r['peak_extra_mib']:.0f}"
    lines += case_table(cases, present, peak)
    lines.append("")
    fc = [r for r in data if r["kind"] == "first_call"]
    if fc:
        lines.append("### first call of our package (fresh process, empty caches: ours and the CUDA driver's; s)")
        lines.append("")
        lines.append("| core | T | inference | training step |")
        lines.append("|---|---|---|---|")
        for r in fc:
            if "error" in r:
                lines.append(f"| {r['core']} | {r['T']} | error | error |")
            else:
                lines.append(f"| {r['core']} | {r['T']} | {r['first_inference_s']:.2f} | "
                             f"{r['first_training_s']:.2f} |")
        lines.append("")
    # Each system's first calls in the run (compile included): from a
    # --first-only process where there was one (it ran with cold caches),
    # else from the timed case's own first call.
    firsts = {}
    for r in data:
        if r["kind"] in ("time", "first_only") and "error" not in r:
            key = (r["core"], r["T"], r["N"], r["dtype"], r["system"])
            if r["kind"] == "first_only" or key not in firsts:
                firsts[key] = (r["first_inference_s"], r["first_training_s"],
                               r["kind"] == "first_only")
    if firsts:
        lines.append("### first calls in this run (s: first inference / first training "
                     "step; * from a --first-only process with cold compile caches)")
        lines.append("")
        lines.append("Each in the process that timed the case, after the cases before "
                     "it: a system's caches may be warm from those (ours compiles once "
                     "for every T and N; PyTorch's first backward of a process imports "
                     "and sets up its own parts)." + (
                         " Our cold first calls: the table above." if fc else ""))
        lines.append("")
        def first(key, s):
            f = firsts.get(key + (s,))
            return "–" if f is None else f"{f[0]:.2f} / {f[1]:.2f}" + (" *" if f[2] else "")
        lines += case_table(cases, [s for s in SYSTEMS if any(k[-1] == s for k in firsts)],
                            first)
        lines.append("")
    with open(os.path.join(out, "tables.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        print("(matplotlib not installed: no plot)")
        return
    # One panel per table above: eager, and replayed from a CUDA graph when
    # the run has those figures.
    lif = sorted((k for k in cases if k[0] == "lif" and k[3] == "float32"), key=lambda k: k[1])
    if not lif or not present:
        print("(no lif fp32 timings: no plot)")
        return
    rows = (len(tables) + 1) // 2
    fig, axes = plt.subplots(rows, 2, figsize=(11, 4 * rows), squeeze=False)
    for ax, (what, field, title) in zip(axes.flat, tables):
        xs = [k[1] for k in lif]
        ax.plot(xs, [floors[k][what + "_ms"] for k in lif], "k--", label="floor")
        if field == what and all(k in eager_floors for k in lif):
            ax.plot(xs, [eager_floors[k][what + "_ms"] for k in lif], "k:",
                    label="eager floor")
        for s in present:
            pts = [(k[1], times[k + (s,)][field + "_ms"]) for k in lif
                   if field + "_ms" in times.get(k + (s,), {})]
            if pts:
                ax.plot(*zip(*pts), "o-", label=s)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("T (NCL " + ", ".join(f"{k[2]}" for k in lif) + ")")
        ax.set_ylabel("ms")
        ax.set_title(f"lif fp32 {what}" + (", CUDA graph replay" if field != what else ""))
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "lif.png"), dpi=110)
    print(f"plot: {os.path.join(out, 'lif.png')}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--device", default="cuda",
                   help="cuda, or cpu: the CPU backend against the peers on the "
                        "host (wall time around the call; no peak memory, no graphs)")
    p.add_argument("--out", default=os.path.join(HERE, "results", "compare"))
    p.add_argument("--cores", default="lif,2in2st")
    p.add_argument("--shapes", default="4x4194304,32x262144,256x65536")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--skip", default="",
                   help="comma-separated SYSTEM:CORE:T:DTYPE patterns (fnmatch) not "
                        "to run, e.g. 'sj-*:*:256:*' (SpikingJelly compiles per T)")
    p.add_argument("--flexsn-run", default=None)
    p.add_argument("--first-call", action="store_true")
    p.add_argument("--no-eager-floor", dest="eager_floor", action="store_false",
                   help="leave out PyTorch's eager floor per case (eager_floor())")
    p.add_argument("--graph", action="store_true",
                   help="also time each call and training step replayed from a CUDA graph")
    p.add_argument("--graph-calls", type=int, default=1,
                   help="calls captured in one graph (its replay time divided among them)")
    p.add_argument("--first-only", action="store_true",
                   help="only each case's first inference and first training call "
                        "(kind first_only in results.json): fills the systems' "
                        "compile caches, e.g. Triton's on disk, so that a later "
                        "process times a slow-to-compile peer within a device call")
    p.add_argument("--report", default=None, metavar="DIR")
    args = p.parse_args()
    if args.report:
        report(args.report)
    else:
        measure(args)


if __name__ == "__main__":
    main()
