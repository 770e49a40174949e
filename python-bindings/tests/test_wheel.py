"""The install checks, each in a fresh venv (which sees the installed torch
but not this checkout):

- the manylinux wheel scripts/wheel.sh built ($FLEXSN_TEST_WHEEL) installs,
  imports, runs a core through the operators it carries (built for this
  PyTorch) and compiles a math core for CUDA from the libdevice it carries;
- the wheel a plain `pip wheel .` builds under pip's build isolation
  ($FLEXSN_TEST_PLAIN_WHEEL), where no torch is importable and so no
  operators are built: it carries their source, and its first use builds
  them for the installed PyTorch, once per cache."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

WHEEL = os.environ.get("FLEXSN_TEST_WHEEL")
PLAIN_WHEEL = os.environ.get("FLEXSN_TEST_PLAIN_WHEEL")
needs_wheel = pytest.mark.skipif(not WHEEL, reason="no wheel built (FLEXSN_TEST_WHEEL unset)")
needs_plain_wheel = pytest.mark.skipif(
    not PLAIN_WHEEL, reason="no isolated-build wheel (FLEXSN_TEST_PLAIN_WHEEL unset)")

SCRIPT = r"""
import sys, torch, flexsn
from flexsn import _capi, _compiled, _libdevice, _program
assert "/venv/" in flexsn.__file__, flexsn.__file__
assert flexsn.call_path().startswith("native"), flexsn.call_path()
assert "built with the package" in flexsn.call_path(), flexsn.call_path()
def core(x, v):
    h = v + torch.exp(-x.abs())
    s = flexsn.surrogate.ATan()(h - 1.0)
    return s, h * (1.0 - s)
out, v = flexsn.FlexSNKernel(core, 1, 1, strict=True)(torch.randn(5, 3), torch.zeros(3))
assert out.shape == (5, 3)
assert _libdevice.cuda_home_option().startswith("cuda-home="), _libdevice.cuda_home_option()
cc = _compiled.CompiledCore(core, 1, 1)
p = _program.get_program(cc.ir([torch.float32] * 2, [], [], [False, False]), "cuda",
                         chip="sm_90")
assert ".extern .func" not in _capi.program_ptx(p.handle)
print("wheel ok", flexsn.library_version())
"""


@needs_wheel
def test_wheel_tag_and_contents():
    name = Path(WHEEL).name
    assert name.endswith("-py3-none-manylinux_2_36_x86_64.whl"), name
    files = zipfile.ZipFile(WHEEL).namelist()
    for f in ("flexsn/libFlexSN.so", "flexsn/libFlexSNTorch.so",
              "flexsn/cuda/nvvm/libdevice/libdevice.10.bc"):
        assert f in files, f


def _venv_with(tmp_path, wheel):
    """A fresh venv holding `wheel`, and the environment to run it in."""
    venv = tmp_path / "venv"
    # the venv sees the installed torch (a second 4.7 GB copy is not the
    # point), but not this checkout: PYTHONPATH and FLEXSN_LIBRARY are unset
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel],
                   check=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "FLEXSN_LIBRARY", "FLEXSN_TEST_INSTALLED")}
    return py, env


@needs_wheel
def test_wheel_installs_and_runs(tmp_path):
    py, env = _venv_with(tmp_path, WHEEL)
    env.update(CUDA_HOME=str(tmp_path / "no-toolkit"), FLEXSN_CACHE_DIR="off")
    r = subprocess.run([py, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "wheel ok" in r.stdout


PLAIN_SCRIPT = r"""
import torch, flexsn
assert "/venv/" in flexsn.__file__, flexsn.__file__
def core(x, v):
    h = 0.5 * v + x
    s = flexsn.surrogate.Sigmoid()(h - 1.0)
    return s, h * (1.0 - s)
m = flexsn.FlexSN(core, num_states=1)
x = torch.randn(6, 3, 4, requires_grad=True)
ref = flexsn.FlexSN(core, num_states=1, backend="torch")(x)
y = m(x)
y.sum().backward()
assert m.compiled and torch.allclose(y, ref) and x.grad is not None
print(flexsn.call_path())
"""


@needs_plain_wheel
def test_isolated_build_wheel_builds_its_operators_on_first_use(tmp_path):
    files = zipfile.ZipFile(PLAIN_WHEEL).namelist()
    assert "flexsn/libFlexSN.so" in files and "flexsn/csrc/FlexSNTorch.cpp" in files
    assert "flexsn/libFlexSNTorch.so" not in files  # no torch in pip's isolated build
    py, env = _venv_with(tmp_path, PLAIN_WHEEL)
    env.update(FLEXSN_CACHE_DIR=str(tmp_path / "cache"))
    for attempt in ("first", "second"):
        r = subprocess.run([py, "-c", PLAIN_SCRIPT], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        path = r.stdout.strip().splitlines()[-1]
        assert path.startswith("native: ") and "built for this PyTorch" in path, path
        assert ("building its PyTorch operators" in r.stderr) == (attempt == "first")
