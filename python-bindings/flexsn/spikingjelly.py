"""SpikingJelly models onto our kernels: :func:`convert` replaces every
SpikingJelly 2.0 neuron module of a model by a compiled equivalent.

The equivalent is derived from the node itself, not from a table of
hand-written cores: the node's single step (``single_step_functional_forward
(inputs, states)``, or ``neuronal_charge`` / ``neuronal_fire`` /
``neuronal_reset`` on its memories for the SimpleBaseNode family) is traced
with its registered memories (``v`` and any extra state) as the scan's states
and its parameters and buffers as kernel parameters, so a user's own
``BaseNode`` subclass converts with no extra code. The converted module is
an instance of a subclass of the node's class sharing the node's parameters
and buffers: names, ``state_dict`` keys, memories (``v``, ``v_seq``),
``reset()``, ``step_mode`` and SpikingJelly's ``functional`` helpers are the
node's own; only ``single_step_forward`` and ``multi_step_forward`` run our
kernels.

Python configuration the step reads (every number, bool, string and None
attribute of the node and of its submodules, the surrogate function's
included) is read at every call; a change compiles the step again.

A node is left as it is, with a :class:`flexsn.FallbackWarning` naming its
class and why (or an error with ``strict=True``), when it is not a per-neuron
scan (the PSN family is parallel over T; Noisy* draw random numbers; ILC*,
MPBN* and anything else that mixes neurons), when a parameter is not a
scalar, when its step uses an op the compiler lacks (named, with its source
line), or when the compiled step disagrees with the node's own on a
self-check at conversion.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field
from typing import Optional

import torch
from torch import nn

from ._adapters import Scan, share_as
from ._errors import FallbackWarning, UnsupportedOpError

__all__ = ["convert", "ConversionReport"]

# Classes that are not a per-neuron scan, by name (their reason); a user's
# subclass of one of them is left for the same reason.
_NOT_A_SCAN = {
    "PSN": "parallel over T (a weighted sum of all steps), not a recurrence",
    "MaskedPSN": "mixes steps through a learned T x T mask, not a recurrence",
    "SlidingPSN": "mixes k past steps through learned weights, not a recurrence",
    "NoisyBaseNode": "draws random numbers at every step",
    "NoisyNonSpikingBaseNode": "draws random numbers at every step",
    "ILCBaseNode": "connects the neurons of a layer to each other",
    "MPBNBaseNode": "normalizes the membrane over the batch (mixes neurons)",
    "FewSpikeNode": "codes each value over a fixed table of steps (not a recurrence)",
    "DSRIFNode": "computes spike rates over all T (not a recurrence)",
    "DSRLIFNode": "computes spike rates over all T (not a recurrence)",
    "GatedLIFNode": "its gates are per time step and per channel (T-indexed parameters)",
    "NonSpikingBaseNode": "decodes the membrane over all T (max / mean over time)",
    "OTTTLIFNode": "records traces for its own online learning rule",
    "FlexSN": "already a compiled FlexSN: build flexsn.FlexSN from its core instead",
}

# SpikingJelly's abstract bases (exactly these classes; their subclasses
# state a step and convert).
_ABSTRACT = {"BaseNode", "SimpleBaseNode", "AdaptBaseNode"}

_SCALARS = (bool, int, float, str, type(None))

try:  # the materialize_states that only fill a float memory
    from spikingjelly.activation_based import base as _sj_base
    from spikingjelly.activation_based.neuron import base_node as _sj_base_node
    _PLAIN_MATERIALIZE = (_sj_base.MemoryModule.materialize_states,
                          _sj_base_node.BaseNode.materialize_states)
except ImportError:  # convert() says so when it is called
    _PLAIN_MATERIALIZE = ()


class _NodeCore:
    """A node's single step as a core ``(x, *states, *params) -> (*outputs,
    *new_states)``; the params stand in for the node's parameters and
    buffers (by name) while the step runs."""

    def __init__(self, node: nn.Module, names: tuple, legacy: bool):
        self.node, self.names, self.legacy = node, names, legacy

    def __call__(self, x, *rest):
        node = self.node
        memories = node._memories
        ns = len(memories)
        states, params = rest[:ns], rest[ns:]
        with torch.nn.utils.stateless._reparametrize_module(node, dict(zip(self.names, params))):
            if not self.legacy:
                outputs, new = node.single_step_functional_forward((x,), tuple(states))
                return (*outputs, *new)
            saved = dict(memories)
            try:
                memories.update(zip(memories, states))
                node.neuronal_charge(x)
                spike = node.neuronal_fire()
                node.neuronal_reset(spike)
                return (spike, *memories.values())
            finally:
                memories.clear()
                memories.update(saved)


class _Bases:
    """SpikingJelly's base classes: 2.0 keeps them in neuron.base_node; the
    older single-module releases (0.0.0.0.14) in neuron, some absent."""

    def __init__(self):
        from spikingjelly.activation_based import base
        try:
            from spikingjelly.activation_based.neuron import base_node as where
        except ImportError:
            from spikingjelly.activation_based import neuron as where
        self.MemoryModule = base.MemoryModule
        self.BaseNode = where.BaseNode
        self.node_bases = tuple(c for c in (getattr(where, n, None) for n in (
            "BaseNode", "SimpleBaseNode", "NonSpikingBaseNode")) if c is not None)


def _sj() -> _Bases:
    return _Bases()


def _kind(node) -> Optional[str]:
    """"functional" (SpikingJelly 2.0's explicit step), "legacy"
    (charge / fire / reset on memories) or None (no single step to read)."""
    sj = _sj()
    if not isinstance(node, sj.MemoryModule):
        return None
    step = getattr(type(node), "single_step_functional_forward", None)
    abstract = {getattr(sj.MemoryModule, "single_step_functional_forward", None),
                getattr(sj.BaseNode, "single_step_functional_forward", None)}
    if step is not None and step not in abstract:
        return "functional"
    if hasattr(node, "neuronal_charge") and hasattr(node, "neuronal_fire"):
        return "legacy"
    return None


def _left_reason(node) -> Optional[str]:
    return _left_reason_of_class(type(node))


def _left_reason_of_class(cls: type) -> Optional[str]:
    """Why a class is left whatever its arguments (None: try it)."""
    if cls.__name__ in _ABSTRACT and cls.__module__.startswith("spikingjelly"):
        return "an abstract base class: its subclasses state the step"
    for k in cls.__mro__:
        if k.__name__ in _NOT_A_SCAN and k.__module__.startswith("spikingjelly"):
            return _NOT_A_SCAN[k.__name__]
    return None


def is_neuron(module) -> bool:
    """A SpikingJelly neuron module (a stateful step module of
    spikingjelly.activation_based.neuron, or a user's subclass)."""
    try:
        sj = _sj()
    except ImportError:
        return False
    if isinstance(module, _Fused):
        return True
    mod = type(module).__module__
    if isinstance(module, sj.node_bases):
        return True
    return mod.startswith("spikingjelly.activation_based.neuron") and \
        isinstance(module, nn.Module)


class _Fused:
    """Mixed in before the node's class: its steps run our kernels."""

    _flexsn_base: type = None

    def _flexsn_param_names(self) -> tuple:
        return self.__dict__["_flexsn_names"]

    def _flexsn_params(self) -> list:
        out = []
        for name in self._flexsn_param_names():
            owner, _, leaf = name.rpartition(".")
            m = self.get_submodule(owner) if owner else self
            t = m._parameters.get(leaf)
            out.append(t if t is not None else m._buffers[leaf])
        return out

    def _flexsn_config(self) -> tuple:
        """Every public scalar attribute of the node and of its submodules:
        what the step reads in Python (a change compiles it again). The
        names are listed once per submodule object, then only read."""
        watch = self.__dict__.get("_flexsn_watch")
        subs = self._modules
        if watch is None or watch[0] != tuple(id(m) for m in subs.values()):
            watch = self.__dict__["_flexsn_watch"] = (
                tuple(id(m) for m in subs.values()), _scalar_names(self),
                tuple((k, _scalar_names(m)) for k, m in subs.items() if m is not None))
        d = self.__dict__
        key = [tuple(d.get(n) for n in watch[1])]
        for name, names in watch[2]:
            sub = subs[name]
            key.append((type(sub), tuple(sub.__dict__.get(n) for n in names)))
        return tuple(key)

    def _flexsn_scan(self) -> Scan:
        if torch.compiler.is_compiling():
            # Dynamo cannot read __dict__ wholesale: inside a compiled graph
            # the configuration is the one of the last eager call
            return self._flexsn_current
        config = self._flexsn_config()
        scans = self.__dict__.setdefault("_flexsn_scans", {})
        scan = scans.get(config)
        if scan is None:
            core = _NodeCore(self, self._flexsn_param_names(),
                             self.__dict__["_flexsn_kind"] == "legacy")
            scan = scans[config] = Scan(core, len(self._memories),
                                        len(self._flexsn_param_names()),
                                        backend=self.__dict__.get("_flexsn_backend"),
                                        strict=True)
        self.__dict__["_flexsn_current"] = scan
        return scan

    def _flexsn_states(self, x_step: torch.Tensor, inputs, mode: str):
        """The initial states as the kernels take them; None when they are
        all zeros the node has not materialized yet (after reset()), which
        the kernels make themselves instead of reading a filled tensor."""
        memories = tuple(self._memories.values())
        fresh = all(type(m) is float for m in memories)
        plain = getattr(type(self), "materialize_states", None)
        if fresh and (plain is None or plain in _PLAIN_MATERIALIZE) and \
                all(m == 0.0 for m in memories):
            return None
        # SpikingJelly's own materialize_states fill fresh (float) memories
        # from the step's shape alone: the filled tensors are kept for the
        # next call of that shape (the kernels never write their inputs)
        materialize = getattr(type(self), "materialize_states", None)
        cache = fresh and (materialize is None or
                           materialize.__module__.startswith("spikingjelly"))
        if cache and not torch.compiler.is_compiling():
            key = (memories, x_step.shape, x_step.stride(), x_step.dtype, x_step.device, mode)
            hit = self.__dict__.get("_flexsn_fresh")
            if hit is not None and hit[0] == key:
                return hit[1]
        if hasattr(self, "materialize_states"):
            states = self.materialize_states(inputs, memories, mode)
        else:  # older SpikingJelly: float memories become tensors in the step
            states = memories
        out = []
        for s in states:
            # laid out as the step (channels-last stays so: see _layout)
            if not isinstance(s, torch.Tensor):
                s = torch.full_like(x_step, float(s))
            elif s.shape != x_step.shape:
                s = s.expand(x_step.shape)
            if s.dtype != x_step.dtype or s.device != x_step.device:
                s = s.to(device=x_step.device, dtype=x_step.dtype)
            if not (s.is_contiguous() or s.stride() == x_step.stride()):
                s = torch.empty_like(x_step).copy_(s)
            out.append(s)
        if cache and not torch.compiler.is_compiling():
            self.__dict__["_flexsn_fresh"] = (key, out)
        return out

    def _flexsn_run(self, x_seq: torch.Tensor, states, want_seqs: bool):
        outs, seqs, finals = self._flexsn_scan().run(x_seq, states, self._flexsn_params(),
                                                     want_seqs=want_seqs)
        for name, value in zip(list(self._memories), finals):
            self._memories[name] = value
        return outs, seqs

    def multi_step_forward(self, x_seq: torch.Tensor, *args, **kwargs):
        if args or kwargs:  # extra inputs: the node's own loop
            return self._flexsn_base.multi_step_forward(self, x_seq, *args, **kwargs)
        if x_seq.dim() < 1:
            raise ValueError(f"{type(self).__name__} in step mode 'm' takes [T, ...], "
                             "got a 0-d tensor")
        x_step = x_seq[0] if x_seq.shape[0] else x_seq.new_empty(x_seq.shape[1:])
        states = self._flexsn_states(x_step, (x_seq,), "m")
        store = bool(getattr(self, "store_v_seq", False))
        outs, seqs = self._flexsn_run(x_seq, states, want_seqs=store)
        if store:
            self.v_seq = seqs[0]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def single_step_forward(self, x: torch.Tensor, *args, **kwargs):
        if args or kwargs:
            return self._flexsn_base.single_step_forward(self, x, *args, **kwargs)
        states = self._flexsn_states(x, (x,), "s")
        outs, _ = self._flexsn_run(x.unsqueeze(0), states, want_seqs=False)
        if getattr(self, "store_v_seq", False) and hasattr(self, "_append_v_seq"):
            v = self._v_seq_source()
            if isinstance(v, torch.Tensor):
                self._append_v_seq(v)
        outs = [o[0] for o in outs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def detach(self):
        """Cuts the memories from the graph (out of place: a kernel's final
        state may be a view of its state sequence, which detach_ refuses)."""
        for key, value in self._memories.items():
            if isinstance(value, torch.Tensor):
                self._memories[key] = value.detach()
        if isinstance(getattr(self, "v_seq", None), torch.Tensor):
            self.v_seq = self.v_seq.detach()

    # -- copies and pickles: rebuilt from the node's class ------------------
    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_flexsn_scans", None)  # kernels of this process
        state.pop("_flexsn_current", None)
        state.pop("_flexsn_watch", None)  # ids of this process's objects
        state.pop("_flexsn_fresh", None)
        # copies carry the memories detached (mid-training they are non-leaf
        # tensors, which deepcopy refuses)
        state["_memories"] = {k: v.detach() if isinstance(v, torch.Tensor) else v
                              for k, v in state["_memories"].items()}
        if isinstance(state.get("v_seq"), torch.Tensor):
            state["v_seq"] = state["v_seq"].detach()
        return state

    def __setstate__(self, state):
        nn.Module.__setstate__(self, state)
        self._flexsn_scan()  # traced again now, not inside a compiled graph

    def __reduce_ex__(self, protocol):
        return (_restore, (self._flexsn_base,), self.__getstate__())


def _scalar_names(module: nn.Module) -> tuple:
    return tuple(k for k, v in module.__dict__.items()
                 if isinstance(v, _SCALARS) and not k.startswith("_") and k != "training")


def _restore(base: type):
    cls = _fused_class(base)
    return cls.__new__(cls)


_FUSED: dict = {}


def _fused_class(base: type) -> type:
    cls = _FUSED.get(base)
    if cls is None:
        cls = _FUSED[base] = type(base.__name__, (_Fused, base), {
            "__module__": base.__module__, "__qualname__": base.__qualname__,
            "_flexsn_base": base,
            "__doc__": f"{base.__name__} whose steps run flexsn's compiled kernels "
                       "(flexsn.convert)."})
    return cls


def _fuse(node: nn.Module, kind: str, backend: Optional[str]) -> nn.Module:
    base = type(node)
    cls = _fused_class(base)
    fused = share_as(node, cls)
    names = tuple(n for n, _ in node.named_parameters()) + \
        tuple(n for n, _ in node.named_buffers())
    fused.__dict__.update(_flexsn_names=names, _flexsn_kind=kind, _flexsn_backend=backend)
    return fused


def _check_params(node) -> Optional[str]:
    for name, t in list(node.named_parameters()) + list(node.named_buffers()):
        if t.numel() != 1:
            return (f"its parameter {name!r} has shape {tuple(t.shape)}: flexsn converts "
                    "nodes whose parameters are scalars (a per-channel parameter would "
                    "need the input's layout)")
        if not t.is_floating_point():
            return f"its buffer {name!r} has dtype {t.dtype}"
    return None


def _self_check(node: nn.Module, fused: nn.Module) -> Optional[str]:
    """Runs the node's own single step T times and the fused multi-step
    forward on a small random input (CPU, float64): None when they agree,
    else why not. The single step is the reference: it is what is traced
    (and a node whose multi-step path computes something else, as
    SpikingJelly 2.0.0's LIAFNode does, follows its single step)."""
    gen = torch.Generator().manual_seed(0)
    scale = abs(float(getattr(node, "v_threshold", 1.0) or 1.0))
    x = (torch.randn(6, 2, 3, generator=gen, dtype=torch.float64) * 0.8 + 0.6) * scale
    ref = copy.deepcopy(node).to(device="cpu", dtype=torch.float64)
    ours = copy.deepcopy(fused).to(device="cpu", dtype=torch.float64)
    ours.__dict__.pop("_flexsn_scans", None)
    ref.step_mode, ours.step_mode = "s", "m"
    ref.reset()
    ours.reset()
    try:
        steps = [ref(x[t]) for t in range(x.shape[0])]
    except Exception as e:  # noqa: BLE001 (the node's own failure)
        return f"its own single step fails on a [2, 3] input ({type(e).__name__}: {e})"
    got = ours(x)
    got = got if isinstance(got, tuple) else (got,)
    want = tuple(torch.stack([s[k] if isinstance(s, tuple) else s for s in steps])
                 for k in range(len(got)))
    pairs = list(zip(want, got)) + [
        (a, b) for a, b in zip(ref._memories.values(), ours._memories.values())
        if isinstance(a, torch.Tensor)]
    for a, b in pairs:
        if a.shape != b.shape or not torch.allclose(a, b.to(a.dtype), rtol=1e-6, atol=1e-9):
            return "its compiled step disagrees with its own single step on a self-check"
    return None


@dataclass
class ConversionReport:
    """What :func:`convert` did: one row per neuron module (its name, class,
    and "converted" or the reason it was left)."""
    rows: list = field(default_factory=list)

    @property
    def converted(self) -> list:
        return [r for r in self.rows if r[2] == "converted"]

    @property
    def left(self) -> list:
        return [r for r in self.rows if r[2] not in ("converted", "already converted")]

    def __str__(self) -> str:
        if not self.rows:
            return "flexsn.convert: no SpikingJelly neuron found"
        width = max(len(r[0]) for r in self.rows)
        lines = [f"flexsn.convert: {len(self.converted)} converted, {len(self.left)} left"]
        lines += [f"  {name:<{width}}  {cls}: {what}" for name, cls, what in self.rows]
        return "\n".join(lines)


def _convert_node(node, strict: bool, backend: Optional[str], check: bool):
    """(the replacement or None, what happened)."""
    if isinstance(node, _Fused):
        return None, "already converted"
    reason = _left_reason(node)
    kind = _kind(node) if reason is None else None
    if reason is None and kind is None:
        reason = "it states no single step (single_step_functional_forward or " \
                 "neuronal_charge / neuronal_fire / neuronal_reset)"
    if reason is None:
        reason = _check_params(node)
    fused = None
    if reason is None:
        fused = _fuse(node, kind, backend)
        try:
            fused._flexsn_scan()
        except UnsupportedOpError as e:
            reason = f"its step uses an op flexsn cannot compile: {e}"
        except Exception as e:  # noqa: BLE001 (any trace failure leaves the node)
            reason = f"its step could not be traced ({type(e).__name__}: {e})"
    if reason is None and check:
        reason = _self_check(node, fused)
    if reason is None:
        return fused, "converted"
    if strict:
        raise UnsupportedOpError(f"{type(node).__name__} cannot be converted: {reason}")
    warnings.warn(f"flexsn.convert leaves {type(node).__name__} as it is: {reason}",
                  FallbackWarning, stacklevel=4)
    return None, reason


def convert(module: nn.Module, *, strict: bool = False, inplace: bool = False,
            backend: Optional[str] = None, check: bool = True,
            report: bool = False):
    """`module` with every SpikingJelly neuron replaced by its compiled
    equivalent (see the module docstring). inplace=False converts a deep
    copy. strict=True raises for a neuron that cannot be converted instead
    of leaving it with a FallbackWarning. backend: None (compiled kernels
    on the input's device) or "torch" (the traced step in a Python loop).
    check: compare each converted class's compiled step with its own on a
    small input first. report=True returns ``(model, ConversionReport)``."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"convert takes an nn.Module, got {type(module).__name__}")
    try:
        _sj()
    except ImportError as e:
        raise ImportError("flexsn.convert converts SpikingJelly modules; SpikingJelly is "
                          f"not importable here ({e})") from None
    model = module if inplace else copy.deepcopy(module)
    result = ConversionReport()
    if is_neuron(model):
        fused, what = _convert_node(model, strict, backend, check)
        result.rows.append(("(model)", type(model).__name__, what))
        model = fused or model
    else:
        for name, child in list(model.named_modules()):
            if not name or not is_neuron(child):
                continue
            if any(name.startswith(done + ".") for done, _, _ in result.rows):
                continue  # inside a neuron already handled
            fused, what = _convert_node(child, strict, backend, check)
            result.rows.append((name, type(child).__name__, what))
            if fused is not None:
                parent_name, _, leaf = name.rpartition(".")
                parent = model.get_submodule(parent_name) if parent_name else model
                setattr(parent, leaf, fused)
    if not result.rows:
        warnings.warn(f"flexsn.convert found no SpikingJelly neuron in "
                      f"{type(module).__name__}", UserWarning, stacklevel=2)
    try:
        from spikingjelly.activation_based.functional import net_config
        net_config.invalidate_reset_cache(model)
    except Exception:  # noqa: BLE001 (an older SpikingJelly has no cache)
        pass
    return (model, result) if report else model
