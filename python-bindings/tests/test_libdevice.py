"""A core that calls math functions compiles for CUDA where no toolkit is
installed, from the libdevice the package carries (flexsn/cuda/nvvm/
libdevice, as a wheel lays it out); without one, the error names libdevice.
PTX is emitted without a GPU, so this runs everywhere."""

import shutil
from pathlib import Path

import pytest
import torch

import flexsn
from flexsn import _compiled, _libdevice, _program

TOOLKIT_LIBDEVICE = Path("/usr/local/cuda") / _libdevice.LIBDEVICE


def _math_ir():
    def core(x, v):
        h = v + torch.exp(-x.abs()) * torch.tanh(x)
        s = flexsn.surrogate.ATan()(h - 1.0)
        return s, h * (1.0 - s)
    cc = _compiled.CompiledCore(core, 1, 1)
    return cc.ir([torch.float32] * 2, [], [], [False, False])


@pytest.fixture
def no_toolkit(tmp_path, monkeypatch):
    """CUDA_HOME and the default toolkit path point at empty folders; the
    disk cache is off (a PTX compiled earlier must not answer)."""
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-toolkit"))
    monkeypatch.setattr(_libdevice, "DEFAULT_TOOLKIT", tmp_path / "no-default-toolkit")
    monkeypatch.setenv("FLEXSN_CACHE_DIR", "off")
    monkeypatch.setattr(_libdevice, "_cuda_home_options", {})
    monkeypatch.setattr(_program, "_programs", {})
    return tmp_path


@pytest.mark.skipif(not TOOLKIT_LIBDEVICE.is_file(), reason="no libdevice to copy here")
def test_packaged_libdevice_compiles_math_cores(no_toolkit, monkeypatch):
    home = no_toolkit / "package" / "cuda"
    (home / _libdevice.LIBDEVICE).parent.mkdir(parents=True)
    shutil.copy(TOOLKIT_LIBDEVICE, home / _libdevice.LIBDEVICE)
    monkeypatch.setattr(_libdevice, "packaged_cuda_home", lambda: home)
    assert _libdevice.cuda_home_option() == f"cuda-home={home}"
    program = _program.get_program(_math_ir(), "cuda", chip="sm_90")
    from flexsn import _capi, _compiled
    ptx = _capi.program_ptx(program.handle)
    assert ".extern .func" not in ptx and ".entry" in ptx


def test_no_libdevice_is_named(no_toolkit, monkeypatch):
    monkeypatch.setattr(_libdevice, "packaged_cuda_home", lambda: None)
    assert _libdevice.cuda_home_option() == ""
    with pytest.raises(flexsn.FlexSNError, match="libdevice"):
        _program.get_program(_math_ir(), "cuda", chip="sm_90")


def test_toolkit_wins(tmp_path, monkeypatch):
    """Where $CUDA_HOME has libdevice, the compiler reads it (no option)."""
    lib = tmp_path / "toolkit" / _libdevice.LIBDEVICE
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "toolkit"))
    monkeypatch.setattr(_libdevice, "_cuda_home_options", {})
    assert _libdevice.cuda_home_option() == ""
