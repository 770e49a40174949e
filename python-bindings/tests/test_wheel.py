"""The install check: the manylinux wheel scripts/wheel.sh built
($FLEXSN_TEST_WHEEL, set by the test command) installs into a fresh venv,
imports from there, runs a core on the native path and compiles a math core
for CUDA from the libdevice it carries."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

WHEEL = os.environ.get("FLEXSN_TEST_WHEEL")
pytestmark = pytest.mark.skipif(not WHEEL, reason="no wheel built (FLEXSN_TEST_WHEEL unset)")

SCRIPT = r"""
import sys, torch, flexsn
from flexsn import _capi, _program, _runner
assert "/venv/" in flexsn.__file__, flexsn.__file__
assert flexsn.call_path().startswith("native"), flexsn.call_path()
def core(x, v):
    h = v + torch.exp(-x.abs())
    s = flexsn.surrogate.ATan()(h - 1.0)
    return s, h * (1.0 - s)
out, v = flexsn.FlexSNKernel(core, 1, 1, strict=True)(torch.randn(5, 3), torch.zeros(3))
assert out.shape == (5, 3)
assert _program.cuda_home_option().startswith("cuda-home="), _program.cuda_home_option()
cc = _runner.CompiledCore(core, 1, 1)
p = _program.get_program(cc.ir([torch.float32] * 2, [], [], [False, False]), "cuda",
                         chip="sm_90")
assert ".extern .func" not in _capi.program_ptx(p.handle)
print("wheel ok", flexsn.library_version())
"""


def test_wheel_tag_and_contents():
    name = Path(WHEEL).name
    assert name.endswith("-py3-none-manylinux_2_36_x86_64.whl"), name
    files = zipfile.ZipFile(WHEEL).namelist()
    for f in ("flexsn/libFlexSN.so", "flexsn/libFlexSNTorch.so",
              "flexsn/cuda/nvvm/libdevice/libdevice.10.bc"):
        assert f in files, f


def test_wheel_installs_and_runs(tmp_path):
    venv = tmp_path / "venv"
    # the venv sees the installed torch (a second 4.7 GB copy is not the
    # point), but not this checkout: PYTHONPATH and FLEXSN_LIBRARY are unset
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", WHEEL],
                   check=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "FLEXSN_LIBRARY", "FLEXSN_TEST_INSTALLED", "FLEXSN_NATIVE")}
    env.update(CUDA_HOME=str(tmp_path / "no-toolkit"), FLEXSN_CACHE_DIR="off")
    r = subprocess.run([py, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "wheel ok" in r.stdout
