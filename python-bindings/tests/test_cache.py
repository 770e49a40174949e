"""Compiled programs: cached in the process, and on disk across processes:
CUDA programs (PTX and manifest) and CPU kernels (object files, keyed and
written by the library). PTX compiles without a GPU, so this runs
everywhere."""

import os
import subprocess
import warnings
from pathlib import Path

import pytest
import torch

import flexsn
from conftest import child_python
from flexsn import _cache, _capi, _compiled, _native, _opsbuild, _program
from cores import lif


def _ir():
    cc = _compiled.CompiledCore(lif(), 1, 1)
    return cc.ir([torch.float32] * 2, [], [], [False, False])


def test_process_cache_returns_the_same_program():
    ir = _ir()
    assert _program.get_program(ir, "cpu") is _program.get_program(ir, "cpu")


def test_cuda_programs_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEXSN_CACHE_DIR", str(tmp_path))
    ir = _ir()
    first = _program._compile(ir, "cuda", "chip=sm_90")
    files = sorted(p.suffix for p in tmp_path.iterdir())
    assert files == [".program"]  # PTX and manifest, one checksummed entry
    # A second process finds it: no compilation.
    def no_compile(*a):
        raise AssertionError("compiled again")
    monkeypatch.setattr(_capi, "program_create", no_compile)
    again = _program._compile(ir, "cuda", "chip=sm_90")
    assert again.manifest == first.manifest
    assert _capi.program_ptx(again.handle) == _capi.program_ptx(first.handle)
    # Another chip is another entry.
    monkeypatch.undo()
    monkeypatch.setenv("FLEXSN_CACHE_DIR", str(tmp_path))
    _program._compile(ir, "cuda", "chip=sm_80")
    assert len(list(tmp_path.glob("*.program"))) == 2


@pytest.mark.parametrize("damage", ["truncated", "flipped", "garbage", "symlink"])
def test_a_damaged_program_entry_is_rebuilt_once_with_a_warning(tmp_path, monkeypatch,
                                                                damage):
    """A PTX entry cut short, with one byte changed, not an entry at all,
    or a symbolic link: a CacheWarning that names it, the program compiled
    again, and the entry written whole again (no warning the next time)."""
    monkeypatch.setenv("FLEXSN_CACHE_DIR", str(tmp_path))
    ir = _ir()
    first = _program._compile(ir, "cuda", "chip=sm_90")
    (entry,) = tmp_path.glob("*.program")
    whole = entry.read_bytes()
    if damage == "truncated":
        entry.write_bytes(whole[:len(whole) // 2])
    elif damage == "flipped":
        entry.write_bytes(whole[:-10] + bytes([whole[-10] ^ 1]) + whole[-9:])
    elif damage == "garbage":
        entry.write_bytes(b"{not an entry")
    else:
        other = tmp_path / "elsewhere"
        other.write_bytes(whole)
        entry.unlink()
        entry.symlink_to(other)
    with pytest.warns(flexsn.CacheWarning, match=entry.name):
        program = _program._compile(ir, "cuda", "chip=sm_90")
    assert program.manifest == first.manifest
    assert not entry.is_symlink() and entry.read_bytes() == whole
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _program._compile(ir, "cuda", "chip=sm_90")


def test_a_rebuilt_library_does_not_reuse_old_ptx(tmp_path, monkeypatch):
    # The version string stays the same across rebuilds; the key also holds
    # the loaded library's path, size and mtime.
    monkeypatch.setenv("FLEXSN_CACHE_DIR", str(tmp_path))
    ir = _ir()
    assert str(Path(_capi.build().rsplit(":", 2)[0])).endswith("libFlexSN.so")
    _program._compile(ir, "cuda", "chip=sm_90")
    monkeypatch.setattr(_capi, "build", lambda: "/elsewhere/libFlexSN.so:1:2")
    _program._compile(ir, "cuda", "chip=sm_90")
    assert len(list(tmp_path.glob("*.program"))) == 2


def test_every_kernel_has_its_scalar_entry(tmp_path, monkeypatch):
    # At 4 neurons per thread each kernel also has a one-neuron entry, which
    # the manifest names and the PTX defines.
    monkeypatch.setenv("FLEXSN_CACHE_DIR", "off")
    program = _program._compile(_ir(), "cuda", "chip=sm_90 differentiate=1")
    ptx = _capi.program_ptx(program.handle)
    for k in program.manifest["kernels"]:
        assert k["scalar_entry"] == k["name"] + "_scalar"
        assert f".entry {k['name']}(" in ptx
        assert f".entry {k['scalar_entry']}(" in ptx


@pytest.mark.parametrize("dtype, depth", [(torch.float32, 16),
                                          (torch.bfloat16, 32)])
def test_deep_entries(monkeypatch, dtype, depth):
    # LIF reads one sequence a step: its forward-time kernels get a deep
    # entry with 64 bytes of reads in flight a thread (16 f32 or 32 bf16
    # steps), which the manifest names and the PTX defines with a loop that
    # steps by that depth; the backward reads 16 bytes or more a step and
    # has none. An explicit prefetch gives no kernel one.
    monkeypatch.setenv("FLEXSN_CACHE_DIR", "off")
    ir = _compiled.CompiledCore(lif(), 1, 1).ir([dtype] * 2, [], [], [True] * 2)
    program = _program._compile(ir, "cuda", "chip=sm_90 differentiate=1")
    ptx = _capi.program_ptx(program.handle)
    kinds = {}
    for k in program.manifest["kernels"]:
        kinds[k["variant"]] = k.get("deep_prefetch")
        if "deep_entry" in k:
            assert k["deep_entry"] == k["name"] + "_deep"
            assert f".entry {k['deep_entry']}(" in ptx
    assert kinds == {"inference": depth, "final_state": depth,
                     "forward": depth, "backward": None}
    explicit = _program._compile(ir, "cuda",
                                 "chip=sm_90 differentiate=1 prefetch=4")
    assert not any("deep_entry" in k for k in explicit.manifest["kernels"])
    assert "_deep(" not in _capi.program_ptx(explicit.handle)


def test_cache_off(monkeypatch, tmp_path):
    monkeypatch.setenv("FLEXSN_CACHE_DIR", "off")
    assert _program.cache_dir() is None


def _cpu_training_step(monkeypatch, threshold):
    """A CPU training step of a LIF (its own threshold: a program of its
    own) from a fresh program, as a new process would make it."""
    monkeypatch.setattr(_program, "_programs", {})
    m = flexsn.FlexSN(lif(v_th=threshold), num_states=1, backend="cpu")
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(6, 40, generator=g) * 2).requires_grad_()
    s = m(x)
    s.backward(torch.randn(6, 40, generator=g))
    return s.detach(), x.grad


def _objects(directory):
    return {p.name: p.stat().st_ino for p in directory.glob("cpu-*.o")}


def test_cpu_objects_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEXSN_CACHE_DIR", str(tmp_path))
    first = _cpu_training_step(monkeypatch, 1.3125)
    written = _objects(tmp_path)
    assert len(written) == 2, written  # the step's forward and backward
    # an object file, then its checksum trailer; mode 0600
    for p in tmp_path.glob("cpu-*.o"):
        data = p.read_bytes()
        assert data[:4] == b"\x7fELF" and data[-79:-64] == b"\nflexsn-sha256:"
        assert p.stat().st_mode & 0o777 == 0o600
    # A new program finds them: read, not written again (a write renames a
    # new file into place).
    again = _cpu_training_step(monkeypatch, 1.3125)
    assert _objects(tmp_path) == written
    for a, b in zip(first, again):
        assert torch.equal(a, b)
    # Another core is another kernel.
    _cpu_training_step(monkeypatch, 1.375)
    assert len(_objects(tmp_path)) == 4
    assert not list(tmp_path.glob(".tmp-*"))


@pytest.mark.parametrize("damage", ["garbage", "swapped", "truncated", "flipped"])
def test_a_bad_cpu_object_is_compiled_again(tmp_path, monkeypatch, capfd, damage):
    """A cached file that is not an object, is another kernel's object (no
    entry point of this kernel's name), is cut short or has one byte
    changed is compiled again (with a line on stderr that names it) and
    replaced; the step's results are those of a clean compile."""
    monkeypatch.setenv("FLEXSN_CACHE_DIR", str(tmp_path))
    first = _cpu_training_step(monkeypatch, 1.4375)
    paths = sorted(tmp_path.glob("cpu-*.o"))
    contents = [p.read_bytes() for p in paths]
    for p, data in zip(paths, contents if damage != "swapped" else contents[::-1]):
        p.write_bytes({"garbage": b"not an object file",
                       "swapped": data,
                       "truncated": data[:len(data) // 2],
                       "flipped": data[:100] + bytes([data[100] ^ 1]) + data[101:]}[damage])
    damaged = _objects(tmp_path)
    capfd.readouterr()
    again = _cpu_training_step(monkeypatch, 1.4375)
    err = capfd.readouterr().err
    assert all(f"the cached CPU kernel {p}" in err for p in paths), err
    for a, b in zip(first, again):
        assert torch.equal(a, b)
    replaced = _objects(tmp_path)
    assert replaced.keys() == damaged.keys()
    assert all(replaced[k] != damaged[k] for k in damaged), "not replaced"
    assert [p.read_bytes() for p in paths] == contents


def test_cpu_cache_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEXSN_CACHE_DIR", "off")
    monkeypatch.setenv("HOME", str(tmp_path))
    _cpu_training_step(monkeypatch, 1.5)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_an_unusable_cache_dir_falls_back_to_a_private_one(tmp_path, monkeypatch):
    """A cache 'directory' that is a file (as an unwritable one): one
    CacheWarning, a private temporary cache instead, nothing written there,
    the results are right."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    monkeypatch.setenv("FLEXSN_CACHE_DIR", str(blocker))
    with pytest.warns(flexsn.CacheWarning, match="is not a directory"):
        first = _cpu_training_step(monkeypatch, 1.5625)
    monkeypatch.setenv("FLEXSN_CACHE_DIR", "off")
    clean = _cpu_training_step(monkeypatch, 1.5625)
    for a, b in zip(first, clean):
        assert torch.equal(a, b)
    assert [p.name for p in tmp_path.iterdir()] == ["not-a-directory"]
    assert blocker.read_text() == "x"


def test_cpu_cache_dir_only_for_cpu_programs():
    cuda = _capi.program_create(_ir(), _capi.TARGET_CUDA, "chip=sm_90")
    try:
        with pytest.raises(flexsn.FlexSNError, match="not a CPU program"):
            _capi.program_set_cpu_cache_dir(cuda, "/tmp")
    finally:
        _capi.program_destroy(cuda)
    with pytest.raises(flexsn.FlexSNError, match="null program"):
        _capi.program_set_cpu_cache_dir(None, "/tmp")


def test_concurrent_processes_share_the_cache(tmp_path):
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import torch\n"
        "from flexsn import _compiled, _program\n"
        "from cores import lif\n"
        "cc = _compiled.CompiledCore(lif(), 1, 1)\n"
        "ir = cc.ir([torch.float32] * 2, [], [], [False, False])\n"
        "p = _program._compile(ir, 'cuda', 'chip=sm_90')\n"
        "print(sorted(p.kernels))\n"
    ) % str(Path(__file__).parent)
    argv, env = child_python()
    env["FLEXSN_CACHE_DIR"] = str(tmp_path)
    procs = [subprocess.Popen(argv + ["-c", code], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert len({o for o, _ in outs}) == 1
    assert len(list(tmp_path.glob("*.program"))) == 1
    assert not list(tmp_path.glob(".tmp-*"))


def test_changing_T_or_N_never_recompiles(monkeypatch):
    m = flexsn.FlexSN(lif(), num_inputs=1, num_states=1, backend="cpu")
    m(torch.randn(3, 5))
    calls = []
    real = _capi.program_create
    monkeypatch.setattr(_capi, "program_create", lambda *a: calls.append(a) or real(*a))
    for T, shape in [(7, (5,)), (2, (3, 4)), (11, (64,))]:
        m.reset()
        m(torch.randn(T, *shape))
    assert calls == []


def _fresh_root(monkeypatch, where):
    monkeypatch.setattr(_cache, "_roots", {})
    monkeypatch.setattr(_cache, "_warned", set())
    monkeypatch.setenv("FLEXSN_CACHE_DIR", str(where))
    return _cache.root()


def test_the_cache_is_created_private(tmp_path, monkeypatch):
    root = _fresh_root(monkeypatch, tmp_path / "new" / "cache")
    assert root == tmp_path / "new" / "cache"
    assert root.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("kind", ["group-writable", "world-writable", "symlink",
                                  "other-owner", "home-is-a-file"])
def test_an_untrusted_cache_is_refused(tmp_path, monkeypatch, kind):
    """A cache directory another user could write (or that is a symbolic
    link, or belongs to another user) is not used, nor anything planted in
    it: one CacheWarning that says why, and a private temporary directory
    instead. So is a HOME where ~/.cache cannot be made."""
    bad = tmp_path / "shared"
    bad.mkdir()
    planted = bad / "torch-ops" / "x" / "libFlexSNTorch.so"
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b"\x7fELF planted")
    if kind == "group-writable":
        os.chmod(bad, 0o770)
        why = "writable by its group or others"
    elif kind == "world-writable":
        os.chmod(bad, 0o1777)
        why = "writable by its group or others"
    elif kind == "symlink":
        link = tmp_path / "link"
        link.symlink_to(bad)
        bad, why = link, "is a symbolic link"
    elif kind == "other-owner":
        if os.geteuid() != 0:
            pytest.skip("only root can give a directory to another user")
        os.chown(bad, 65534, 65534)
        why = "belongs to user id 65534"
    else:
        home = tmp_path / "home-file"
        home.write_text("not a directory")
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.delenv("FLEXSN_CACHE_DIR", raising=False)
        monkeypatch.setattr(_cache, "_roots", {})
        monkeypatch.setattr(_cache, "_warned", set())
        with pytest.warns(flexsn.CacheWarning, match="cannot be created"):
            root = _cache.root()
        assert root != home and str(root).startswith(os.path.realpath(
            os.environ.get("TMPDIR", "/tmp")))
        return
    with pytest.warns(flexsn.CacheWarning, match=why):
        root = _fresh_root(monkeypatch, bad)
    assert root is not None and root != bad and not str(root).startswith(str(tmp_path))
    assert root.stat().st_mode & 0o777 == 0o700
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _cache.root() == root  # one warning


def test_a_planted_operator_library_is_not_loaded(tmp_path, monkeypatch):
    """In a trusted cache, a library placed where a build would be (the
    fixed path, or a build directory) is ignored unless the checksummed
    `current` entry names it with its SHA-256; a `current` whose digest
    does not match is refused with a warning."""
    root = _fresh_root(monkeypatch, tmp_path / "cache")
    key_dir = _cache.subdir(_cache.subdir(root, "torch-ops"), "k")
    (key_dir / "libFlexSNTorch.so").write_bytes(b"planted")
    build = key_dir / "build-planted"
    build.mkdir(mode=0o700)
    (build / "libFlexSNTorch.so").write_bytes(b"planted")
    assert _opsbuild._current(key_dir) is None
    _cache.write_entry(key_dir, "current",
                       b'{"build": "build-planted", "sha256": "' + b"0" * 64 + b'"}')
    with pytest.warns(flexsn.CacheWarning, match="fails its checksum"):
        assert _opsbuild._current(key_dir) is None
    (key_dir / "current").write_bytes(b'{"build": "build-planted", "sha256": "x"}')
    with pytest.warns(flexsn.CacheWarning, match="has no checksum"):
        assert _opsbuild._current(key_dir) is None
    digest = _cache.file_digest(build / "libFlexSNTorch.so")
    _cache.write_entry(key_dir, "current",
                       ('{"build": "build-planted", "sha256": "%s"}' % digest).encode())
    assert _opsbuild._current(key_dir) == build / "libFlexSNTorch.so"
    _cache.write_entry(key_dir, "current",
                       ('{"build": "../elsewhere", "sha256": "%s"}' % digest).encode())
    assert _opsbuild._current(key_dir) is None


def test_the_build_has_a_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEXSN_BUILD_TIMEOUT", "1")
    cxx = _opsbuild.compiler()
    if cxx is None:
        pytest.skip("no C++ compiler here")
    with pytest.raises(RuntimeError, match=r"took over 1 s \(FLEXSN_BUILD_TIMEOUT\)"):
        _opsbuild._compile_into(["sh", "-c", "sleep 30", "--"], tmp_path)


def test_the_build_key_names_the_compiler():
    cxx = _opsbuild.compiler()
    if cxx is None:
        pytest.skip("no C++ compiler here")
    assert _opsbuild.build_key(cxx) != _opsbuild.build_key(["env"] + cxx)
    assert _opsbuild.build_key(cxx) == _opsbuild.build_key(list(cxx))
