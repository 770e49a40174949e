"""The native call path (libFlexSNTorch.so) against the ctypes path: the
same results and gradients bit for bit, its errors, and when the package
falls back to ctypes. The rest of the suite runs on whichever path is
active (scripts/test.sh runs it once on each)."""

import pytest
import torch

import flexsn
from conftest import assert_close
from cores import lif, tutorial
from flexsn import _native

native_only = pytest.mark.skipif(_native.ops() is None,
                                 reason=f"call path: {_native.status()}")


def _run_ctypes(monkeypatch, fn):
    with monkeypatch.context() as m:
        m.setattr(_native, "ops", lambda: None)
        return fn()


def test_status_names_the_path():
    s = flexsn.call_path()
    assert s == _native.status()
    assert s.startswith("native: loaded ") or s.startswith("ctypes: "), s


@native_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_native_matches_ctypes_bitwise(device, monkeypatch, dtype):
    """The tutorial core (two inputs, two states, a captured parameter):
    inference, then training with gradients for inputs, initial states and
    the parameter, on both paths; identical bits, and one C++ node on the
    native path."""
    w = torch.randn(24, device=device, dtype=dtype, requires_grad=True)

    def core(x, y, h1, h2):
        h1 = h1 * 0.5 + x * w
        h2 = h2 * 0.25 + torch.sigmoid(y) * h1
        return (h1 >= 1).to(x.dtype), h2 * 2, h1, h2

    torch.manual_seed(3)
    x = torch.randn(7, 2, 24, device=device, dtype=dtype) * 2
    y = torch.randn(7, 2, 24, device=device, dtype=dtype)
    s1 = torch.randn(2, 24, device=device, dtype=dtype)
    s2 = torch.randn(2, 24, device=device, dtype=dtype)

    def run(mod_kw):
        k = flexsn.FlexSNKernel(core, 2, 2, backend=device.type, **mod_kw)
        with torch.no_grad():
            inf = k.run([x, y], [s1, s2], want_seqs=True)
        leaves = [t.clone().requires_grad_() for t in (x, y, s1, s2)]
        w.grad = None
        outs, seqs, finals = k.run(leaves[:2], leaves[2:], want_seqs=True)
        loss = (outs[0] * 3 + outs[1]).sum() + seqs[0].sum() + finals[1].sum()
        loss.backward()
        return inf, outs, [t.grad for t in leaves] + [w.grad.clone()], outs[1].grad_fn

    a = run({})
    b = _run_ctypes(monkeypatch, lambda: run({}))
    flat = lambda r: [t for part in r[0] if part is not None for t in part] + r[1] + r[2]
    for ta, tb in zip(flat(a), flat(b)):
        assert torch.equal(ta, tb)
    assert type(a[3]).__name__ == "CppFunction"
    assert type(b[3]).__name__ != "CppFunction"


@native_only
def test_native_zero_states_and_T1(device):
    """No initial states (null pointers) and T = 1 on the native path, against
    the torch loop."""
    c = flexsn.FlexSN(tutorial(), 2, 2, 2, backend=device.type)
    r = flexsn.FlexSN(tutorial(), 2, 2, 2, backend="torch")
    for T in (1, 5):
        c.reset(), r.reset()
        x = (torch.randn(T, 3, 5, device=device) * 2).requires_grad_()
        y = torch.randn(T, 3, 5, device=device).requires_grad_()
        xr, yr = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
        a, b = c(x, y), r(xr, yr)
        for ta, tb in zip(a, b):
            assert_close(ta, tb)
        (a[0].sum() + a[1].sum()).backward()
        (b[0].sum() + b[1].sum()).backward()
        assert_close(x.grad, xr.grad, what=f"x.grad T={T}")
        # at T = 1, y (it only moves the states) reaches no output: the torch
        # loop leaves its grad None, the kernels give zeros
        assert_close(y.grad, torch.zeros_like(y) if yr.grad is None else yr.grad,
                     what=f"y.grad T={T}")


@pytest.mark.parametrize("path", ["active", "ctypes"])
def test_double_backward_is_refused(device, monkeypatch, path):
    """The kernels compute first-order gradients: asking for a graph of
    their backward (create_graph=True with a gradient that itself requires
    grad) raises on both paths, rather than a second derivative that would
    silently lack the kernels' terms."""
    def go():
        k = flexsn.FlexSNKernel(lif(), 1, 1, backend=device.type)
        x = torch.randn(4, 8, device=device, requires_grad=True)
        outs, _, _ = k.run([x], [torch.zeros(8, device=device)], want_seqs=False)
        (g,) = torch.autograd.grad((outs[0] * x).sum(), x, create_graph=True)
        torch.autograd.grad(g.sum(), x)
    with pytest.raises(RuntimeError, match="backward of a compiled core is not differentiable"):
        go() if path == "active" else _run_ctypes(monkeypatch, go)


@native_only
def test_native_operators_refuse_bad_calls():
    ops = _native.ops()
    with pytest.raises(RuntimeError, match="no bound kernel #123456789"):
        ops.launch(123456789, [torch.zeros(2, 2)], 0)
    with pytest.raises(RuntimeError, match="no bound training #123456789"):
        ops.train(123456789, [torch.zeros(2, 2)], 0)
    with pytest.raises(RuntimeError, match="null kernel handle"):
        ops.bind(0, 2, False, [0, 0], [1], ["float32"], [0])
    with pytest.raises(RuntimeError, match="read slot out of range"):
        ops.bind(1, 2, False, [5, 0], [1], ["float32"], [0])
    with pytest.raises(RuntimeError, match="unknown result dtype 'int8'"):
        ops.bind(1, 2, False, [0, 0], [1], ["int8"], [0])
    with pytest.raises(RuntimeError, match="result slot or shape out of range"):
        ops.bind(1, 2, False, [0, 0], [1], ["float32"], [7])
    with pytest.raises(RuntimeError, match="no bound kernel"):
        ops.bind_train(123456789, 123456790, [], [], [], [], [], [])


@native_only
def test_native_plan_operators_refuse_bad_calls():
    ops = _native.ops()
    k = flexsn.FlexSNKernel(lif(), 1, 1, backend="cpu")
    x, v = torch.randn(3, 4), torch.zeros(4)
    with torch.no_grad():
        k.run([x], [v], want_seqs=False)
    ident = next(iter(k.compiled.prepared.values())).kernel.native
    with pytest.raises(RuntimeError, match="no bound plan #123456789"):
        ops.run_plan(123456789, [x, v], 0)
    with pytest.raises(RuntimeError, match="no bound training #123456789"):
        ops.bind_plan(123456789, True, [], [x, v], False, False)
    with pytest.raises(RuntimeError, match="last_steps is for a training plan"):
        ops.bind_plan(ident, False, [0], [x, v], False, True)
    with pytest.raises(RuntimeError, match="result index out of range"):
        ops.bind_plan(ident, False, [0, 9], [x, v], False, False)
    with pytest.raises(RuntimeError, match="input #0 is missing"):
        ops.bind_plan(ident, False, [0], [None, v], False, False)
    with pytest.raises(RuntimeError, match="tensors on cpu and meta"):
        ops.bind_plan(ident, False, [0], [x, torch.zeros(4, device="meta")], False, False)
    plan = ops.bind_plan(ident, False, [0, 1], [x, v], False, False)
    try:
        with torch.no_grad():
            s, vf = ops.run_plan(plan, [x, v], 0)
            assert s.shape == (3, 4) and vf.shape == (4,)
            # any difference from the recorded call: no result, nothing run
            for other in ([x[:2], v], [x.double(), v], [x, None], [x.t().contiguous().t(), v],
                          [torch.randn(4, 3).t(), v], [x], [x, v, v]):
                assert ops.run_plan(plan, other, 0) == []
        assert ops.run_plan(plan, [x, v], 0) == []  # grad mode differs
    finally:
        ops.release(plan)
    with pytest.raises(RuntimeError, match=f"no bound plan #{plan}"):
        ops.run_plan(plan, [x, v], 0)


@native_only
def test_planned_calls_are_checked_in_cpp(device, monkeypatch):
    """With the native call path a planned call is checked and launched by
    one operator call: Plan.matches (the ctypes path's checks) never runs,
    and a call that differs from the plan still takes the general path."""
    from flexsn import _runner
    m = flexsn.FlexSN(lif(), num_states=1).to(device)
    ref = flexsn.FlexSN(lif(), num_states=1).to(device)
    ref.__dict__["_fast"] = lambda inputs: None
    x = torch.randn(5, 8, device=device) * 2
    xg = x.clone().requires_grad_()
    for mod in (m, ref):
        with torch.no_grad():
            mod(x)
        mod.reset()
        mod(xg).sum().backward()
        mod.reset()
    assert all(e[0].native is not None for e in m.__dict__["_plans"] if e is not None)

    def no_python_checks(*a, **k):
        raise AssertionError("Plan.matches ran on the native path")
    monkeypatch.setattr(_runner.Plan, "matches", no_python_checks)
    general = []
    real = _runner.run_compiled
    monkeypatch.setattr(_runner, "run_compiled",
                        lambda *a, **k: general.append(1) or real(*a, **k))
    for _ in range(2):
        for mod in (m, ref):
            mod.reset()
        with torch.no_grad():
            assert torch.equal(m(x), ref(x))
        for mod in (m, ref):
            mod.reset()
        xg.grad = None
        m(xg).sum().backward()
        g = xg.grad.clone()
        xg.grad = None
        ref(xg).sum().backward()
        assert torch.equal(g, xg.grad)
    assert len(general) == 4  # `ref`'s calls only
    m.reset()
    with torch.no_grad():
        m(x[:3])  # another T: the general path
    assert len(general) == 5
    with pytest.raises(TypeError, match="input"):
        m.reset()
        m("not a tensor")


@native_only
def test_native_launch_checks_input0_and_positions():
    """A bound kernel (a real one, lif's inference) called with no [T, ...]
    input #0, or fewer tensors than it reads: an error naming it."""
    k = flexsn.FlexSNKernel(lif(), 1, 1, backend="cpu")
    x, v = torch.randn(3, 4), torch.zeros(4)
    with torch.no_grad():
        k.run([x], [v], want_seqs=False)
    prep = next(iter(k.compiled.prepared.values()))
    ident = prep.kernel.native
    ops = _native.ops()
    with pytest.raises(RuntimeError, match=r"input #0 must be a \[T, \.\.\.\] tensor with T > 0"):
        ops.launch(ident, [torch.zeros(0, 4), v], 0)
    with pytest.raises(RuntimeError, match="the call passes 1 tensors; the kernel reads #1"):
        ops.launch(ident, [x], 0)


@pytest.fixture
def unloaded(monkeypatch):
    """_native as before its first load (its state comes back afterwards)."""
    for name in ("_reason", "launch", "train"):
        monkeypatch.setattr(_native, name, getattr(_native, name))
    monkeypatch.setattr(_native, "_loaded", False)
    monkeypatch.setattr(_native, "_ops", None)


def test_fallback_when_built_for_another_torch(monkeypatch, unloaded):
    """A libFlexSNTorch.so built for another PyTorch version is not loaded:
    the ctypes path runs, and status() says why."""
    monkeypatch.delenv("FLEXSN_NATIVE", raising=False)
    monkeypatch.setattr(torch, "__version__", "1.99.0+cpu")
    s = _native.status()
    if "no libFlexSNTorch.so" in s:
        pytest.skip(s)
    assert s.startswith("ctypes: libFlexSNTorch.so was built for PyTorch "), s
    assert s.endswith("this is 1.99.0+cpu"), s
    k = flexsn.FlexSNKernel(lif(), 1, 1, backend="cpu")
    with torch.no_grad():
        outs, _, _ = k.run([torch.randn(3, 4)], [torch.zeros(4)], want_seqs=False)
    assert next(iter(k.compiled.prepared.values())).kernel.native is None


def test_environment_turns_native_off(monkeypatch, unloaded):
    monkeypatch.setenv("FLEXSN_NATIVE", "0")
    assert _native.status() == "ctypes: FLEXSN_NATIVE=0"


@pytest.mark.parametrize("path", ["active", "ctypes"])
def test_retain_graph_and_noncontiguous_gradients(device, monkeypatch, path):
    """A second backward through a retained graph gives the same gradients
    again, and gradients arriving as non-contiguous views (a transposed
    loss) give those of the torch loop, on either path."""
    def go():
        c = flexsn.FlexSN(tutorial(), 2, 2, 2, backend=device.type, store_state_seqs=True)
        x = (torch.randn(6, 5, 3, device=device) * 2).requires_grad_()
        y = torch.randn(6, 5, 3, device=device).requires_grad_()
        w = torch.randn(3, 5, 6, device=device)
        s1, s2 = c(x, y)
        loss = (s1.transpose(0, 2) * w).sum() + (c.state_seqs[0].permute(2, 1, 0) * w).sum()
        loss.backward(retain_graph=True)
        first = (x.grad.clone(), y.grad.clone())
        x.grad = y.grad = None
        loss.backward()
        return first, (x.grad, y.grad), (x, y, w)
    first, second, (x, y, w) = go() if path == "active" else _run_ctypes(monkeypatch, go)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    r = flexsn.FlexSN(tutorial(), 2, 2, 2, backend="torch", store_state_seqs=True)
    xr, yr = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
    s1, s2 = r(xr, yr)
    ((s1.transpose(0, 2) * w).sum() + (r.state_seqs[0].permute(2, 1, 0) * w).sum()).backward()
    assert_close(first[0], xr.grad, what="x.grad")
    assert_close(first[1], yr.grad, what="y.grad")


def _vm_flags(address: int):
    """The VmFlags of the mapping of this process holding `address`, or None
    where /proc does not say."""
    try:
        with open("/proc/self/smaps") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    inside = False
    for line in lines:
        head = line.split(" ", 1)[0]
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(v, 16) for v in head.split("-"))
            inside = lo <= address < hi
        elif inside and line.startswith("VmFlags:"):
            return line.split()[1:]
    return None


HUGE_PAGES_CHECK = """
import sys, torch, flexsn
sys.path.insert(0, {tests!r})
from cores import lif
from test_native import _vm_flags
k = flexsn.FlexSNKernel(lif(), 1, 1, backend="cpu")
x = torch.randn(4, 1 << 20) * 2
with torch.no_grad():
    (s,), _, _ = k.run([x], None, want_seqs=False)  # s: 16 MiB
ref = flexsn.FlexSNKernel(lif(), 1, 1, backend="torch")(x, torch.zeros(1 << 20))[0]
print(torch.equal(s, ref), "hg" in (_vm_flags(s.data_ptr() + (8 << 20)) or []),
      _vm_flags(s.data_ptr()) is not None, flexsn.call_path().split(":")[0])
"""


@pytest.mark.parametrize("path", ["native", "ctypes"])
@pytest.mark.parametrize("setting", [None, "0"])
def test_large_cpu_results_are_advised_huge_pages(setting, path):
    """A CPU result of 4 MiB or more is advised onto transparent huge pages
    before the kernel writes it (madvise MADV_HUGEPAGE: VmFlags "hg" on its
    mapping), unless FLEXSN_HUGE_PAGES=0, on both call paths; the results
    are the same."""
    if path == "native" and _native.ops() is None:
        pytest.skip(f"call path: {_native.status()}")
    import os
    import subprocess
    import sys
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            thp = f.read()
    except OSError:
        pytest.skip("no transparent huge pages here")
    if "[never]" in thp:
        pytest.skip("transparent huge pages are off here")
    env = dict(os.environ)
    env.pop("FLEXSN_HUGE_PAGES", None)
    if setting is not None:
        env["FLEXSN_HUGE_PAGES"] = setting
    if path == "ctypes":
        env["FLEXSN_NATIVE"] = "0"
    tests = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", HUGE_PAGES_CHECK.format(tests=tests)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    same, advised, readable, ran = out.stdout.split()
    assert same == "True" and ran == path
    if readable != "True":
        pytest.skip("/proc/self/smaps gives no VmFlags here")
    assert advised == ("True" if setting is None else "False")

