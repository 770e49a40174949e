"""flexsn.chunked_time against the sequential scan at few neurons and many
steps, where a step's latency bounds the sequential scan (a script, not a
test; run it on the GPU machine).

Cores: `lif` (LIFNode, tau=2, a hard reset: the chunks settle) and `li` (a
leaky integrator without reset, tau=2: the compiler proves it affine and
the chunks start from composed carries). Per shape (T steps, N neurons),
core, dtype and job (inference without gradient; a training step: forward,
then the backward of a random output gradient drawn once, to the input's
gradient, which autograd.grad returns without accumulating), the time (CUDA events, median of --reps)
of the sequential scan and of each chunk count, eager and, where the call
needs no host sync, replayed from a CUDA graph (the device's time without
the host's); the launches a chunked call made, whether it settled, and its
largest difference from the sequential scan (0: bit for bit). Beside them,
the floor: the bytes the job must move (inference: the input read and the
output written; training: 6 sequences, the saved state included) over the
device-to-device copy bandwidth measured in the same run, and, with --sj,
SpikingJelly's LIFNode (its torch backend, eager, lif, f32, T <= 16384).

    python3 bench/chunked_time.py [--shapes 16384x1024,65536x256]
        [--cores lif,li] [--dtypes f32,bf16] [--jobs inference,training]
        [--chunks 16,64,256] [--reps 20] [--sj] [--out results.json]
"""

import argparse
import json

import torch

import flexsn
from benchlib import copy_bandwidth, graphed, timed

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def _li(x, v):
    h = v + (x - v) / 2.0
    return h, h


def make(core, device, dtype):
    if core == "lif":
        return flexsn.neuron.LIFNode(tau=2.0, step_mode="m").to(device)
    if core == "li":
        return flexsn.FlexSN(_li, num_states=1, step_mode="m").to(device)
    if core == "sj":
        from spikingjelly.activation_based import neuron, surrogate
        return neuron.LIFNode(tau=2.0, v_threshold=1.0, v_reset=0.0,
                              surrogate_function=surrogate.Sigmoid(),
                              step_mode="m").to(device)
    raise ValueError(core)


def step_of(module, x, training):
    """A call of the job: the module's forward, and in training the
    backward of a random output gradient to x's gradient. The layer's own
    work, the six sequences the floor counts: no loss reduction before it,
    no accumulation into a .grad after it (a layer's input gradient flows
    on to the layer before)."""
    xg = x.clone().requires_grad_(training)
    g = torch.randn(x.shape, device=x.device).to(x.dtype) if training else None

    def call():
        module.reset()
        with torch.set_grad_enabled(training):
            out = module(xg)
            if not training:
                return [out]
            gx, = torch.autograd.grad(out, xg, g)
        return [out.detach(), gx]
    return call


def replayed(module, x, training, reps):
    """The call replayed from a CUDA graph."""
    return timed(graphed(step_of(module, x, training)), reps, x.device)


def diff(got, want):
    return max((g.double() - w.double()).abs().max().item() for g, w in zip(got, want))


def measure(a, device, bw, T, N, core, dt, job):
    training = job == "training"
    dtype = DTYPES[dt]
    floor = (6 if training else 2) * T * N * dtype.itemsize / bw * 1e3
    torch.manual_seed(0)
    x = (torch.rand(T, N, device=device) * 2).to(dtype)
    module = make(core, device, dtype)
    call = step_of(module, x, training)
    base = {"T": T, "N": N, "core": core, "dtype": dt, "job": job, "floor_ms": floor}
    want = [t.clone() for t in call()]
    cuda = device.type == "cuda"
    rows = [dict(base, chunks=1, ms=timed(call, a.reps, device), launches=1.0, settled=True,
                 diff=0.0, graph_ms=replayed(module, x, training, a.reps) if cuda else None)]
    for chunks in (int(c) for c in a.chunks.split(",")):
        if T % chunks or T // chunks < 2:
            continue  # not eligible: the call would run sequentially
        with flexsn.chunked_time(chunks, a.rounds) as calls:
            got = [t.clone() for t in call()]
            ms = timed(call, a.reps, device)
            graph_ms = replayed(module, x, training, a.reps) \
                if (calls.affine or calls.repaired) and cuda else None
        rows.append(dict(base, chunks=chunks, ms=ms, graph_ms=graph_ms,
                         launches=calls.launches / max(calls.calls, 1),
                         settled=calls.sequential == 0, diff=diff(got, want)))
    if a.sj and core == "lif" and dt == "f32" and T <= 16384:
        sj_call = step_of(make("sj", device, dtype), x, training)
        rows.append(dict(base, chunks=0, system="spikingjelly-lifnode",
                         ms=timed(sj_call, 3, device)))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="256x65536,1024x16384,4096x4096,16384x1024,65536x256")
    ap.add_argument("--cores", default="lif,li")
    ap.add_argument("--dtypes", default="f32")
    ap.add_argument("--jobs", default="inference,training")
    ap.add_argument("--chunks", default="16,64,256")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sj", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    device = torch.device(a.device)
    bw = copy_bandwidth(device)
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s")
    print(f"{'T':>6s} {'N':>6s} {'core':>4s} {'dt':>4s} {'job':>9s} {'chunks':>6s} "
          f"{'ms':>8s} {'graph':>8s} {'floor':>7s} {'launch':>6s} {'settled':>7s} {'diff':>8s}")
    rows = []
    for shape in a.shapes.split(","):
        T, N = (int(v) for v in shape.split("x"))
        for core in a.cores.split(","):
            for dt in a.dtypes.split(","):
                for job in a.jobs.split(","):
                    new = measure(a, device, bw, T, N, core, dt, job)
                    rows += new
                    for r in new:
                        g = r.get("graph_ms")
                        print(f"{T:6d} {N:6d} {core:>4s} {dt:>4s} {job:>9s} "
                              f"{r.get('system', r['chunks']):>6} {r['ms']:8.3f} "
                              f"{'-' if g is None else f'{g:.3f}':>8s} {r['floor_ms']:7.4f} "
                              f"{r.get('launches', 0):6.1f} {str(r.get('settled', '')):>7s} "
                              f"{r.get('diff', 0):8.1e}", flush=True)
                    if a.out:
                        with open(a.out, "w") as f:
                            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
