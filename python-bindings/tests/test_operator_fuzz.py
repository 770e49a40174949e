"""The operators are public (a user, a hand-edited or an exported graph can
call them): each is called here with random wrong dtypes, element counts,
strides, devices, None, tensor counts, ids and shapes, in a child process
(a crash fails the test instead of ending the run). Every call must either
be well-formed by the rules written out below, independently of the C++
that enforces them, and then give the results of the same call on fresh
contiguous copies, or raise a RuntimeError that says what is wrong; and no
call may write outside its results (each tensor passed sits between guard
elements in a larger buffer, and it and its guards must be unchanged)."""

import os
import subprocess

import pytest

from conftest import DEVICES, child_python

FUZZ = r'''
import math, random, sys, torch, flexsn
sys.path.insert(0, {tests!r})
from cores import lif, tutorial
from flexsn import _native
DEVICE, SEED, ITERATIONS = torch.device({device!r}), {seed}, {iterations}
if DEVICE.type == "cuda":  # the index tensors carry
    DEVICE = torch.device("cuda", torch.cuda.current_device())
rng = random.Random(SEED)
ops = _native.ops()
GUARD = 7.25
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.bool]
OTHER = [torch.device("meta"), torch.device("cpu")]
if DEVICE.type == "cuda":
    OTHER.append(torch.device("cuda", 0))
    if torch.cuda.device_count() > 1:
        OTHER.append(torch.device("cuda", 1))


def bindings(core, n_in, n_st):
    """Inference, final-state training pair and its backward of `core` on
    DEVICE, run once so that they are bound: [(kind, KernelBinding or TrainingBinding)]."""
    k = flexsn.FlexSNKernel(core, n_in, n_st, backend=DEVICE.type)
    xs = [torch.randn(3, 4, device=DEVICE, requires_grad=True) for _ in range(n_in)]
    s0 = [torch.zeros(4, device=DEVICE) for _ in range(n_st)]
    with torch.no_grad():
        k.run(xs, s0, want_seqs=False)
        k.run(xs, s0, want_seqs=True)
    outs, _, _ = k.run(xs, s0, want_seqs=False)
    outs[0].sum().backward()
    found = []
    for prep in k.compiled.prepared.values():
        if hasattr(prep, "kernel"):
            found.append(("launch", prep.kernel))
        else:
            for pair in prep._pairs.values():
                found += [("train", pair), ("forward", pair), ("backward", pair)]
    return k, found


def bound_of(kind, b):
    """The KernelBinding whose rules a call of `kind` on `b` is held to."""
    return b.backward if kind == "backward" else b.forward if kind in ("train", "forward") \
        else b


def well_formed(bound, args, T, NCL, device):
    """The rules every launch is held to."""
    if len(args) != bound.num_args:
        return False
    for t in args:
        if t is not None and (t.device != device or t.layout != torch.strided):
            return False
    for slot, pos, dtype, kind, optional in bound.checks:
        t = args[pos]
        if t is None:
            if not optional:
                return False
            continue
        want = T * NCL if kind == 0 else NCL if kind == 1 else 1
        if t.dtype != dtype or t.numel() != want or not t.is_contiguous():
            return False
    return True


def guarded(t):
    """`t` copied into the middle of a larger buffer of guard values, with
    the same strides (a view into it)."""
    if t is None or t.device.type == "meta":
        return t, None
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride())) if t.numel() else 0
    buf = torch.full((span + 16,), GUARD, dtype=t.dtype, device=t.device)
    # t's memory, element for element (strides here are never negative)
    buf[8:8 + span] = torch.as_strided(t, (span,), (1,), t.storage_offset())
    return buf.as_strided(t.shape, t.stride(), 8), (buf, t.clone())


def intact(record, v):
    buf, value = record
    span = buf.numel() - 16
    ends = torch.cat([buf[:8], buf[8 + span:]])
    guard = torch.full_like(ends, GUARD)
    same = torch.equal(v, value) or v.dtype.is_floating_point and torch.equal(
        v.nan_to_num(7.0), value.nan_to_num(7.0))
    return torch.equal(ends, guard) and same


def mutate(t, good_shape, device):
    """A wrong (or, at times, harmless) variant of a tensor argument."""
    r = rng.randrange(9)
    base = t if t is not None else torch.randn(good_shape, device=device)
    if r == 0:
        return None
    if r == 1:
        return base.to(rng.choice(DTYPES))
    if r == 2:  # another element count
        n = max(base.numel() + rng.choice([-3, -1, 1, 5, 1000]), 0)
        return torch.randn(n, device=device)
    if r == 3 and base.dim() >= 2:
        return base.transpose(0, -1)
    if r == 4 and base.numel():
        return base.reshape(-1)[:1].expand(rng.choice([base.numel(), 100000]))
    if r == 5:
        return base.to(rng.choice(OTHER)) if base.dtype != torch.bool else base
    if r == 6 and base.numel() > 1:
        return base.reshape(-1)[::2]
    if r == 7:
        return base.reshape(-1)  # same elements, another shape: well-formed
    return base.clone()


def call(kind, ident, args, seq):
    if kind == "launch":
        return ops.launch(ident, args)
    if kind == "train":
        return ops.train(ident, args)
    if kind == "forward":
        return ops.forward(ident, args)
    if kind == "plan":
        with torch.no_grad():
            plan = ops.bind_plan(ident, False, [0], args, False, False)
            try:
                res = ops.run_plan(plan, args)
            finally:
                _native.release(plan)
        if not res:  # not the recorded call: nothing run (documented)
            raise RuntimeError("flexsn: run_plan ran nothing")
        return res
    return ops.backward(ident, args, seq)


def example(kind, b, T, NCL, device):
    """A well-formed call of binding `b`."""
    bound = bound_of(kind, b)
    args = [None] * bound.num_args
    for slot, pos, dtype, k, optional in bound.checks:
        n = T * NCL if k == 0 else NCL if k == 1 else 1
        args[pos] = torch.randn(n, device=device).to(dtype)
    args[0] = torch.randn(T, NCL, device=device).to(args[0].dtype if args[0] is not None
                                                     else torch.float32)
    return args


keep, found = [], []
for core, n_in, n_st in ((lif(), 1, 1), (tutorial(), 2, 2)):
    k, f = bindings(core, n_in, n_st)
    keep.append(k)
    found += f
found += [("plan", b) for kind, b in found if kind == "launch"]
accepted = rejected = 0
failures = []
for it in range(ITERATIONS):
    kind, b = rng.choice(found)
    bound = bound_of(kind, b)
    ident = b.native
    T, NCL = rng.choice([1, 3]), rng.choice([1, 4, 5])
    args = example(kind, b, T, NCL, DEVICE)
    seq = [T, NCL]
    for _ in range(rng.randrange(1, 3)):
        r = rng.randrange(12)
        if r < 7:
            j = rng.randrange(len(args))
            args[j] = mutate(args[j], [NCL], DEVICE)
        elif r == 7:
            args.append(torch.randn(NCL, device=DEVICE))
        elif r == 8 and args:
            args.pop()
        elif r == 9 and kind == "backward":
            seq = rng.choice([[0, NCL], [T, -1], [T], [T, NCL, 2], [-T, NCL], [T, 1 << 62]])
        elif r == 10:
            ident = rng.choice([0, -1, 5, 1 << 62, 123456789])
        else:
            args = [None] * len(args)
    if kind == "backward":
        ok = len(seq) >= 1 and seq[0] == T and all(d >= 0 for d in seq) \
            and math.prod(seq[1:]) == NCL and any(t is not None for t in args)
        T2, NCL2 = T, NCL
    else:
        x = args[0] if args else None
        ok = x is not None and x.dim() >= 1 and x.shape[0] > 0
        T2 = x.shape[0] if ok else 0
        NCL2 = x.numel() // T2 if ok else 0
    ok = ok and ident == b.native and well_formed(bound, args, T2, NCL2, DEVICE)
    views, records = [], []
    for t in args:
        v, rec = guarded(t)
        views.append(v)
        records.append(rec)
    try:
        res = call(kind, ident, views, seq)
        if not ok:
            failures.append(f"#{{it}} {{kind}}: accepted a bad call: "
                            + ", ".join("None" if t is None else
                                        f"{{t.dtype}}{{tuple(t.shape)}}"
                                        f"{{tuple(t.stride())}}@{{t.device}}"
                                        for t in args) + f" seq={{seq}}")
            continue
        again = call(kind, ident, [None if t is None else t.detach().contiguous().clone()
                              for t in args], seq)
        if len(res) != len(again) or not all(
                (p is None and q is None) or torch.equal(p.detach().cpu().nan_to_num(7.0),
                                                         q.detach().cpu().nan_to_num(7.0))
                for p, q in zip(res, again)):
            failures.append(f"#{{it}} {{kind}}: results differ from the canonical call's")
        accepted += 1
    except RuntimeError as e:
        if ok:
            failures.append(f"#{{it}} {{kind}}: refused a well-formed call: {{str(e)[:300]}}")
        elif "flexsn" not in str(e) and "Could not run" not in str(e):
            failures.append(f"#{{it}} {{kind}}: an error that does not name us: {{str(e)[:300]}}")
        rejected += 1
    for v, rec in zip(views, records):
        if rec is not None and not intact(rec, v):
            failures.append(f"#{{it}} {{kind}}: a tensor passed or its guards changed")
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()
for f in failures[:20]:
    print("FAIL", f)
print("accepted", accepted, "rejected", rejected, "failures", len(failures))
'''


@pytest.mark.parametrize("device", DEVICES)
def test_operators_accept_only_well_formed_calls(device, tmp_path):
    tests = os.path.dirname(os.path.abspath(__file__))
    iterations = int(os.environ.get("FLEXSN_FUZZ_ITERATIONS", "600"))
    argv, env = child_python()
    out = subprocess.run(argv + ["-c", FUZZ.format(tests=tests, device=device, seed=1,
                                                   iterations=iterations)],
                         env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, f"the child died ({out.returncode}): {out.stderr[-3000:]}"
    lines = out.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("accepted"), out.stdout[-3000:] + out.stderr[-3000:]
    _, accepted, _, rejected, _, failures = lines[-1].split()
    assert failures == "0", "\n".join(lines[-21:])
    # the run exercised both outcomes
    assert int(accepted) > iterations // 20 and int(rejected) > iterations // 4, lines[-1]
