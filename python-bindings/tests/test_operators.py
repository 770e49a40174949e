"""The package's operators (libFlexSNTorch.so), its one way to launch a
kernel: where they come from (built with the package, or for the installed
PyTorch on first use), their checks and errors, and what the package does
where they cannot load (PyTorch loops, one warning)."""

import contextlib
import os
import shutil
import subprocess
import warnings

import pytest
import torch

import flexsn
from conftest import assert_close, child_python
from cores import lif, tutorial
from flexsn import _native, _opsbuild, _program


def test_status_names_the_operators():
    s = flexsn.call_path()
    assert s == _native.status()
    assert s.startswith("native: ") and "libFlexSNTorch.so" in s, s
    assert _native.ops() is not None


def test_training_is_one_cpp_node(device):
    k = flexsn.FlexSNKernel(tutorial(), 2, 2, backend=device.type)
    x = torch.randn(4, 3, device=device, requires_grad=True)
    outs, _, _ = k.run([x, x], [torch.zeros(3, device=device)] * 2, want_seqs=True)
    assert type(outs[0].grad_fn).__name__ == "CppFunction"


def test_zero_states_and_T1(device):
    """No initial states (null pointers) and T = 1, against the torch
    loop."""
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


def test_double_backward_is_refused(device):
    """The kernels compute first-order gradients: asking for a graph of
    their backward (create_graph=True with a gradient that itself requires
    grad) raises, rather than a second derivative that would
    silently lack the kernels' terms."""
    def go():
        k = flexsn.FlexSNKernel(lif(), 1, 1, backend=device.type)
        x = torch.randn(4, 8, device=device, requires_grad=True)
        outs, _, _ = k.run([x], [torch.zeros(8, device=device)], want_seqs=False)
        (g,) = torch.autograd.grad((outs[0] * x).sum(), x, create_graph=True)
        torch.autograd.grad(g.sum(), x)
    with pytest.raises(RuntimeError, match="backward of a compiled core is not differentiable"):
        go()


def _lif_kernel():
    """(program, entry) of lif's CPU inference kernel."""
    compiled = flexsn.FlexSNKernel(lif(), 1, 1, backend="cpu").compiled
    n = len(compiled.traced.params)
    ir = compiled.ir([torch.float32] * 2, [torch.float32] * n, [False] * n, [False] * (2 + n))
    prog = _program.get_program(ir, "cpu")
    return prog, prog.entry("core_inference", 0)


def test_operators_refuse_bad_calls():
    ops = _native.ops()
    with pytest.raises(RuntimeError, match="no bound kernel #123456789"):
        ops.launch(123456789, [torch.zeros(2, 2)])
    with pytest.raises(RuntimeError, match="no bound training #123456789"):
        ops.train(123456789, [torch.zeros(2, 2)])
    with pytest.raises(RuntimeError, match="no bound training #123456789"):
        ops.recompute(123456789, [torch.zeros(2, 2)], None)
    # nothing that takes an address is an operator
    assert not any(hasattr(ops, name) for name in ("bind", "init", "bind_train", "release"))
    prog, kernel = _lif_kernel()

    def bind(reads=((0, 0, torch.float32, 0, 0),), results=((1, torch.float32, 0),),
             program=prog.handle, handle=kernel.handle, num_args=2, ident=0):
        return _native.bind_kernel(program, handle, "k", kernel.num_pointers, False, 0,
                                   num_args, list(reads), ["input #0"] * len(reads),
                                   list(results), ident)
    with pytest.raises(RuntimeError, match="a null argument"):
        bind(handle=0)
    with pytest.raises(RuntimeError, match="slot 9 out of range or bound twice"):
        bind(reads=[(9, 0, torch.float32, 0, 0)])
    with pytest.raises(RuntimeError, match="slot 0 out of range or bound twice"):
        bind(results=[(0, torch.float32, 0)])
    with pytest.raises(RuntimeError, match="read position 5 outside a call of 2 tensors"):
        bind(reads=[(0, 5, torch.float32, 0, 0)])
    with pytest.raises(RuntimeError, match="unknown dtype code 7"):
        bind(results=[(1, 7, 0)])
    with pytest.raises(RuntimeError, match="unknown shape code 7"):
        bind(results=[(1, torch.float32, 7)])
    with pytest.raises(RuntimeError, match="the program was not adopted"):
        bind(program=12345)
    with pytest.raises(RuntimeError, match="no bound kernel"):
        _native.bind_train(123456789, 123456790, [], [], [], [], [], [], False, 0, "")


def test_bindings_are_named_by_what_they_do():
    """Kernel and training bindings take keys derived from their kernels,
    layout and autograd plumbing (what a compiled graph names them by,
    across processes): two modules of one core share each binding, counted,
    so that it stays until its last user goes; a recomputing pair is
    another key; binding a taken key gives the binding there."""
    ops = _native.ops()
    x = torch.randn(3, 4, requires_grad=True)

    def pair(recompute):
        k = flexsn.FlexSNKernel(lif(), 1, 1, backend="cpu")
        with flexsn.recompute_states() if recompute else contextlib.nullcontext():
            k.run([x], [torch.zeros(4)], want_seqs=False)[0][0].sum().backward()
        prep = next(p for p in k.compiled.prepared.values() if hasattr(p, "pair"))
        return k, prep.pair(False, recompute)
    (a, pa), (b, pb), (c, pc) = pair(False), pair(False), pair(True)
    assert a.compiled is not b.compiled and pa is not pb
    assert pa.native == pb.native and pa.native != pc.native
    assert pa.native >= 1 << 62 and pa.forward.native == pc.forward.native
    ident, users = pa.native, _native._refs[pa.native]
    assert users >= 2
    assert _native.bind_shared(ident, lambda key: pytest.fail("bound twice")) == ident
    assert not _native.release(ident) and _native._refs[ident] == users
    out = ops.train(ident, [x, None])[0]
    out.sum().backward()
    # an id taken names the binding there (ids derive from content)
    assert _native.bind_train(pb.forward.native, pb.backward.native, pb.out_ix, pb.state_ix,
                              pb.kept_ix, [1, 0], [0, -1], [], False, ident, "") == ident
    with pytest.raises(RuntimeError, match="1 leaves for a forward kernel of 2 tensors"):
        _native.bind_train(pb.forward.native, pb.backward.native, pb.out_ix, pb.state_ix,
                           pb.kept_ix, [1], [0], [], False, ident, "")
    prog, kernel = _lif_kernel()
    prog.adopt()
    with pytest.raises(RuntimeError, match="binding id #-5 is negative or already bound"):
        _native.bind_kernel(prog.handle, kernel.handle, "k", kernel.num_pointers, False, 0, 1,
                            [], [], [], -5)


def test_plan_operators_refuse_bad_calls():
    ops = _native.ops()
    k = flexsn.FlexSNKernel(lif(), 1, 1, backend="cpu")
    x, v = torch.randn(3, 4), torch.zeros(4)
    with torch.no_grad():
        k.run([x], [v], want_seqs=False)
    ident = next(iter(k.compiled.prepared.values())).kernel.native
    with pytest.raises(RuntimeError, match="no bound plan #123456789"):
        ops.run_plan(123456789, [x, v])
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
            s, vf = ops.run_plan(plan, [x, v])
            assert s.shape == (3, 4) and vf.shape == (4,)
            # any difference from the recorded call: no result, nothing run
            for other in ([x[:2], v], [x.double(), v], [x, None], [x.t().contiguous().t(), v],
                          [torch.randn(4, 3).t(), v], [x], [x, v, v]):
                assert ops.run_plan(plan, other) == []
        assert ops.run_plan(plan, [x, v]) == []  # grad mode differs
    finally:
        _native.release(plan)
    with pytest.raises(RuntimeError, match=f"no bound plan #{plan}"):
        ops.run_plan(plan, [x, v])


def test_planned_calls_are_checked_in_cpp(device, monkeypatch):
    """A planned call is checked and launched by one operator call, with
    the results of the general path; a call that differs from the plan
    takes the general path."""
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


def test_launch_checks_input0_and_positions():
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
        ops.launch(ident, [torch.zeros(0, 4), v])
    with pytest.raises(RuntimeError, match=r"takes 2 tensors \(or None\); the call passes 1"):
        ops.launch(ident, [x])


def test_retain_graph_and_noncontiguous_gradients(device):
    """A second backward through a retained graph gives the same gradients
    again, and gradients arriving as non-contiguous views (a transposed
    loss) give those of the torch loop."""
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
    first, second, (x, y, w) = go()
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
from test_operators import _vm_flags
k = flexsn.FlexSNKernel(lif(), 1, 1, backend="cpu")
x = torch.randn(4, 1 << 20) * 2
with torch.no_grad():
    (s,), _, _ = k.run([x], None, want_seqs=False)  # s: 16 MiB
ref = flexsn.FlexSNKernel(lif(), 1, 1, backend="torch")(x, torch.zeros(1 << 20))[0]
print(torch.equal(s, ref), "hg" in (_vm_flags(s.data_ptr() + (8 << 20)) or []),
      _vm_flags(s.data_ptr()) is not None, flexsn.call_path().split(":")[0])
"""


@pytest.mark.parametrize("setting", [None, "0"])
def test_large_cpu_results_are_advised_huge_pages(setting):
    """A CPU result of 4 MiB or more is advised onto transparent huge pages
    before the kernel writes it (madvise MADV_HUGEPAGE: VmFlags "hg" on its
    mapping), unless FLEXSN_HUGE_PAGES=0; the results are the same."""
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
    tests = os.path.dirname(os.path.abspath(__file__))
    argv, env = child_python(env)
    out = subprocess.run(argv + ["-c", HUGE_PAGES_CHECK.format(tests=tests)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    same, advised, readable, ran = out.stdout.split()
    assert same == "True" and ran == "native"
    if readable != "True":
        pytest.skip("/proc/self/smaps gives no VmFlags here")
    assert advised == ("True" if setting is None else "False")



# A process whose libFlexSN.so has no operators built beside it (a copy in a
# folder of its own, as a wheel built without torch installs), with its own
# cache: the operators are built for this PyTorch on first use.
FIRST_USE = """
import sys, warnings, torch, flexsn
sys.path.insert(0, {tests!r})
from cores import lif
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    m = flexsn.FlexSN(lif(), num_states=1)
    m2 = flexsn.FlexSN(lif(), num_states=1)
x = torch.randn(6, 3, 4) * 2
ref = flexsn.FlexSN(lif(), num_states=1, backend="torch")(x)
print(flexsn.call_path())
print(torch.equal(m(x), ref), m.compiled,
      sum(issubclass(w.category, flexsn.FallbackWarning) for w in caught))
"""


def _lone_library(tmp_path):
    """A copy of libFlexSN.so in a folder of its own (with the libraries a
    wheel grafts beside it, which it finds at $ORIGIN/../flexsn.libs)."""
    lib = tmp_path / "lib" / "libFlexSN.so"
    lib.parent.mkdir()
    source = os.path.realpath(flexsn._capi.library_path())
    shutil.copy2(source, lib)
    grafted = os.path.join(os.path.dirname(os.path.dirname(source)), "flexsn.libs")
    if os.path.isdir(grafted):
        shutil.copytree(grafted, tmp_path / "flexsn.libs")
    return lib


def _first_use(tmp_path, lib, **env_extra):
    env = dict(os.environ, FLEXSN_LIBRARY=str(lib), FLEXSN_CACHE_DIR=str(tmp_path / "cache"))
    env.update(env_extra)
    tests = os.path.dirname(os.path.abspath(__file__))
    argv, env = child_python(env)
    return subprocess.run(argv + ["-c", FIRST_USE.format(tests=tests)], env=env,
                          capture_output=True, text=True, timeout=600)


def test_operators_are_built_on_first_use_and_kept(tmp_path):
    if _opsbuild.compiler() is None:
        pytest.skip("no C++ compiler here")
    lib = _lone_library(tmp_path)
    first = _first_use(tmp_path, lib)
    assert first.returncode == 0, first.stderr[-3000:]
    path, result = first.stdout.strip().splitlines()[-2:]
    assert path.startswith("native: ") and "built for this PyTorch" in path, path
    assert str(tmp_path / "cache" / "torch-ops") in path
    assert result == "True True 0"
    assert "building its PyTorch operators" in first.stderr
    again = _first_use(tmp_path, lib)  # the cached build: nothing compiled
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.strip().splitlines()[-1] == "True True 0"
    assert "building" not in again.stderr


def test_without_operators_cores_run_as_torch_loops_with_one_warning(tmp_path):
    """No operators and no compiler to build them: every module runs its core
    as a PyTorch loop, with the same results, after one FallbackWarning that
    says why and what to do; call_path() says so."""
    lib = _lone_library(tmp_path)
    out = _first_use(tmp_path, lib, CXX=str(tmp_path / "no-such-compiler"))
    assert out.returncode == 0, out.stderr[-3000:]
    path, result = out.stdout.strip().splitlines()[-2:]
    assert path.startswith("torch: no C++ compiler to build them"), path
    assert result == "True False 1", result


def test_strict_refuses_to_run_without_operators(monkeypatch):
    """strict=True: no silent PyTorch loop where the operators cannot load."""
    monkeypatch.setattr(_native, "ops", lambda: None)
    with pytest.raises(flexsn.FlexSNError, match="cannot load its PyTorch operators"):
        flexsn.FlexSN(lif(), num_states=1, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", flexsn.FallbackWarning)
        m = flexsn.FlexSN(lif(), num_states=1)
    assert not m.compiled


def test_build_command_targets_this_torch():
    cmd = _opsbuild.build_command(["ccache", "c++"], "out.so")
    include, lib = _opsbuild.torch_dirs()
    assert cmd[:2] == ["ccache", "c++"] and str(_opsbuild.SOURCE) in cmd
    assert f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}" in cmd
    assert str(include) in cmd and f"-L{lib}" in cmd
    # PyTorch's own shared C++ runtime, never a static copy of the compiler's
    assert any(os.path.basename(c).startswith("libstdc++.so") for c in cmd), cmd
    assert _opsbuild.SOURCE.is_file()


# Two threads ask for the operators at once in a process that has to build
# them: both get them (the second waits for the first's build).
TWO_THREADS = """
import sys, threading, warnings, flexsn, torch  # flexsn first: it loads nothing yet
from flexsn import _native
warnings.simplefilter("always")
got = []
ts = [threading.Thread(target=lambda: got.append(_native.ops() is not None)) for _ in range(2)]
with warnings.catch_warnings(record=True) as caught:
    [t.start() for t in ts]
    [t.join() for t in ts]
print(got, flexsn.call_path())
print([str(w.message) for w in caught if issubclass(w.category, flexsn.CacheWarning)])
"""


def test_operator_builds_in_the_cache_are_checked_and_rebuilt(tmp_path):
    """In one cache, in turn: a first build ($CXX a word list) while two
    threads ask; a library that fails its checksum; one that passes it but
    does not load (each built again, once, into a fresh build directory,
    with a CacheWarning); and a process that finds another holding the
    build lock, which says that it waits."""
    cxx = _opsbuild.compiler()
    if cxx is None:
        pytest.skip("no C++ compiler here")
    lib = _lone_library(tmp_path)
    cache = tmp_path / "cache"
    env = dict(os.environ, FLEXSN_LIBRARY=str(lib), FLEXSN_CACHE_DIR=str(cache),
               CXX="env " + " ".join(cxx))
    argv, env = child_python(env)

    def child():
        out = subprocess.run(argv + ["-c", TWO_THREADS], env=env, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        got, warned = out.stdout.strip().splitlines()[-2:]
        assert got.startswith("[True, True] native: "), got
        return warned, out.stderr
    warned, err = child()
    assert err.count("building its PyTorch operators") == 1 and warned == "[]", err
    (key_dir,) = (cache / "torch-ops").iterdir()
    (first,) = key_dir.glob("build-*")
    library = first / "libFlexSNTorch.so"
    library.write_bytes(library.read_bytes()[:100000])  # cut short
    warned, err = child()
    assert "fails its checksum" in warned and "building its PyTorch operators" in err
    (second,) = key_dir.glob("build-*")
    assert second != first
    # a library the checksum vouches for that does not load
    garbage = second / "libFlexSNTorch.so"
    garbage.write_bytes(b"not a shared library")
    from flexsn import _cache
    entry = _cache.read_entry(key_dir, "current")
    _cache.write_entry(key_dir, "current", entry.replace(
        entry.split(b'"sha256": "')[1][:64], _cache.file_digest(garbage).encode()))
    warned, err = child()
    assert "does not load" in warned and "building its PyTorch operators" in err
    (third,) = key_dir.glob("build-*")
    assert third not in (first, second)
    # another process holds the lock: this one waits, says so, then loads
    import fcntl
    with open(key_dir / ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiting = subprocess.Popen(argv + ["-c", TWO_THREADS], env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        import time
        time.sleep(8)
        assert waiting.poll() is None
        fcntl.flock(held, fcntl.LOCK_UN)
    out, err = waiting.communicate(timeout=300)
    assert waiting.returncode == 0 and "[True, True] native" in out, err
    assert "waiting for another process" in err and "building" not in err.replace(
        "that is building", "")


def test_a_graph_keeps_its_kernels_program_alive():
    """A training graph outlives the package's hold on its program (the
    package drops it as when its Program is collected): the bound kernels
    hold the program, and the backward runs them."""
    core = lif(v_th=1.21875)  # a program of its own
    m = flexsn.FlexSN(core, num_states=1, backend="cpu")
    x = (torch.randn(5, 8) * 2).requires_grad_()
    s = m(x)
    (prep,) = [p for p in m.kernel.compiled.prepared.values() if hasattr(p, "pair")]
    program = prep._program
    assert program.adopted
    from flexsn import _program
    for key in [k for k, v in _program._programs.items() if v is program]:
        del _program._programs[key]  # no later module gets this one
    _native.drop_program(program.handle)  # the package's reference, gone
    program.adopted, program.handle = False, None
    del m, prep
    s.sum().backward()
    ref = flexsn.FlexSN(core, num_states=1, backend="torch")
    xr = x.detach().clone().requires_grad_()
    ref(xr).sum().backward()
    assert_close(x.grad, xr.grad, what="x.grad")
