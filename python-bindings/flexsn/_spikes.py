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
import operator
import threading
import weakref

import torch

from . import _layout

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
    __slots__ = ("data", "shape", "dtype", "bits", "order")

    def __init__(self, data, shape, dtype, bits, order):
        self.data, self.shape, self.dtype, self.bits, self.order = \
            data, shape, dtype, bits, order


def _memory_order(t: torch.Tensor):
    """The permutation under which `t` is contiguous (its elements in
    memory order: a channels-last tensor packs without a copy and unpacks
    with its strides), or None when t is contiguous or not dense."""
    if t.is_contiguous() or t.dim() < 2:
        return None
    return _layout.dense_order(t.shape, t.stride())


def _in_memory_order(t: torch.Tensor, order):
    return t if order is None else t.permute(order)


def _restore(flat: torch.Tensor, shape, order) -> torch.Tensor:
    if order is None:
        return flat.view(shape)
    return flat.view([shape[d] for d in order]).permute(_layout.inverse(order))


def _pack_bits(flat: torch.Tensor) -> torch.Tensor:
    """Element 8i + k of `flat` (each exactly 0 or 1) as bit k of byte i.
    Eagerly two launches: the rows of 8 times the weights 1, 2, ..., 128
    (sums of at most 255, exact in every float type and in TF32), then the
    cast; the host's cost per launch, not the bytes, dominates at a network
    layer's sizes. In a compiled graph, one kernel that Inductor fuses:
    shifts and a sum on the GPU, the weights' multiply-sum on the CPU."""
    n = flat.numel()
    tracing = _tracing()
    if not tracing or flat.device.type == "cpu":
        if n % 8:
            flat = torch.nn.functional.pad(flat, (0, 8 - n % 8))
        rows = flat.view(-1, 8)
        if not tracing:
            return (rows @ _table(flat.dtype, flat.device, "weights")).to(torch.uint8)
        # Inductor's CPU code vectorizes a float multiply-sum over each 8
        # but not a uint8 shift-sum: 0.7 against 77 ms for 4M spikes
        return (rows * _make_table("weights", flat.device)).sum(-1).to(torch.uint8)
    ones = (flat != 0).to(torch.uint8)
    if n % 8:
        ones = torch.nn.functional.pad(ones, (0, 8 - n % 8))
    return (ones.view(-1, 8) << _shifts(flat.device)).sum(-1, dtype=torch.uint8)


def _unpack_bits(packed: torch.Tensor, n, dtype: torch.dtype) -> torch.Tensor:
    """Eagerly three launches: the byte as an index; each byte's 8 flags,
    one 8-byte word, taken from a table of the 256 patterns; the flags cast
    to the dtype: 10-20x faster on the GPU than gathering 8-element rows
    of the dtype (docs/design-notes.md). In a compiled graph, shifts and a
    mask on the GPU, a gather of rows on the CPU."""
    if not _tracing():
        words = _table(torch.int64, packed.device, "words")
        return words.take(packed.long()).view(torch.uint8)[:n].to(dtype)
    if packed.device.type == "cpu":
        # a gather of the patterns' rows, which Inductor's CPU code runs
        # 4x faster than shifts and a mask
        table = _make_table("patterns", packed.device).to(dtype)
        return table[packed.long()].reshape(-1)[:n]
    return ((packed.unsqueeze(-1) >> _shifts(packed.device)) & 1).reshape(-1)[:n].to(dtype)


_TABLES: dict = {}


def _make_table(kind: str, device) -> torch.Tensor:
    """'weights': [8] of 2^k (float32); 'patterns': [256, 8], row b the bits
    of b (int64); 'words': [256], word b the 8 bytes of pattern b (int64).
    Made by ops, so that a traced caller records them."""
    k = torch.arange(8, device=device)
    if kind == "weights":
        return 2.0 ** k
    patterns = (torch.arange(256, device=device).unsqueeze(-1) >> k) & 1
    if kind == "words":
        return patterns.to(torch.uint8).view(torch.int64).reshape(256)
    return patterns


def _table(dtype, device, kind: str) -> torch.Tensor:
    """_make_table's table in `dtype` on `device`, made once (eager calls)."""
    key = (dtype, device, kind)
    t = _TABLES.get(key)
    if t is None:
        t = _TABLES[key] = _make_table(kind, device).to(dtype)
    return t


def _tracing() -> bool:
    return torch.compiler.is_compiling() or _saved_node() is not None


def _shifts(device) -> torch.Tensor:
    return torch.arange(8, dtype=torch.uint8, device=device)  # a graph constant


def _pack_data(t: torch.Tensor, bits: bool, order) -> torch.Tensor:
    flat = _in_memory_order(t.detach(), order).reshape(-1)
    return _pack_bits(flat) if bits else flat.to(torch.uint8)  # 0 and 1 exactly


def _unpack_data(data: torch.Tensor, bits: bool, shape, dtype, order) -> torch.Tensor:
    n = 1
    for d in shape:
        n = n * d
    flat = _unpack_bits(data, n, dtype) if bits else data.to(dtype)
    return _restore(flat, shape, order)


def _pack(t: torch.Tensor, bits: bool) -> _Packed:
    order = _memory_order(t)
    return _Packed(_pack_data(t, bits, order), t.shape, t.dtype, bits, order)


def _unpack(p) -> torch.Tensor:
    if not isinstance(p, _Packed):
        return p
    return _unpack_data(p.data, p.bits, p.shape, p.dtype, p.order)


# -- inside a torch.compile'd graph ----------------------------------------
#
# AOTAutograd inlines saved-tensor hooks that are fx GraphModules into the
# compiled graphs: the pack hook into the forward's end, the unpack hook
# into the backward's start, each traced once per saved intermediate with
# that value's node at hand. A saved value that is a compiled core's spike
# output (the node a `getitem` of its forward operator's result, through
# views and copies that keep 0 and 1) packs there, as the graph's own ops;
# in eager autograd the same hooks run the functions above.

try:
    from torch._functorch._aot_autograd.graph_compile import \
        _get_saved_tensor_hook_context as _aot_hook_context
except ImportError:  # a PyTorch without inlined hooks: eager packing only
    _aot_hook_context = None

# training binding -> {"forward": result indices, "train": result indices}
# of its spike outputs (the two operators order their results differently)
_spike_results: dict = {}


def note_spike_results(ident: int, forward: list, train: list) -> None:
    if forward:
        _spike_results[ident] = {"forward": set(forward), "train": set(train)}


def forget_spike_results(ident) -> None:
    """A released binding's entry (its number may be given out again)."""
    _spike_results.pop(ident, None)


def _saved_node():
    if _aot_hook_context is None:
        return None
    state = _aot_hook_context()
    return None if state is None else state.get("_node")


def _keeps_values(node) -> bool:
    """Ops whose result holds its operand's values (so 0 and 1 stay)."""
    name = getattr(node.target, "__name__", str(node.target))
    return node.op == "call_function" and name.split(".")[0] in (
        "view", "_unsafe_view", "reshape", "alias", "permute", "transpose", "t",
        "unsqueeze", "squeeze", "expand", "slice", "select", "clone", "contiguous",
        "_to_copy", "flatten", "unflatten", "as_strided", "detach", "_reshape_alias")


def _is_spike_node(node) -> bool:
    while node is not None and node.op == "call_function" and \
            node.target is not operator.getitem:
        if not _keeps_values(node) or not node.args or \
                not isinstance(node.args[0], torch.fx.Node):
            return False
        node = node.args[0]
    if node is None or node.op != "call_function" or len(node.args) < 2:
        return False
    op, index = node.args[0], node.args[1]
    if not isinstance(op, torch.fx.Node) or op.op != "call_function" or not op.args:
        return False
    name = str(op.target)
    kind = "forward" if name.startswith("flexsn_native.forward") else \
        "train" if name.startswith("flexsn_native.train") else None
    ident = op.args[0]
    return kind is not None and isinstance(ident, int) and \
        index in _spike_results.get(ident, {}).get(kind, ())


def _graph_spike(node):
    """The saved value's (shape, dtype, memory order) when the node being
    packed in a compiled graph is a spike output, else None."""
    if node is None or not _is_spike_node(node):
        return None
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not val.is_floating_point():
        return None
    order = _memory_order(val)
    if not val.is_contiguous() and order is None:
        return None
    return val.shape, val.dtype, order


def _hook_pack(t, bits: bool):
    node = _saved_node()
    if node is not None:  # traced into a compiled forward
        spike = _graph_spike(node)
        return t if spike is None else _pack_data(t, bits, spike[2])
    if _noted and _is_noted(t):
        return _pack(t, bits)
    return t


def _hook_unpack(p, bits: bool):
    node = _saved_node()
    if node is not None:  # traced into a compiled backward
        spike = _graph_spike(node)
        return p if spike is None else _unpack_data(p, bits, *spike)
    return _unpack(p)


def _flexsn_pack_bits(t):
    return _hook_pack(t, True)


def _flexsn_pack_bytes(t):
    return _hook_pack(t, False)


def _flexsn_unpack_bits(p):
    return _hook_unpack(p, True)


def _flexsn_unpack_bytes(p):
    return _hook_unpack(p, False)


for _name in ("_flexsn_pack_bits", "_flexsn_pack_bytes", "_flexsn_unpack_bits",
              "_flexsn_unpack_bytes"):
    torch.fx.wrap(_name)


class _Hook(torch.fx.GraphModule):
    """A hook as a GraphModule (what AOTAutograd inlines) whose call in
    eager autograd goes straight to its function: a module call per saved
    tensor would add host time to every step."""

    def __init__(self, fn):
        super().__init__(torch.nn.Module(), torch.fx.symbolic_trace(fn).graph)
        # GraphModule makes a class per instance and sets its __call__
        type(self).__call__ = staticmethod(lambda x: fn(x))


def _pack_hook_fn_bits(t):
    return _flexsn_pack_bits(t)


def _pack_hook_fn_bytes(t):
    return _flexsn_pack_bytes(t)


def _unpack_hook_fn_bits(p):
    return _flexsn_unpack_bits(p)


def _unpack_hook_fn_bytes(p):
    return _flexsn_unpack_bytes(p)


_HOOKS: dict = {}


def _hooks(bits: bool):
    """The (pack, unpack) pair, made once: torch.compile guards on the
    hooks' identity, so one pair per mode keeps its compiled graphs."""
    pair = _HOOKS.get(bits)
    if pair is None:
        pair = _HOOKS[bits] = (
            _Hook(_pack_hook_fn_bits if bits else _pack_hook_fn_bytes),
            _Hook(_unpack_hook_fn_bits if bits else _unpack_hook_fn_bytes))
    return pair


@contextlib.contextmanager
def compact_spikes(bits: bool = True):
    """Within this context, spike tensors that autograd saves for the
    backward are kept as 1 bit (``bits=True``) or 1 byte per element
    (see the module's description). Exact: losses and gradients are those
    of the same step without it. The backward may run inside or after the
    context.

    Applies to eager autograd (a noted spike output that a later layer
    saves) and inside ``torch.compile``'d graphs, where the hooks are
    inlined and pack the saved values that are spike outputs of a core's
    forward operator (see below)."""
    global _depth
    with _lock:
        _depth += 1
    try:
        with torch.autograd.graph.saved_tensors_hooks(*_hooks(bits)):
            yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _noted.clear()
