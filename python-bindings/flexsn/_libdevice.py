"""Which libdevice a CUDA compile reads: the toolkit's (``$CUDA_HOME``,
else /usr/local/cuda), or, where that has none, the copy the package
carries next to libFlexSN.so (libdevice is NVIDIA's math library in LLVM
bitcode, which a core calling exp, tanh, pow, ... needs), so that a GPU
machine with a driver and no toolkit compiles math cores."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from . import _capi

LIBDEVICE = Path("nvvm") / "libdevice" / "libdevice.10.bc"
DEFAULT_TOOLKIT = Path("/usr/local/cuda")


def packaged_cuda_home() -> Optional[Path]:
    """The toolkit-shaped folder the package carries libdevice in (next to
    libFlexSN.so), when it does."""
    home = Path(_capi.library_path()).parent / "cuda"
    return home if (home / LIBDEVICE).is_file() else None


def cuda_home_option() -> str:
    """The compiler's cuda-home option where the toolkit it would read
    ($CUDA_HOME, else /usr/local/cuda) has no libdevice but the package
    carries one; "" otherwise (the compiler's own choice, which also names
    the missing libdevice in its error). Decided once per $CUDA_HOME."""
    env = os.environ.get("CUDA_HOME")
    if env not in _cuda_home_options:
        _cuda_home_options[env] = _cuda_home_for(env)
    return _cuda_home_options[env]


_cuda_home_options: dict = {}


def _cuda_home_for(env: Optional[str]) -> str:
    toolkit = Path(env) if env else DEFAULT_TOOLKIT
    if (toolkit / LIBDEVICE).is_file():
        return ""
    home = packaged_cuda_home()
    if home is None or any(c.isspace() for c in str(home)):
        return ""  # (options are separated by white space)
    return f"cuda-home={home}"
