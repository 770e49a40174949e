"""Whole-network training steps against SpikingJelly 2.0, time and peak
memory (a script, not a test; run it on the GPU machine).

Networks (the neuron: SpikingJelly's LIFNode defaults, tau 2, threshold 1,
hard reset to 0, sigmoid surrogate of alpha 4):

  resnet18  SpikingJelly's spiking_resnet18 (activation_based.model), 10
            classes, CIFAR-10 shapes: [T=4, B=64, 3, 32, 32] analog input
  shd       700-256-256-20 fully connected, LIF after the first two layers,
            [T=250, B=256, 700] input spikes (5% rate), as for SHD

A training step is the forward, the cross-entropy of the mean over T and
the backward (gradients set to None before; no optimizer step), in float32
and under bfloat16 autocast. Systems, each in its own process:

  sj                SpikingJelly 2.0 as it comes (its LIFNode picks its own
                    CUDA path)
  sj-memopt-L       memopt.optimize_memory at level L = 1..4, SpikingJelly's
                    own configuration for its ResNets (targets: the blocks;
                    split_fn: their layers; can_chunk: convolutions, linear
                    layers and neurons; compress=True, Bit compressor)
  sj-ckpt-C         each block checkpointed with spike compressor C (bool,
                    uint8, bit, sparse) via memopt.checkpoint_module
  sj-compile        torch.compile of the model with SpikingJelly's neurons (its
                    Triton kernels as custom operators)
  sj-torch-compile  torch.compile of the model with SpikingJelly's PyTorch
                    neurons (SJ_LIF_CUDA_IMPLEMENTATION=torch)
  ours              flexsn.convert(model), eager
  ours-bits         ours inside flexsn.compact_spikes(): saved spikes at 1 bit
  ours-bytes        ours inside flexsn.compact_spikes(bits=False): 1 byte
  ours-compile      torch.compile(flexsn.convert(model)); ours-bits-compile
                    inside flexsn.compact_spikes() (packed in the graphs)
  S-graphed         system S's eager step captured in a CUDA graph and
                    replayed (sj, ours, ours-bits): no host cost per step
  S-compile-ro      torch.compile(mode="reduce-overhead") (sj, ours): the
                    compiled step in CUDA graphs
  ...-cl...         the same in channels-last (resnet18): the weights and
                    each step of the input laid out channels-last
  ...-rc...         the same inside flexsn.recompute_states(): each neuron
                    keeps only its input, its backward runs its forward again

Per system and dtype: median step time over --reps (CUDA events around the
step), the peak memory allocated beyond the weights and the input (during
one step after the first, or for the CUDA-graph systems over warm-up,
capture and replays, as a graph's pool keeps its memory from capture on;
neuron states and gradients of earlier steps freed before), the first step's time (compiles included),
the loss and the first layer's weight gradient (compared across systems:
the same weights and input; and the last timed step's, a replay's for the
graphs, which must match), the bytes of what autograd saves (by kind: spikes,
other floats, integers; sj, ours, their compiled and -rc forms), and the neuron layers' floor: the
bytes a fused LIF training step must move (input, spikes and one saved
sequence written; output gradient and the saved sequence read, input
gradient written) over the copy bandwidth measured in the same run.

    python3 bench/networks.py [--nets resnet18,shd] [--systems ...]
        [--dtypes float32,bfloat16] [--reps 20] [--timeout 300] [--breakdown]
        [--profile] [--parallel N]
        [--out bench/results/networks/results.json]
    python3 bench/networks.py --plot PNG RESULTS.json...   (time vs memory)
"""

import argparse
import contextlib
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEMS = (["sj"] + [f"sj-memopt-{level}" for level in (1, 2, 3, 4)]
           + [f"sj-ckpt-{c}" for c in ("bool", "uint8", "bit", "sparse")]
           + ["sj-compile", "sj-torch-compile", "ours", "ours-bits", "ours-bytes",
              "ours-compile", "sj-graphed", "ours-graphed", "ours-bits-graphed",
              "sj-compile-ro", "ours-compile-ro", "sj-cl", "ours-cl", "sj-cl-graphed",
              "ours-cl-graphed", "ours-bits-cl-graphed", "sj-compile-cl-ro",
              "ours-compile-cl-ro", "ours-bits-compile", "ours-bits-compile-ro",
              "ours-bits-compile-cl-ro", "ours-rc", "ours-rc-compile", "ours-bits-rc-compile",
              "ours-bits-rc-compile-ro", "ours-rc-graphed", "ours-cl-rc-graphed",
              "ours-bits-cl-rc-graphed"])
NETS = {"resnet18": dict(T=4, batch=64), "shd": dict(T=250, batch=256)}


# -- one system in this process -------------------------------------------

def build(net_name):
    import torch
    from torch import nn
    from spikingjelly.activation_based import functional, layer, neuron
    torch.manual_seed(0)  # the same weights for every system
    if net_name == "resnet18":
        from spikingjelly.activation_based.model import spiking_resnet
        net = spiking_resnet.spiking_resnet18(spiking_neuron=neuron.LIFNode, num_classes=10)
        block = spiking_resnet.BasicBlock

        def split(m):
            if not isinstance(m, block):
                return ()
            names = ("conv1", "bn1", "sn1", "conv2", "bn2", "sn2")
            if m.downsample is not None:
                names += ("downsample",)
            return tuple(getattr(m, n) for n in names)
    else:
        class Block(nn.Sequential):
            """Linear then LIF: memopt's checkpoint target."""

            def __init__(self, cin, cout):
                super().__init__(layer.Linear(cin, cout), neuron.LIFNode(step_mode="m"))
        net = nn.Sequential(Block(700, 256), Block(256, 256), layer.Linear(256, 20))
        block = Block

        def split(m):
            return tuple(m) if isinstance(m, block) else ()
    functional.set_step_mode(net, "m")
    can_chunk = (lambda m: isinstance(m, (layer.Conv2d, layer.Linear, neuron.BaseNode)))
    return net, block, split, can_chunk


def data(net_name, T, batch, device):
    import torch
    g = torch.Generator().manual_seed(1)
    if net_name == "resnet18":
        x = torch.rand(T, batch, 3, 32, 32, generator=g)
        classes = 10
    else:
        x = (torch.rand(T, batch, 700, generator=g) < 0.05).float()
        classes = 20
    y = torch.randint(0, classes, (batch,), generator=g)
    return x.to(device), y.to(device)


def saved_bytes(net, step_forward):
    """What autograd saves in one forward beyond the weights (each storage
    span once), MiB by kind: 0/1 floats, other floats, integers."""
    import torch
    seen, kinds = set(), {"spikes": 0, "float": 0, "int": 0}
    weights = {p.untyped_storage().data_ptr() for p in net.parameters()}

    def pack(t):
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
        if key not in seen and key[0] not in weights:
            seen.add(key)
            n = t.numel() * t.element_size()
            if not t.is_floating_point():
                kinds["int"] += n
            elif bool(((t == 0) | (t == 1)).all()):
                kinds["spikes"] += n
            else:
                kinds["float"] += n
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = step_forward()
    del loss
    return {k: v / 2**20 for k, v in kinds.items()}


def neuron_elements(net, forward):
    """Neurons a step: the sum over neuron layers of their input's elements."""
    from spikingjelly.activation_based import neuron
    total = [0]
    hooks = [m.register_forward_pre_hook(lambda m, a: total.__setitem__(0, total[0] + a[0].numel()))
             for m in net.modules() if isinstance(m, neuron.BaseNode)]
    forward()
    for h in hooks:
        h.remove()
    return total[0]


def worker(a):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    import benchlib
    from benchlib import copy_bandwidth, timed
    from spikingjelly.activation_based import functional, memopt
    net_name = a.net
    tokens = a.system.split("-")
    graphed, channels_last, recompute = "graphed" in tokens, "cl" in tokens, "rc" in tokens
    system = "-".join(t for t in tokens if t not in ("graphed", "cl", "rc"))
    compact = None  # ours-bits..., ours-bytes...: ours... inside compact_spikes
    for form in ("bits", "bytes"):
        if system.startswith(f"ours-{form}"):
            compact, system = form, "ours" + system[len(f"ours-{form}"):]
    shape = NETS[net_name]
    T, batch = a.T or shape["T"], a.batch or shape["batch"]
    dev = torch.device(a.device)
    x, y = data(net_name, T, batch, dev)
    if channels_last:
        if x.dim() != 5:
            raise SystemExit(f"{a.system}: channels-last needs the convolutional network")
        x = x.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)
    bw = copy_bandwidth(dev)
    out = {"system": a.system, "net": net_name, "T": T, "batch": batch,
           "copy_tbps": bw / 1e12, "cases": [],
           "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"}
    for dtype_name in a.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        case = {"dtype": dtype_name}
        try:
            net, block, split, can_chunk = build(net_name)
            net = net.to(dev, memory_format=torch.channels_last if channels_last
                         else torch.preserve_format)
            model, ctx = net, None
            autocast = torch.autocast(dev.type, dtype=dtype, enabled=dtype != torch.float32)

            def forward(m=None):
                functional.reset_net(net)
                with autocast:
                    return F.cross_entropy((model if m is None else m)(x).mean(0).float(), y)
            if system.startswith("sj-memopt-"):
                memopt.optimize_memory(net, block, lambda m: forward(m),
                                       level=int(system.rsplit("-", 1)[1]), compress=True,
                                       split_fn=split, can_chunk=can_chunk)
            elif system.startswith("sj-ckpt-"):
                comp = {"bool": memopt.BooleanSpikeCompressor, "uint8": memopt.Uint8SpikeCompressor,
                        "bit": memopt.BitSpikeCompressor,
                        "sparse": memopt.SparseSpikeCompressor}[system.rsplit("-", 1)[1]]
                chosen = []
                for path, m in list(net.named_modules()):  # the outermost blocks
                    if path and isinstance(m, block) and \
                            not any(path.startswith(c + ".") for c in chosen):
                        chosen.append(path)
                for path in chosen:
                    net.set_submodule(path, memopt.checkpoint_module(
                        net.get_submodule(path), compressor=comp()))
            elif system.startswith("ours"):
                import flexsn
                net = flexsn.convert(net)
                model = net
                case["call_path"] = flexsn.call_path()
                if compact or recompute:
                    def ctx():
                        stack = contextlib.ExitStack()
                        if compact:
                            stack.enter_context(flexsn.compact_spikes(bits=compact == "bits"))
                        if recompute:
                            stack.enter_context(flexsn.recompute_states())
                        return stack
            if system.endswith(("compile", "compile-ro")):
                import torch._inductor.config as inductor_config
                # Inductor's channels-last layout choice for convolutions
                # fails at ResNet-18's 1x1 maps here (the real
                # convolution_backward's weight gradient strides differ from
                # its fake kernel's): every compiled system runs without it.
                inductor_config.layout_optimization = False
                torch._dynamo.reset()
                model = torch.compile(net, mode="reduce-overhead"
                                      if system.endswith("-ro") else None)

            def step():
                net.zero_grad(set_to_none=True)
                if ctx is None:
                    loss = forward()
                    loss.backward()
                    return loss
                with ctx():
                    if net_name == "shd":
                        import flexsn
                        flexsn.mark_spikes(x)
                    loss = forward()
                    loss.backward()
                return loss
            sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

            def clean():
                """Frees what earlier steps left (gradients; neuron states,
                which in SpikingJelly hold their forward's whole graph), so
                that every peak counts beyond the weights and the input
                alone; returns what is allocated then."""
                net.zero_grad(set_to_none=True)
                functional.reset_net(net)
                gc.collect()
                sync()
                if dev.type != "cuda":
                    return 0
                torch.cuda.reset_peak_memory_stats()
                return torch.cuda.memory_allocated()

            def peak_since(base):
                sync()
                return ((torch.cuda.max_memory_allocated() - base) / 2**20
                        if dev.type == "cuda" else float("nan"))
            clean()
            t0 = time.perf_counter()
            loss = step()
            sync()
            case["first_step_s"] = time.perf_counter() - t0
            case["loss"] = loss.item()
            first = next(p for p in net.parameters() if p.grad is not None)
            case["grad_sum"] = first.grad.double().abs().sum().item()
            # the first step's graph keeps the weights' AccumulateGrad nodes,
            # bound to this stream, which a capture on another must not meet
            del loss
            if system in ("sj", "ours", "sj-compile", "sj-torch-compile", "ours-compile") \
                    and not graphed and not compact:
                # after the first step, whose time holds every one-off cost
                # (compiled: what the compiled forward hands its backward)
                def forward_in_ctx():
                    if ctx is None:
                        return forward()
                    with ctx():
                        return forward()
                case["saved_mib"] = saved_bytes(net, forward_in_ctx)
            if system == "sj":
                elements = neuron_elements(net, forward)
                floor_bytes = elements * (24 if dtype == torch.float32 else 12)
                case["neuron_elements"] = elements
                case["neuron_floor_ms"] = floor_bytes / bw * 1e3
            # a CUDA graph keeps its memory pool from capture on, so the
            # replayed systems' peak spans their warm-up, capture and replays
            # (once-only set-up, cuBLAS's workspace on the default stream
            # say, happened in the first step, as for the others)
            whole_run = graphed or system.endswith("-ro")
            base = clean() if whole_run else 0
            if graphed and dev.type != "cuda":
                raise RuntimeError("a CUDA graph needs a GPU")
            # graphed: the step captured once and replayed, the device's
            # time. Gradients set to None in the step, as in PyTorch's
            # whole-network capture: the backward allocates them from the
            # graph's pool, late, as eagerly, and each replay rewrites them
            # (the check of the last step's gradient below).
            run = benchlib.graphed(step) if graphed else step
            case["step_ms"] = timed(run, a.reps, dev)
            # the last timed step's gradient (a replay's, for the graphs)
            case["grad_sum_last"] = first.grad.double().abs().sum().item()
            del first
            if whole_run:
                case["peak_mib"] = peak_since(base)
                if a.profile:
                    case["profile"] = benchlib.profile_by_category(run, 5, dev)
                run = None  # a graph and its pool
                if a.breakdown and graphed:
                    # a second capture, the first graph freed with its pool
                    clean()
                    case["peak_breakdown"] = benchlib.peak_breakdown(
                        lambda: benchlib.graphed(step)())
            else:
                base = clean()
                step()
                case["peak_mib"] = peak_since(base)
                if a.profile:
                    case["profile"] = benchlib.profile_by_category(step, 5, dev)
                if a.breakdown and dev.type == "cuda":
                    clean()
                    case["peak_breakdown"] = benchlib.peak_breakdown(step)
            net = model = None  # frees them before the next case
        except Exception as e:  # noqa: BLE001 (reported, the next case runs)
            case["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        out["cases"].append(case)
    print("RESULT " + json.dumps(out), flush=True)


# -- the driver -----------------------------------------------------------

def _report(net_name, system, run):
    for c in run.get("cases", [{"dtype": "-", "error": run.get("error")}]):
        if "error" in c:
            print(f"{net_name:9s} {system:17s} {c['dtype']:9s} ERROR {c['error']}", flush=True)
            continue
        print(f"{net_name:9s} {system:17s} {c['dtype']:9s} {c['step_ms']:8.2f} ms "
              f"{c['peak_mib']:8.0f} MiB  first {c['first_step_s']:6.1f} s  "
              f"loss {c['loss']:.6f} grad {c['grad_sum']:.6e}"
              + ("" if abs(c["grad_sum_last"] - c["grad_sum"]) <= 1e-4 * c["grad_sum"]
                 else f" (last step's {c['grad_sum_last']:.6e})")
              + (f"  saved {c['saved_mib']}" if "saved_mib" in c else "")
              + (f"  neuron floor {c['neuron_floor_ms']:.3f} ms"
                 if "neuron_floor_ms" in c else ""), flush=True)
        if "peak_breakdown" in c:
            bd = c["peak_breakdown"]
            print(f"    peak at {bd['peak_at']:.2f} of the step, made by {bd['peak_place']}; "
                  f"live MiB over the step: {bd['curve_mib']}", flush=True)
            for mib, place in bd["places"]:
                print(f"    at the peak {mib:8.1f} MiB  {place}", flush=True)
        if "profile" in c:
            print("    per step: " + ", ".join(f"{k} {v:.3f} ms" for k, v in
                                              c["profile"]["ms_per_step"].items()), flush=True)
            for ms, category, name in c["profile"]["top_kernels"]:
                print(f"      {ms:8.4f} ms  {category:21s} {name}", flush=True)
            if c["profile"].get("host_top"):
                print(f"    kernel launches per step {c['profile']['launches_per_step']}, "
                      f"host CPU {c['profile']['host_ms_per_step']:.3f} ms per step, "
                      "by its own time:", flush=True)
                for ms, calls, name in c["profile"]["host_top"]:
                    print(f"      {ms:8.4f} ms  {calls:6.1f} calls  {name}", flush=True)


def _read(f) -> str:
    f.seek(0)
    return f.read()


def run_all(a):
    """Each (network, system) in its own worker process; with --parallel N,
    N at a time, worker i on the i-th visible GPU, so that a table
    of many systems fits one run on a machine of N GPUs."""
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    jobs = [(n, s) for n in a.nets.split(",") for s in a.systems.split(",")]
    runs: list = [None] * len(jobs)
    running: dict = {}  # slot -> (job index, process, start, limit)
    # the compiled systems, the longest, first: the shortest run of the
    # whole table over N GPUs (the results keep the table's order)
    pending = sorted(range(len(jobs)), key=lambda i: "compile" not in jobs[i][1])
    # worker i on the i-th GPU this process may use, so that two tables can
    # share one machine (CUDA_VISIBLE_DEVICES=0,1 and =2,3)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = visible.split(",") if visible else [str(i) for i in range(a.parallel)]
    if a.parallel > len(gpus):
        raise SystemExit(f"--parallel {a.parallel} but CUDA_VISIBLE_DEVICES names {len(gpus)} GPUs")
    while pending or running:
        for slot in range(a.parallel):
            if slot in running or not pending:
                continue
            i = pending.pop(0)
            net_name, system = jobs[i]
            env = dict(os.environ)
            if system == "sj-torch-compile":
                env["SJ_LIF_CUDA_IMPLEMENTATION"] = "torch"
            if a.parallel > 1:
                env["CUDA_VISIBLE_DEVICES"] = gpus[slot]
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--net", net_name,
                   "--system", system, "--dtypes", a.dtypes, "--reps", str(a.reps),
                   "--device", a.device] + (["--breakdown"] if a.breakdown else []) \
                + (["--profile"] if a.profile else [])
            if a.T:
                cmd += ["--T", str(a.T)]
            if a.batch:
                cmd += ["--batch", str(a.batch)]
            limit = a.timeout * (2 if "compile" in system else 1)
            # files, not pipes: a worker's long stderr must not block it
            logs = (tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+"))
            proc = subprocess.Popen(cmd, env=env, stdout=logs[0], stderr=logs[1], text=True)
            running[slot] = (i, proc, time.time(), limit, logs)
        time.sleep(0.2)
        for slot, (i, proc, t0, limit, logs) in list(running.items()):
            net_name, system = jobs[i]
            if proc.poll() is None and time.time() - t0 < limit:
                continue
            if proc.poll() is None:
                proc.kill()
                proc.wait()
                run = {"system": system, "net": net_name,
                       "error": f"timed out after {limit} s"}
            else:
                out, err = (_read(f) for f in logs)
                lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
                run = json.loads(lines[-1][7:]) if lines else {
                    "system": system, "net": net_name, "error": (err or out)[-600:]}
            for f in logs:
                f.close()
            run["wall_s"] = time.time() - t0
            runs[i] = run
            del running[slot]
            _report(net_name, system, run)
            with open(a.out, "w") as f:
                json.dump({"runs": [r for r in runs if r is not None]}, f, indent=1)


def plot(png, paths):
    """Step time against peak memory, one panel per network and dtype. A
    later results file adds only the (network, dtype, system) cases the
    earlier ones lack."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    points: dict = {}  # (net, dtype) -> {system: case}
    for path in paths:
        for r in json.load(open(path))["runs"]:
            for c in r.get("cases", []):
                if "step_ms" in c:
                    points.setdefault((r["net"], c["dtype"]), {}).setdefault(r["system"], c)
    panels = sorted(points, key=lambda p: (p[0] != "resnet18", p[1] != "float32", p))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2),
                             squeeze=False)
    for ax, panel in zip(axes[0], panels):
        for system, c in points[panel].items():
            ours = system.startswith("ours")
            ax.scatter(c["peak_mib"], c["step_ms"], marker="o" if ours else "s",
                       color="tab:red" if ours else "tab:blue")
            ax.annotate(system, (c["peak_mib"], c["step_ms"]), fontsize=6,
                        xytext=(3, 2), textcoords="offset points")
        ax.set_yscale("log")
        ax.set_title(f"{panel[0]}, {panel[1]}")
        ax.set_xlabel("peak memory of a training step (MiB)")
        ax.set_ylabel("training step (ms, log)")
        ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nets", default="resnet18,shd")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--T", type=int, default=0, help="time steps (default: the net's)")
    p.add_argument("--batch", type=int, default=0, help="batch (default: the net's)")
    p.add_argument("--timeout", type=int, default=300,
                   help="seconds per system (twice that for compiled ones)")
    p.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke run")
    p.add_argument("--parallel", type=int, default=1,
                   help="workers at a time, one GPU each (a machine of that many GPUs)")
    p.add_argument("--breakdown", action="store_true",
                   help="also list what is allocated at the peak of an eager or "
                   "compiled step, or of a CUDA graph's warm-up and capture")
    p.add_argument("--profile", action="store_true",
                   help="also profile 5 steps (replays, for the graphs): the device's "
                   "time per step by kernel category")
    p.add_argument("--out", default=os.path.join(HERE, "results", "networks", "results.json"))
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--net", help=argparse.SUPPRESS)
    p.add_argument("--system", help=argparse.SUPPRESS)
    p.add_argument("--plot", nargs="+", metavar=("PNG", "RESULTS"),
                   help="draw PNG from results files instead of running")
    a = p.parse_args()
    if a.plot:
        return plot(a.plot[0], a.plot[1:])
    if a.worker:
        return worker(a)
    return run_all(a)


if __name__ == "__main__":
    sys.exit(main())
