"""flexsn.chunked_time against the sequential scan: a LIF layer (f32) at
few neurons and many steps, where a step's latency bounds the sequential
scan (a script, not a test; run it on the GPU machine).

Per shape (T steps, N neurons), job (inference without gradient; a
training step: forward, .sum().backward() to the input) and chunk count:
the time (CUDA events, median of --reps), the launches a call made (both
ways), whether it settled (else the sequential scan ran after --rounds
launches), and that its spikes, final membrane and input gradient are the
sequential scan's bit for bit. Beside them, the floor: the bytes the job
must move (inference: the input read and the spikes written; training: 6
sequences, the LIF's saved sequence included; 4 bytes per neuron and step)
over the device-to-device copy bandwidth measured in the same run.

    python3 bench/chunked_time.py [--shapes 16384x1024,4096x4096,65536x256]
        [--jobs inference,training] [--chunks 16,64,256] [--rounds 4]
        [--reps 20] [--out results.json]
"""

import argparse
import json

import torch

import flexsn
from benchlib import copy_bandwidth, timed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="16384x1024,4096x4096,1024x16384,65536x256")
    ap.add_argument("--jobs", default="inference,training")
    ap.add_argument("--chunks", default="16,64,256")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    device = torch.device(a.device)
    bw = copy_bandwidth(device)
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s")
    print(f"{'T':>6s} {'N':>6s} {'job':>9s} {'chunks':>6s} {'ms':>8s} {'floor':>7s} "
          f"{'launches':>8s} {'settled':>7s} {'exact':>5s}")
    rows = []
    torch.manual_seed(0)
    for shape in a.shapes.split(","):
        T, N = (int(v) for v in shape.split("x"))
        lif = flexsn.neuron.LIFNode(tau=2.0, step_mode="m").to(device)
        x = torch.rand(T, N, device=device) * 2
        for job in a.jobs.split(","):
            training = job == "training"
            floor = (6 if training else 2) * T * N * 4 / bw * 1e3
            xg = x.clone().requires_grad_(training)

            def call():
                lif.reset()
                xg.grad = None
                with torch.set_grad_enabled(training):
                    out = lif(xg)
                    if training:
                        out.sum().backward()
                return [out.detach(), lif.v.detach()] + ([xg.grad] if training else [])
            want = call()
            row = {"T": T, "N": N, "job": job, "chunks": 1, "ms": timed(call, a.reps, device),
                   "floor_ms": floor, "launches": 1.0, "settled": True, "exact": True}
            rows.append(row)
            for chunks in (int(c) for c in a.chunks.split(",")):
                if T % chunks or T // chunks < 2:
                    continue  # not eligible: the call would run sequentially
                with flexsn.chunked_time(chunks, a.rounds) as calls:
                    got = call()
                    ms = timed(call, a.reps, device)
                exact = all(torch.equal(g.view(torch.int32), w.view(torch.int32))
                            for g, w in zip(got, want))
                rows.append({"T": T, "N": N, "job": job, "chunks": chunks, "ms": ms,
                             "floor_ms": floor, "launches": calls.launches / calls.calls,
                             "settled": calls.sequential == 0, "exact": exact})
            for r in rows[-(1 + len(a.chunks.split(","))):]:
                if (r["T"], r["N"], r["job"]) == (T, N, job):
                    print(f"{T:6d} {N:6d} {job:>9s} {r['chunks']:6d} {r['ms']:8.3f} "
                          f"{floor:7.4f} {r['launches']:8.1f} {str(r['settled']):>7s} "
                          f"{str(r['exact']):>5s}", flush=True)
            if a.out:
                with open(a.out, "w") as f:
                    json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
