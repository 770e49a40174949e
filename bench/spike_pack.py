"""compact_spikes' bit pack and unpack alone, on spike tensors of the
network benchmark's sizes, against their floor (a script, not a test; run
it on the GPU machine).

Formulations, each a pack of a 0/1 tensor into 1 bit per element and its
unpack back to the dtype:

  package   what `flexsn.compact_spikes()` runs eagerly (flexsn._spikes)
  ops       the formulation it traces into a compiled graph for that
            device, run eagerly op by op
  compiled  that formulation under torch.compile: one fused kernel each

Per shape, dtype and formulation: pack and unpack in ms, eager (CUDA events
around the call, median) and replayed from a CUDA graph; the floor is the
bytes each moves (pack: the elements read, a bit each written; unpack the
reverse) over the copy bandwidth measured in the same run.

    python3 bench/spike_pack.py [--shapes 4x64x64x16x16,250x256x256]
        [--dtypes float32,bfloat16] [--reps 50] [--out results.json]
"""

import argparse
import contextlib
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import copy_bandwidth, graphed, timed  # noqa: E402

from flexsn import _spikes  # noqa: E402


def _always() -> bool:
    return True


@contextlib.contextmanager
def traced_formulation():
    """Runs the package's compiled-graph formulation eagerly."""
    saved = _spikes._tracing
    _spikes._tracing = _always
    try:
        yield
    finally:
        _spikes._tracing = saved


def formulations():
    def package(flat, n, dtype):
        return _spikes._pack_bits(flat), lambda p: _spikes._unpack_bits(p, n, dtype)

    def ops(flat, n, dtype):
        with traced_formulation():
            packed = _spikes._pack_bits(flat)

        def unpack(p):
            with traced_formulation():
                return _spikes._unpack_bits(p, n, dtype)
        return packed, unpack

    # inside a compiled function the package takes its traced formulation
    pack_c = torch.compile(_spikes._pack_bits, dynamic=False)
    unpack_c = torch.compile(_spikes._unpack_bits, dynamic=False)

    def compiled(flat, n, dtype):
        return pack_c(flat), lambda p: unpack_c(p, n, dtype)
    return {"package": package, "ops": ops, "compiled": compiled}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default="4x64x64x16x16,250x256x256")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke run")
    p.add_argument("--out")
    a = p.parse_args()
    device = torch.device(a.device)
    bw = copy_bandwidth(device) if device.type == "cuda" else float("nan")
    rows = []
    for shape_text in a.shapes.split(","):
        shape = [int(d) for d in shape_text.split("x")]
        for dtype_name in a.dtypes.split(","):
            dtype = getattr(torch, dtype_name)
            spikes = (torch.rand(shape, device=device) < 0.2).to(dtype)
            flat = spikes.reshape(-1)
            n = flat.numel()
            floor_ms = (n * spikes.element_size() + (n + 7) // 8) / bw * 1e3
            for name, make in formulations().items():
                row = {"shape": shape_text, "dtype": dtype_name, "formulation": name,
                       "floor_ms": floor_ms}
                try:
                    packed, unpack = make(flat, n, dtype)
                    if not torch.equal(unpack(packed), flat):
                        raise AssertionError("unpack(pack(x)) != x")
                    row["pack_ms"] = timed(lambda: make(flat, n, dtype), a.reps, device)
                    row["unpack_ms"] = timed(lambda: unpack(packed), a.reps, device)
                    if device.type == "cuda":
                        row["pack_replayed_ms"] = timed(
                            graphed(lambda: make(flat, n, dtype)), a.reps, device)
                        row["unpack_replayed_ms"] = timed(
                            graphed(lambda: unpack(packed)), a.reps, device)
                except Exception as e:  # noqa: BLE001 (reported, the next one runs)
                    row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                rows.append(row)
                print(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                               for k, v in row.items()), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name() if device.type == "cuda"
                       else "cpu", "copy_tbps": bw / 1e12, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
