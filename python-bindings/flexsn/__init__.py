"""flexsn: spiking neurons written once in PyTorch, compiled by FlexSN-MLIR
into fused multi-step kernels (CPU JIT and CUDA PTX) with BPTT training.

    import flexsn
    neuron = flexsn.FlexSN(core, num_inputs=1, num_states=1, num_outputs=1)

Importing the package loads neither torch, the compiler library nor the
GPU: the names below are loaded on first use. Where torch is already
imported, importing the package registers its PyTorch operators, so that a
saved graph naming them (torch.export, AOTInductor) loads after ``import
torch, flexsn``.
"""

from ._errors import (CacheWarning, FallbackWarning, FlexSNError, LoopWarning,
                      StepByStepWarning, UnsupportedOpError)

__version__ = "0.5.0"

_LAZY = {
    "FlexSN": "._module",
    "FlexSNKernel": "._module",
    "surrogate": None,
    "neuron": None,
    "from_snntorch": ".snntorch",
    "from_norse": ".norse",
    "convert": ".spikingjelly",
    "compact_spikes": "._spikes",
    "mark_spikes": "._spikes",
    "recompute_states": "._compiled",
    "chunked_time": "._compiled",
    "multistep": "._multistep",
    "MultiStep": "._multistep",
    "backend": "._backend",
    "Backend": "._backend",
    "spikingjelly": None,
    "snntorch": None,
    "norse": None,
    "nir": None,
}

__all__ = ["FlexSN", "FlexSNKernel", "surrogate", "neuron", "from_snntorch",
           "from_norse", "convert", "multistep", "MultiStep", "backend", "Backend",
           "compact_spikes",
           "mark_spikes", "recompute_states", "chunked_time", "FlexSNError", "UnsupportedOpError",
           "FallbackWarning", "StepByStepWarning", "LoopWarning", "CacheWarning",
           "library_version", "call_path"]


def __getattr__(name):
    import importlib
    if name in _LAZY:
        where = _LAZY[name]
        if where is None:
            return importlib.import_module(f".{name}", __name__)
        module = importlib.import_module(where, __name__)
        if name in ("backend", "Backend"):
            # snnTorch's and Norse's forwards traced as Dynamo captures them,
            # for flexsn.backend only (see _backend.capture_libraries)
            module.capture_libraries()
        return getattr(module, name)
    raise AttributeError(f"module 'flexsn' has no attribute {name!r}")


def library_version() -> str:
    """The loaded libFlexSN's version string."""
    from . import _capi
    return _capi.version()


def call_path() -> str:
    """How cores run, and why: "native: <library> (...)" where the package's
    PyTorch operators (libFlexSNTorch.so) loaded, built with the package or
    for the installed PyTorch on first use; "torch: <why>" where they could
    not, and modules run their cores as PyTorch loops."""
    from . import _native
    return _native.status()


def _register_operators_if_torch() -> None:
    import sys
    if "torch" in sys.modules:
        from . import _native
        _native.ops()  # None where they cannot load: status() says why


_register_operators_if_torch()
