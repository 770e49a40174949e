"""Shared fixtures: the device each test runs on (the cpu backend always;
CUDA when a GPU is present, marked `cuda` so `-m cuda` selects it)."""

import os
import sys

import pytest
import torch

# The package of this checkout, unless the installed one is under test
# (FLEXSN_TEST_INSTALLED=1, e.g. a wheel on the GPU machine).
if not os.environ.get("FLEXSN_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

DEVICES = [pytest.param("cpu", id="cpu")]
if torch.cuda.is_available():
    DEVICES.append(pytest.param("cuda", id="cuda", marks=pytest.mark.cuda))


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU (runs on the GPU machine)")


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)


def child_python(env=None):
    """(argv prefix, environment) of a child Python that imports the flexsn
    this process tests (the checkout's, or the installed one under
    FLEXSN_TEST_INSTALLED): its folder first on PYTHONPATH, and -P, which
    keeps the working directory (a checkout may hold a package there) off
    sys.path."""
    import flexsn
    env = dict(os.environ if env is None else env)
    parent = os.path.dirname(os.path.dirname(os.path.abspath(flexsn.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (parent, env.get("PYTHONPATH")) if p)
    return [sys.executable, "-P"], env


def assert_close(a, b, dtype=torch.float32, what=""):
    tol = {torch.float32: 1e-6, torch.float64: 1e-10}.get(dtype, 1e-2)
    # relative to the magnitude of the reference, as the tutorial's asserts
    assert a.shape == b.shape, f"{what}: shape {tuple(a.shape)} != {tuple(b.shape)}"
    a, b = a.double(), b.double()
    err = (a - b).abs().max().item() if a.numel() else 0.0
    bound = tol + tol * b.abs().max().item() if b.numel() else tol
    assert err <= bound, f"{what}: max abs error {err:.3e} > {bound:.3e}"


class LaunchSpy:
    """What each launch of a `with` block passed as pointers, from the
    operators' launch trace. `launches` holds, per launch, the kernel's
    variant and the (meaning, index) keys of its reads that were null
    pointers."""

    def __init__(self, monkeypatch):
        from flexsn import _native, _program
        self.launches = []
        self._ops = _native.ops()
        self._bounds = {}
        init = _program.KernelBinding.__init__
        bounds = self._bounds

        def spy_init(b, *a, **k):
            init(b, *a, **k)
            bounds[b.native] = b
        monkeypatch.setattr(_program.KernelBinding, "__init__", spy_init)

    def __enter__(self):
        self._ops.trace(True)
        return self

    def __exit__(self, *exc):
        log = self._ops.trace(False)
        i = 0
        while i < len(log):
            b, n = self._bounds[log[i]], log[i + 1]
            null = log[i + 2:i + 2 + n]
            i += 2 + n
            self.launches.append((b.variant, sorted(
                key for (slot, _), key in zip(b.reads, b.read_keys) if null[slot])))
