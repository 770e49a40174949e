"""The tables of docs/benchmarks.md, made from the raw data in bench/results.

Each table in the page sits between ``<!-- table NAME -->`` and
``<!-- end table -->``; NAME is a key of TABLES, whose function reads the
raw data the bench tools wrote and returns the table's markdown. The test
command checks that every table in the page is what its data gives
(python-bindings/tests/test_docs.py), so a figure changes in the page only
with its data.

    python3 bench/doc_tables.py --check [PAGE...]   # default: docs/benchmarks.md, README.md
    python3 bench/doc_tables.py --write [PAGE...]
"""

import argparse
import glob
import json
import math
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
PAGES = [os.path.join(HERE, "..", "docs", "benchmarks.md"), os.path.join(HERE, "..", "README.md")]
BLOCK = re.compile(r"(<!-- table (\S+) -->\n)(.*?)(<!-- end table -->)", re.S)


def _load(path):
    with open(os.path.join(RESULTS, path)) as f:
        return json.load(f)


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _ms(v, digits=4):
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


# -- one neuron layer (bench/compare.py) ---------------------------------------

COMPARE_SYSTEMS = ["flexsn", "sj-flexsn", "sj-lifnode", "torch-compile",
                   "torch-compile-step", "torch-eager"]
DTYPE_SHORT = {"float32": "f32", "bfloat16": "bf16"}


def _compare(path):
    """(cases in the run's order, floors, times by case and system, the
    cases a system skipped, the systems present) of a compare.py run."""
    runs = _load(path)["runs"]
    cases, floors, times, skipped = [], {}, {}, set()
    for r in runs:
        key = (r.get("core"), r.get("T"), r.get("N"), r.get("dtype"))
        if r["kind"] == "floor":
            floors[key] = r
            if key not in cases:
                cases.append(key)
        elif r["kind"] == "time":
            times[key + (r["system"],)] = r
        elif r["kind"] == "skipped":
            skipped.add(key + (r["system"],))
    present = [s for s in COMPARE_SYSTEMS if any(k[-1] == s for k in times)]
    return cases, floors, times, skipped, present


def _cell(r, *fields, digits=4):
    """The fields of one timing record joined by " / ", "error" where it
    failed and "–" for a field it lacks."""
    if "error" in r:
        return "error"
    return " / ".join("error" if f"{f[:-3]}_error" in r else
                      _ms(r.get(f), 0 if f.endswith("_mib") else digits)
                      for f in fields)


def _compare_table(*fields, floor=None, digits=4):
    """A table of compare-h200's cases by system, each cell the run's
    `fields` ("_ms" times, "peak_extra_mib"), the floor's `floor` first."""
    def make():
        cases, floors, times, skipped, present = _compare("compare-h200/results.json")
        rows = []
        for key in cases:
            core, T, N, dt = key
            row = [f"{core} T={T} NCL={N} {dt}"]
            if floor:
                row.append(" / ".join(_ms(floors[key][f]) for f in floor))
            for s in present:
                r = times.get(key + (s,))
                if r is None:
                    row.append("not run" if key + (s,) in skipped else "–")
                else:
                    row.append(_cell(r, *fields, digits=digits))
            rows.append(row)
        return _table(["case"] + (["floor"] if floor else []) + present, rows)
    return make


def eager_floor():
    """PyTorch's cheapest eager call moving a case's bytes beside ours, from
    one compare.py run with --eager-floor: inference / training, ms."""
    runs = _load("eager-floor-h200/host-162/merged-results.json")["runs"]
    floors = {(r["core"], r["T"], r["N"], r["dtype"]): r for r in runs
              if r["kind"] == "eager_floor"}
    ours = {(r["core"], r["T"], r["N"], r["dtype"]): r for r in runs
            if r["kind"] == "time" and r["system"] == "flexsn"}
    rows = []
    for key, f in floors.items():
        if key in ours and key[3] == "float32":
            core, T, N, _ = key
            rows.append([f"{core} T={T} NCL={N}", _cell(f, "inference_ms", "training_ms"),
                         _cell(ours[key], "inference_ms", "training_ms"),
                         _cell(ours[key], "graph_inference_ms", "graph_training_ms")])
    return _table(["case", "PyTorch's eager floor", "ours, eager", "ours, replayed"], rows)


# -- per-call overhead (bench/overhead.py) -------------------------------------

OVERHEAD_ROWS = [
    ("module inference (reset, `no_grad`, call)", "flexsn inference"),
    ("module training step (forward, `.sum().backward()`)", "flexsn train step"),
    ("`FlexSNKernel.run`, training step", "eager  train step"),
    ("the torch.compile path, training step", "op     train step"),
    ("PyTorch: `x * 2`", "torch  mul"),
    ("PyTorch: one op, a sum, their backward", "torch  mul+sum bwd"),
]


def _overhead_log(path):
    values = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"(.+?)\s+([0-9.]+) us per call", line)
            if m:
                values[re.sub(r"\s+$", "", m.group(1))] = float(m.group(2))
    return values


def overhead():
    def logs(pattern):
        return [_overhead_log(p) for p in sorted(glob.glob(os.path.join(RESULTS, pattern)))]
    cpu, gpu = logs("overhead/cpu-*.log"), logs("overhead/h100-*.log")
    rows = []
    for label, name in OVERHEAD_ROWS:
        g = [v[name] for v in gpu]
        rows.append([label, " / ".join(f"{v[name]:.1f}" for v in cpu),
                     f"{statistics.median(g):.1f} ({min(g):.1f}-{max(g):.1f})"])
    return _table(["row (us)", f"CPU ({len(cpu)} rounds)",
                   f"H100 ({len(gpu)} rounds: median, range)"], rows)


# -- the CPU backend (bench/compare.py --device cpu) --------------------------

CPU_SYSTEMS = [("flexsn", "ours"), ("sj-flexsn", "SJ FlexSN"), ("sj-lifnode", "SJ LIFNode"),
               ("torch-compile", "torch.compile"), ("torch-eager", "eager loop")]


def cpu():
    rows = []
    for core in ("lif", "2in2st"):
        cases, _, times, _, _ = _compare(f"cpu/{core}/results.json")
        for key in cases:
            _, T, N, dt = key
            size = f"{N // 2**20}M" if N >= 2**20 else f"{N // 2**10}K"
            row = [f"{core} T={T} NCL={size} {DTYPE_SHORT[dt]}"]
            pairs = [[times.get(key + (s,), {}).get(w + "_ms") for w in ("inference", "training")]
                     for s, _ in CPU_SYSTEMS]
            best = [min(p[i] for p in pairs if p[i] is not None) for i in (0, 1)]
            for pair in pairs:
                row.append("–" if pair[0] is None else " / ".join(
                    f"**{v:.3g}**" if v == best[i] else f"{v:.3g}" for i, v in enumerate(pair)))
            rows.append(row)
    return _table(["case"] + [name for _, name in CPU_SYSTEMS], rows)


# -- whole networks (bench/networks.py) ---------------------------------------

NETWORK_COLUMNS = [("resnet18-f32.json", "ResNet-18 f32"), ("resnet18-bf16.json", "ResNet-18 bf16"),
                   ("shd-f32.json", "SHD f32"), ("shd-bf16.json", "SHD bf16")]
OURS_MODS = [("bits", "bits"), ("bytes", "bytes"), ("rc", "recompute"), ("cl", "cl")]
RANGED = {"sj-memopt-": "SJ memopt-1 to 4", "sj-ckpt-": "SJ ckpt bool, uint8, bit, sparse"}


def network_name(system):
    """The table's name of a networks.py system."""
    for prefix, name in RANGED.items():
        if system.startswith(prefix):
            return name
    parts = system.split("-")
    if parts[0] == "sj":
        names = {"sj": "SJ", "sj-cl": "SJ, cl", "sj-compile": "SJ compiled",
                 "sj-torch-compile": "SJ torch neurons, compiled",
                 "sj-compile-ro": "SJ compiled, r-o", "sj-graphed": "SJ graphed",
                 "sj-cl-graphed": "SJ, cl, graphed", "sj-compile-cl-ro": "SJ compiled, cl, r-o"}
        return names[system]
    mods = [label for tag, label in OURS_MODS if tag in parts]
    name = "ours" + "".join(", " + m for m in mods)
    sep = ", " if mods else " "
    if "compile" in parts:
        name += sep + "compiled" + (", r-o" if "ro" in parts else "")
    elif "graphed" in parts:
        name += sep + "graphed"
    return name


def _network_cells(path):
    """{system: (ms, MiB) or a note} of one networks.py run."""
    cells = {}
    for r in _load(os.path.join("networks", path))["runs"]:
        case = (r.get("cases") or [{}])[0]
        error = r.get("error") or case.get("error")
        if error and "timed out" in error:
            cells[r["system"]] = "(1)"
        elif error and "execution profile" in error:
            cells[r["system"]] = "refused (2)"
        elif error:
            cells[r["system"]] = "failed"
        else:
            cells[r["system"]] = (case["step_ms"], case["peak_mib"])
    return cells


NETWORK_ORDER = (
    ["ours", "ours-bits", "ours-bytes", "ours-rc", "ours-cl", "ours-compile",
     "ours-bits-compile", "ours-rc-compile", "ours-bits-rc-compile", "ours-compile-ro",
     "ours-bits-compile-ro", "ours-rc-compile-ro", "ours-bits-rc-compile-ro", "ours-graphed",
     "ours-bits-graphed", "ours-rc-graphed", "ours-cl-graphed", "ours-bits-cl-graphed",
     "ours-cl-rc-graphed", "ours-bits-cl-rc-graphed", "ours-compile-cl-ro",
     "ours-bits-compile-cl-ro", "sj", "sj-cl", "sj-compile", "sj-torch-compile",
     "sj-compile-ro", "sj-graphed", "sj-cl-graphed", "sj-compile-cl-ro"]
    + [f"sj-memopt-{level}" for level in (1, 2, 3, 4)]
    + [f"sj-ckpt-{c}" for c in ("bool", "uint8", "bit", "sparse")])


def networks():
    columns = [_network_cells(path) for path, _ in NETWORK_COLUMNS]
    unknown = {s for col in columns for s in col} - set(NETWORK_ORDER)
    if unknown:
        raise KeyError(f"systems without a row in the table: {sorted(unknown)}")
    rows, done = [], set()
    best_ms = [min((c[0] for c in col.values() if isinstance(c, tuple)), default=None)
               for col in columns]
    best_mib = [min((c[1] for c in col.values() if isinstance(c, tuple)), default=None)
                for col in columns]
    for system in NETWORK_ORDER:
        name = network_name(system)
        if name in done:
            continue
        members = [s for s in NETWORK_ORDER if network_name(s) == name]
        cells = []
        for i, col in enumerate(columns):
            got = [col[s] for s in members if s in col]
            timed = [g for g in got if isinstance(g, tuple)]
            if len(members) > 1 and timed:
                lo, hi = min(t[0] for t in timed), max(t[0] for t in timed)
                mlo, mhi = min(t[1] for t in timed), max(t[1] for t in timed)
                mem = f"{mlo:.0f}" if round(mlo) == round(mhi) else f"{mlo:.0f}-{mhi:.0f}"
                cells.append(f"{lo:.1f}-{hi:.1f} / {mem}")
            elif timed:
                ms, mib = timed[0]
                t = f"**{ms:.2f}**" if ms == best_ms[i] else f"{ms:.2f}"
                m = f"**{mib:.0f}**" if mib == best_mib[i] else f"{mib:.0f}"
                cells.append(f"{t} / {m}")
            else:
                cells.append(got[0] if got else "")
        if all(c in ("", "failed") for c in cells):
            continue
        done.add(name)
        rows.append([name] + cells)
    return _table(["system (ms / MiB)"] + [label for _, label in NETWORK_COLUMNS], rows)


def networks_saved():
    """What autograd saves, MiB: spikes + other floats + integers."""
    columns = []
    for path, _ in NETWORK_COLUMNS:
        saved = {}
        for r in _load(os.path.join("networks", path))["runs"]:
            case = (r.get("cases") or [{}])[0]
            if "saved_mib" in case:
                s = case["saved_mib"]
                saved[r["system"]] = " + ".join(f"{s[k]:.1f}" for k in ("spikes", "float", "int")
                                                if k in s and (k != "int" or s[k] > 0.01))
        columns.append(saved)
    order = ["sj", "sj-compile", "ours", "ours-rc", "ours-compile", "ours-rc-compile"]
    rows = [[network_name(s)] + [col.get(s, "") for col in columns] for s in order
            if any(s in col for col in columns)]
    return _table(["system"] + [label for _, label in NETWORK_COLUMNS], rows)


def networks_repeat():
    """The two compiled pairs timed alone, alternating, on one H100."""
    runs = []
    for path in ("compiled-bf16-h100.json", "compiled-bf16-h100-repeat.json"):
        runs += _load(os.path.join("networks", path))["runs"]
    rows = []
    for system in ("sj-compile", "ours-bits-rc-compile", "sj-compile-ro",
                   "ours-bits-rc-compile-ro"):
        cases = [r["cases"][0] for r in runs if r["system"] == system]
        rows.append([network_name(system), ", ".join(f"{c['step_ms']:.2f}" for c in cases),
                     f"{statistics.median(c['peak_mib'] for c in cases):.0f}"])
    return _table(["system", "runs (ms)", "MiB"], rows)


# -- converted models, adapters, per-step networks ----------------------------

def convert():
    """A converted neuron layer's training step against SpikingJelly's own,
    one row per class: T=4 / T=32."""
    rows, by = [], {}
    for r in _load("convert/convert.json"):
        if r.get("table") == "layer":
            by.setdefault(r["class"], []).append(r)
    for cls, runs in by.items():
        def cells(f, runs=runs):
            return " / ".join(f(r) for r in runs)
        rows.append([cls, cells(lambda r: f"{r['sj_ms']:.3f}"),
                     cells(lambda r: f"{r['ours_ms']:.3f}"),
                     cells(lambda r: f"{r['sj_ms'] / r['ours_ms']:.1f}x"),
                     cells(lambda r: f"{r['ours_replayed_ms']:.3f}"),
                     cells(lambda r: f"{r['floor_ms']:.3f}")])
    shapes = " / ".join(f"T={r['T']}, NCL={r['NCL'] // 1024}K" for r in next(iter(by.values())))
    return _table([f"class ({shapes})", "SpikingJelly", "converted", "speed-up",
                   "converted, replayed", "floor"], rows)


def interop():
    runs = _load("interop/interop.json")
    by = {(r["system"], r["T"]): r for r in runs}
    rows = []
    for T in sorted({r["T"] for r in runs}):
        lin = by[("linear-only", T)]
        for lib, label in (("snntorch", "snnTorch Leaky"), ("norse", "Norse LIF")):
            theirs, ours = by[(lib, T)], by[(lib + "-fused", T)]
            rows.append([label, str(T), f"{theirs['layer_ms']:.2f}", f"{ours['layer_ms']:.3f}",
                         f"{theirs['layer_ms'] / ours['layer_ms']:.0f}x",
                         f"{ours['layer_floor_ms']:.3f}", f"{theirs['net_ms']:.1f}",
                         f"{ours['net_ms']:.2f} / {ours['net_replayed_ms']:.3f}",
                         f"{lin['net_ms']:.2f} / {lin['net_replayed_ms']:.3f}",
                         f"{theirs['net_peak_mib']:.0f} / {ours['net_peak_mib']:.0f} / "
                         f"{lin['net_peak_mib']:.0f}"])
    return _table(["neuron", "T", "layer, theirs", "layer, ours", "speed-up", "layer floor",
                   "network, theirs", "network, ours: eager / replayed",
                   "Linear layers alone: eager / replayed",
                   "peak MiB theirs / ours / Linear alone"], rows)


def multistep():
    runs = _load("multistep/h200.json")
    by = {(r["net"], r["system"]): r for r in runs}
    names = {"tutorial5": "tutorial 5", "tutorial7": "tutorial 7", "norse": "Norse"}
    rows = []
    for net, label in names.items():
        loop, conv, ms, lay = (by[(net, s)] for s in ("loop", "converted", "multistep", "layers"))
        rows.append([label, f"{loop['ms']:.2f}", f"{conv['ms']:.2f}",
                     f"{ms['ms']:.3f} / {ms['replayed_ms']:.3f}",
                     f"{lay['ms']:.3f} / {lay['replayed_ms']:.3f}",
                     f"{loop['ms'] / ms['ms']:.0f}x", f"{ms['neuron_floor_ms']:.3f}",
                     f"{loop['peak_mib']:.0f} / {ms['peak_mib']:.0f} / {lay['peak_mib']:.0f}"])
    return _table(["network", "loop", "converted", "multistep: eager / replayed",
                   "layers: eager / replayed", "loop / multistep", "neuron floor",
                   "peak MiB loop / multistep / layers"], rows)


def compiled_loops():
    """The loop under Inductor and under flexsn.backend (bench/multistep.py
    --systems loop,compiled,backend,multistep), one run."""
    runs = _load("multistep/backend-h100.json")
    by = {(r["net"], r["system"]): r for r in runs}
    names = {"tutorial5": "snnTorch tutorial 5", "inline": "tutorial 5, neurons inline",
             "sj": "SpikingJelly MLP", "norse": "Norse MLP", "tutorial7": "snnTorch tutorial 7"}
    rows = []
    for net, label in names.items():
        loop, ind, back = (by[(net, s)] for s in ("loop", "compiled", "backend"))
        ms = by.get((net, "multistep")) or by[("tutorial5", "multistep")]
        rows.append([label, f"{loop['ms']:.2f}", f"{ind['ms']:.2f} / {ind['first_s']:.0f} s",
                     f"{back['ms']:.3f} / {back['first_s']:.1f} s",
                     f"{ms['ms']:.3f}" + ("" if (net, "multistep") in by else " (tutorial 5's)"),
                     f"{back['ms'] / ms['ms']:.2f}", f"{ind['ms'] / back['ms']:.1f}x",
                     f"{back['peak_mib']:.0f} / {ms['peak_mib']:.0f}"])
    return _table(["network", "eager loop", "Inductor: step / compile",
                   "flexsn.backend: step / compile", "multistep", "backend / multistep",
                   "Inductor / backend", "peak MiB backend / multistep"], rows)


def chunked():
    """flexsn.chunked_time at few neurons and many steps (bench/chunked_time.py),
    one H200 run: per shape, inference / training replayed from a CUDA
    graph, sequential and chunked, f32 and bf16, LIF's eager training;
    chunked cells the fastest chunk count's among those that settled (a
    call that did not ran the sequential scan after its rounds); training
    against the floor: the better of sequential and chunked."""
    runs = _load("chunked/chunked-h200.json")
    seq = {(r["T"], r["N"], r["core"], r["dtype"], r["job"]): r
           for r in runs if r["chunks"] == 1}
    best, eager, sj = {}, {}, {}
    for r in runs:
        key = (r["T"], r["N"], r["core"], r["dtype"], r["job"])
        if r.get("system"):
            sj[key] = r["ms"]
        elif r["chunks"] > 1 and r.get("launches") and r.get("settled", True):
            if r.get("graph_ms") is not None and \
                    (key not in best or r["graph_ms"] < best[key]["graph_ms"]):
                best[key] = r
            if key not in eager or r["ms"] < eager[key]["ms"]:
                eager[key] = r
    shapes = list(dict.fromkeys((r["T"], r["N"]) for r in runs))

    def cell(T, N, core, dt, field, src, jobs=("inference", "training")):
        out = []
        for job in jobs:
            r = src.get((T, N, core, dt, job))
            out.append("–" if r is None or r.get(field) is None else f"{r[field]:.3f}")
        return " / ".join(out)

    def ratio(T, N, core):
        key = (T, N, core, "f32", "training")
        ms = min(r["graph_ms"] for r in (seq[key], best.get(key)) if r is not None)
        return f"{ms / seq[key]['floor_ms']:.2f}x"

    rows = []
    dt = "f32"
    for T, N in shapes:
        sjc = " / ".join(f"{sj[(T, N, 'lif', dt, j)]:.2f}" if (T, N, "lif", dt, j) in sj
                         else "–" for j in ("inference", "training"))
        rows.append([f"{T}x{N}", cell(T, N, "li", dt, "floor_ms", seq),
                     cell(T, N, "lif", dt, "graph_ms", seq),
                     cell(T, N, "lif", dt, "graph_ms", best), ratio(T, N, "lif"),
                     f"{seq[(T, N, 'lif', dt, 'training')]['ms']:.3f} / "
                     f"{eager[(T, N, 'lif', dt, 'training')]['ms']:.3f}",
                     cell(T, N, "li", dt, "graph_ms", seq),
                     cell(T, N, "li", dt, "graph_ms", best), ratio(T, N, "li"), sjc]
                    + [cell(T, N, core, "bf16", "graph_ms", src)
                       for core in ("lif", "li") for src in (seq, best)])
    return _table(["T x NCL", "floor", "LIF", "LIF chunks", "LIF training / floor",
                   "LIF eager training", "LI", "LI chunks", "LI training / floor",
                   "SJ LIFNode, eager", "bf16 LIF", "bf16 LIF chunks", "bf16 LI",
                   "bf16 LI chunks"], rows)


PEER_NAMES = {"sj-flexsn": "SpikingJelly FlexSN", "sj-lifnode": "SpikingJelly LIFNode",
              "torch-compile": "torch.compile", "torch-compile-step": "torch.compile, one step",
              "torch-eager": "PyTorch eager"}
HEADLINE = [("lif", 4, 4194304, "float32", "inference", "LIF inference, T=4, 4M neurons, f32"),
            ("lif", 4, 4194304, "float32", "training", "LIF training step, T=4, 4M neurons, f32"),
            ("lif", 256, 65536, "bfloat16", "training",
             "LIF training step, T=256, 64K neurons, bf16"),
            ("2in2st", 32, 262144, "bfloat16", "training",
             "two-input two-state training, T=32, 256K neurons, bf16")]


def readme_layer():
    """The README's cases of compare-h200: floor, ours, the fastest peer."""
    _, floors, times, _, present = _compare("compare-h200/results.json")
    rows = []
    for core, T, N, dt, what, label in HEADLINE:
        key = (core, T, N, dt)
        peers = [(times[key + (s,)][what + "_ms"], s) for s in present
                 if s != "flexsn" and what + "_ms" in times.get(key + (s,), {})]
        best, name = min(peers)
        rows.append([label, f"{floors[key][what + '_ms']:.3f}",
                     f"{times[key + ('flexsn',)][what + '_ms']:.3f}",
                     f"{best:.3f} ({PEER_NAMES[name]})" if best < 1 else
                     f"{best:.2f} ({PEER_NAMES[name]})"])
    return _table(["case", "floor", "flexsn", "fastest peer"], rows)


def readme_networks():
    """Per network column, the fastest system of ours and of SpikingJelly's."""
    rows = []
    for path, label in NETWORK_COLUMNS:
        cells = {s: c for s, c in _network_cells(path).items() if isinstance(c, tuple)}
        row = [label]
        for side in ("ours", "sj"):
            ms, system = min((c[0], s) for s, c in cells.items() if s.startswith(side))
            row.append(f"{ms:.2f} ms / {cells[system][1]:.0f} MiB ({network_name(system)})")
        rows.append(row)
    return _table(["training step", "fastest of ours", "fastest of SpikingJelly"], rows)


TABLES = {
    "readme-layer": readme_layer,
    "readme-networks": readme_networks,
    "compare-eager": _compare_table("inference_ms", "training_ms",
                                    floor=("inference_ms", "training_ms")),
    "compare-replayed": _compare_table("graph_training_ms", "peak_extra_mib",
                                       floor=("training_ms",)),
    "eager-floor": eager_floor,
    "overhead": overhead,
    "cpu": cpu,
    "networks": networks,
    "networks-saved": networks_saved,
    "networks-repeat": networks_repeat,
    "convert": convert,
    "interop": interop,
    "multistep": multistep,
    "compiled-loops": compiled_loops,
    "chunked": chunked,
}


def render(text):
    """`text` with each marked table made anew from its data; raises
    KeyError for a table name TABLES does not know."""
    return BLOCK.sub(lambda m: m.group(1) + TABLES[m.group(2)]() + m.group(4), text)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("pages", nargs="*", default=PAGES)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true")
    g.add_argument("--write", action="store_true")
    args = p.parse_args()
    status = 0
    for page in args.pages:
        with open(page) as f:
            text = f.read()
        new = render(text)
        if args.write:
            with open(page, "w") as f:
                f.write(new)
        elif new != text:
            import difflib
            sys.stdout.writelines(difflib.unified_diff(
                text.splitlines(True), new.splitlines(True), page, "from the data"))
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
