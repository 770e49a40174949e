"""Spike tensors kept compactly for the backward.

Autograd keeps what a layer saves for its backward until then: a
convolution or linear layer after a spiking neuron saves its input, the
spike tensor, in the input's dtype (4 bytes a spike in float32). Inside
``compact_spikes()``, a saved tensor that a compiled core produced as a
spike output (every element exactly 0 or 1, known from the core's trace:
``flexsn.spike`` or a bool made float), or that the user marked with
``mark_spikes``, is kept as 1 bit (``bits=True``, the default) or 1 byte
per element and expanded again when the backward reads it. The values are
the same, so losses and gradients are bit for bit those of a run without
it.

How a tensor is recognised: the cores' spike outputs are noted (a weak
reference, the tensor's storage span and version) while the context is
active; a saved tensor packs when it lies inside a noted span of the same
storage and its version is unchanged (an in-place write since makes it
anything). Anything else is saved as it is.
"""

from __future__ import annotations

import contextlib
import threading
import weakref

import torch

# storage data pointer -> list of [weakref, storage offset, extent, version]
_noted: dict[int, list] = {}
_lock = threading.Lock()
# open compact_spikes() contexts; every core call reads it, so a plain global
_depth = 0


def _note(t: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() == 0:
        return
    try:
        key = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # fake or meta tensors
        return
    if key == 0:
        return

    def forget(ref, key=key):
        with _lock:
            entries = _noted.get(key)
            if entries is not None:
                entries[:] = [e for e in entries if e[0] is not ref]
                if not entries:
                    del _noted[key]
    entry = [weakref.ref(t, forget), t.storage_offset(), _extent(t), t._version]
    with _lock:
        _noted.setdefault(key, []).append(entry)


def note_outputs(outputs, spike_outputs) -> None:
    """Notes outputs[k] for each k in `spike_outputs` (a compiled core's
    spike outputs) while compact_spikes() is active."""
    if _depth == 0 or not spike_outputs:
        return
    for k in spike_outputs:
        if k < len(outputs):
            _note(outputs[k])


def mark_spikes(tensor: torch.Tensor) -> torch.Tensor:
    """Declares that every element of `tensor` is exactly 0 or 1 (input
    spikes from a dataset, say), so that compact_spikes() keeps it compactly
    where a layer saves it. Returns `tensor`. Outside compact_spikes() it
    does nothing; a wrong declaration gives wrong gradients (the values are
    not checked: that would read the tensor and wait for the GPU)."""
    if _depth and isinstance(tensor, torch.Tensor):
        _note(tensor)
    return tensor


def _extent(t: torch.Tensor) -> int:
    """Elements of storage from t's first to its last, inclusive."""
    if t.numel() == 0:
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if s > 1)


def _is_noted(t: torch.Tensor) -> bool:
    if not t.is_floating_point() or t.numel() == 0:
        return False
    try:
        key = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return False
    entries = _noted.get(key)
    if not entries:
        return False
    if any(st < 0 for st in t.stride()):
        return False
    lo, hi = t.storage_offset(), t.storage_offset() + _extent(t)
    for ref, off, n, version in list(entries):
        base = ref()
        if base is not None and off <= lo and hi <= off + n and t._version == version:
            return True
    return False


class _Packed:
    __slots__ = ("data", "shape", "dtype", "bits", "numel")

    def __init__(self, data, shape, dtype, bits, numel):
        self.data, self.shape, self.dtype, self.bits, self.numel = \
            data, shape, dtype, bits, numel


def _pack_bits(flat: torch.Tensor) -> torch.Tensor:
    """Element 8i + k of `flat` (0 or 1) as bit k of byte i: three
    elementwise launches (the host's cost per launch, not the bytes,
    dominates at a network layer's sizes; a torch.compile'd version, one
    fused kernel, took longer per call on an H100)."""
    n = flat.numel()
    ones = (flat != 0).view(torch.uint8)
    if n % 8:
        ones = torch.nn.functional.pad(ones, (0, 8 - n % 8))
    return (ones.view(-1, 8) << _shifts(flat.device)).sum(-1, dtype=torch.uint8)


def _unpack_bits(packed: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    return ((packed.unsqueeze(-1) >> _shifts(packed.device)) & 1).reshape(-1)[:n].to(dtype)


_SHIFTS: dict = {}


def _shifts(device) -> torch.Tensor:
    s = _SHIFTS.get(device)
    if s is None:
        s = _SHIFTS[device] = torch.arange(8, dtype=torch.uint8, device=device)
    return s


def _pack(t: torch.Tensor, bits: bool) -> _Packed:
    n = t.numel()
    flat = t.detach().reshape(-1)
    if not bits:
        return _Packed(flat.to(torch.uint8), t.shape, t.dtype, False, n)
    return _Packed(_pack_bits(flat), t.shape, t.dtype, True, n)


def _unpack(p) -> torch.Tensor:
    if not isinstance(p, _Packed):
        return p
    if not p.bits:
        return p.data.to(p.dtype).view(p.shape)
    return _unpack_bits(p.data, p.numel, p.dtype).view(p.shape)


def _pack_hook(bits: bool):
    def pack(t):
        if _noted and _is_noted(t):
            return _pack(t, bits)
        return t
    return pack


@contextlib.contextmanager
def compact_spikes(bits: bool = True):
    """Within this context, spike tensors that autograd saves for the
    backward are kept as 1 bit (``bits=True``) or 1 byte per element
    (see the module's description). Exact: losses and gradients are those
    of the same step without it. The backward may run inside or after the
    context.

    Applies to eager autograd: a spike output of a compiled core that a
    later eager layer saves. Inside a ``torch.compile``'d region the
    partitioner chooses what the compiled graph saves; nothing there is
    noted."""
    global _depth
    with _lock:
        _depth += 1
    try:
        with torch.autograd.graph.saved_tensors_hooks(_pack_hook(bits), _unpack):
            yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _noted.clear()
