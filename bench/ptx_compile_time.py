"""PTX emission time against body size.

Writes a core whose body is a chain of N ops (add/mul/sub of recent values,
tanh every 7th op, a spike at the end, a tanh state update), then times
`flexsn-translate --flexsn-to-ptx [--options=differentiate]` on it, best of 3, for
N in 250, 500, 1000, 2000, 4000. Run on a quiet machine:

    python3 bench/ptx_compile_time.py [build/bin]
"""
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.argv[1] if len(sys.argv) > 1 else "build/bin")


def chain(n: int) -> str:
    rng = random.Random(n)
    names, body = ["%xt", "%vt"], []
    for i in range(n):
        a, b = rng.choice(names[-4:]), rng.choice(names[-4:])
        if i % 7 == 3:
            body.append(f"    %c{i} = math.tanh {a} : f32")
        else:
            op = rng.choice(["arith.addf", "arith.mulf", "arith.subf"])
            body.append(f"    %c{i} = {op} {a}, {b} : f32")
        names.append(f"%c{i}")
    body.append(f"    %s = flexsn.spike {names[-1]} surrogate <atan> : f32")
    body.append(f"    %vn = math.tanh {names[-2]} : f32")
    return ("func.func @chain(%x: tensor<?x?xf32>, %v0: tensor<?xf32>)\n"
            "    -> (tensor<?x?xf32>, tensor<?x?xf32>) {\n"
            "  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>)"
            " -> (tensor<?x?xf32>, tensor<?x?xf32>) {\n"
            "  ^bb0(%xt: f32, %vt: f32):\n" + "\n".join(body) +
            "\n    flexsn.yield %s, %vn : f32, f32\n  }\n"
            "  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>\n}\n")


def best_of(cmd, runs=3):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return min(times)


print("ops   | inference PTX | + training PTX (--options=differentiate) | per op")
with tempfile.TemporaryDirectory() as d:
    for n in (250, 500, 1000, 2000, 4000):
        f = Path(d) / f"chain{n}.mlir"
        f.write_text(chain(n))
        base = [str(BIN / "flexsn-translate"), "--flexsn-to-ptx", str(f), "-o", "/dev/null"]
        inf = best_of(base)
        train = best_of(base + ["--options=differentiate"])
        print(f"{n:5d} | {inf:10.2f} s  | {train:10.2f} s                     | {1e3 * train / n:.2f} ms")
