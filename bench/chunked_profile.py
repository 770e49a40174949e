"""Where a chunked training call spends the device's time: per kernel, the
device microseconds of one eager flexsn.chunked_time training step as
chunked_time.py times it (forward, the backward of a random output
gradient to the input's gradient), LIF and LI, f32 (a script, not a test; run
it on the GPU machine). The kernels are those a replay from a CUDA graph
runs; their sum is the replayed call's device time without its gaps.

    python3 bench/chunked_profile.py [--shapes 16384x1024:64,65536x256:256]
"""

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

import flexsn
from chunked_time import make, step_of


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="16384x1024:64,65536x256:256",
                    help="TxN:chunks, comma-separated")
    ap.add_argument("--cores", default="lif,li")
    ap.add_argument("--calls", type=int, default=5)
    a = ap.parse_args()
    device = torch.device("cuda")
    for spec in a.shapes.split(","):
        shape, chunks = spec.split(":")
        T, N = (int(v) for v in shape.split("x"))
        for core in a.cores.split(","):
            torch.manual_seed(0)
            x = torch.rand(T, N, device=device) * 2
            call = step_of(make(core, device, torch.float32), x, True)
            with flexsn.chunked_time(int(chunks)):
                for _ in range(3):
                    call()
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(a.calls):
                        call()
                    torch.cuda.synchronize()
            rows = sorted(((e.device_time_total / a.calls, e.count // a.calls, e.key)
                           for e in prof.key_averages() if e.device_time_total > 0),
                          reverse=True)
            print(f"== {core} {T}x{N} chunks={chunks}: "
                  f"{sum(r[0] for r in rows):.1f} us of device time a call")
            for us, count, name in rows:
                print(f"  {us:8.1f} us  x{count}  {name[:100]}")


if __name__ == "__main__":
    main()
