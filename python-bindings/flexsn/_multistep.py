"""flexsn.multistep: a module written one time step at a time, run over
whole sequences.

``flexsn.multistep(step)`` returns a module whose ``forward`` takes
``[T, ...]`` inputs and returns what T calls of ``step`` on ``x[t]``
return, stacked over T, with the neurons' final states where those calls
leave them. It traces the step once (torch.fx, neurons as leaves), then
runs every stateless operation once over all T steps and every neuron as
one fused scan:

* modules known to treat each sample alone (Linear, convolutions, pooling,
  Flatten from dim 1, ...) and elementwise operators run on the steps
  folded into the batch; any other operation runs under ``torch.vmap``
  over time, which computes it exactly as a step would;
* BatchNorm in training mode normalises each step by its own statistics
  and updates the running statistics as T steps would (or, with
  ``batch_norm="folded"``, by the statistics of all T steps together,
  SpikingJelly's multi-step convention);
* neurons: snnTorch's (their class is switched in place to flexsn's
  subclass, which computes the same step), Norse's cells, SpikingJelly's
  and flexsn's modules in step mode ``"s"`` (run in step mode ``"m"``,
  which those libraries define as the loop over steps).

A value carried from step to step must be a neuron's state: stored inside
the neuron (snnTorch, SpikingJelly, flexsn), or passed in and out through a
module attribute (``spk, self.mem = self.lif(x, self.mem)``), or Norse's
``state`` argument of a ``SequentialState`` or a cell. A step this cannot
reorder exactly (data-dependent Python control flow, an attribute written
that is not a neuron's state, a neuron called twice, a neuron without a
fused form) runs step by step instead, correct, with one
:class:`StepByStepWarning` naming what prevented it.
"""

from __future__ import annotations

import operator
import sys
import warnings
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from ._errors import StepByStepWarning

__all__ = ["multistep", "MultiStep"]

BATCH_NORM = ("per_step", "folded")


class _Seq:
    """A value of every step: ``data`` is ``[T, *one step]``."""
    __slots__ = ("data",)

    def __init__(self, data: torch.Tensor):
        self.data = data


class _SeqState:
    """A Norse state of every step: the stacked tuple and the final one."""
    __slots__ = ("seqs", "final")

    def __init__(self, seqs, final):
        self.seqs, self.final = seqs, final


class _Final:
    """A neuron's state after the last step, where the step only stores it
    in an attribute: the scan then writes no state sequence."""
    __slots__ = ("value",)

    def __init__(self, value: torch.Tensor):
        self.value = value


class _Ref:
    """An earlier value of the step's graph, by position."""
    __slots__ = ("i",)

    def __init__(self, i: int):
        self.i = i


class _NotReorderable(Exception):
    """Why a step runs step by step."""


# --------------------------------------------------------------------------
# What a module is
# --------------------------------------------------------------------------

def _snntorch():
    if "snntorch" not in sys.modules:
        return None
    from . import snntorch as fs
    return fs


def _norse():
    if "norse" not in sys.modules:
        return None
    from . import norse as fn
    return fn


def _sj_base():
    if "spikingjelly" not in sys.modules:
        return None
    try:
        from spikingjelly.activation_based import base
    except ImportError:
        return None
    return base


def _kind(m: nn.Module) -> Optional[str]:
    """"snntorch", "norse", "stepmode" (a module keeping states that has
    SpikingJelly's step modes), "layer" (a stateless SpikingJelly layer,
    traced as a leaf) or None (anything else)."""
    fs = _snntorch()
    if fs is not None and isinstance(m, fs._SpikingNeuron):
        return "snntorch"
    fn = _norse()
    if fn is not None and (isinstance(m, fn.NorseNeuron) or isinstance(m, fn._CELLS)):
        return "norse"
    if fn is not None and type(m).__module__.startswith("norse.") and _has_state_arg(m):
        return "norse"
    from ._module import FlexSN
    from .neuron import _BaseNode
    base = _sj_base()
    if isinstance(m, (FlexSN, _BaseNode)) or (base is not None and
                                               isinstance(m, base.MemoryModule)):
        return "stepmode"
    if base is not None and isinstance(m, base.StepModule):
        return "layer"
    return None


def _norse_step(m: nn.Module) -> bool:
    """Whether `m` is a Norse module whose call is one step with a fused
    form: a cell, or our wrapper of one."""
    fn = _norse()
    return fn is not None and (isinstance(m, fn._CELLS) or
                               (isinstance(m, fn.NorseNeuron) and m.single_step))


def _has_state_arg(m: nn.Module) -> bool:
    import inspect
    try:
        return "state" in inspect.signature(m.forward).parameters
    except (TypeError, ValueError):
        return False


def _prepare_snntorch(m: nn.Module) -> Optional[str]:
    """Switch an snnTorch neuron to flexsn's subclass of its class (the same
    step, plus forward_sequence); the reason when it has no fused form."""
    fs = _snntorch()
    if isinstance(m, fs._Fused):
        try:
            m._flexsn_current_scan()
        except (ValueError, TypeError) as e:
            return str(e)
        return None
    try:
        base = fs._spec_base(type(m))
    except (ValueError, TypeError) as e:
        return str(e)
    old = m.__class__
    m.__class__ = fs._FUSED[base]
    try:
        m._flexsn_current_scan()
    except (ValueError, TypeError) as e:
        m.__class__ = old
        return str(e)
    return None


# --------------------------------------------------------------------------
# Stateless operations over all steps
# --------------------------------------------------------------------------

# Modules that compute each sample alone: the steps fold into the batch.
_FOLD_MODULES = (
    nn.Linear, nn.Bilinear, nn.Identity,
    nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
    nn.ConvTranspose3d,
    nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d,
    nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d,
    nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d, nn.LPPool1d,
    nn.LPPool2d, nn.Upsample, nn.ZeroPad2d, nn.ConstantPad2d,
    nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout,
    nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.PReLU, nn.ELU, nn.SELU, nn.CELU, nn.GELU, nn.SiLU,
    nn.Sigmoid, nn.Tanh, nn.Hardtanh, nn.Hardsigmoid, nn.Hardswish, nn.Softplus, nn.Mish,
    nn.LayerNorm, nn.GroupNorm, nn.Embedding,
)

# Elementwise functions and methods: applied to [T, ...] as they are when no
# other tensor has more dimensions than one step (broadcasting then aligns
# the same way).
_ELEMENTWISE = {
    operator.add, operator.sub, operator.mul, operator.truediv, operator.neg,
    operator.pow, operator.gt, operator.lt, operator.ge, operator.le,
    torch.add, torch.sub, torch.mul, torch.div, torch.neg, torch.exp, torch.log,
    torch.sigmoid, torch.tanh, torch.relu, torch.clamp, torch.abs, torch.sqrt,
    torch.heaviside, torch.where, F.relu, F.leaky_relu, F.gelu, F.silu, F.elu,
}
_ELEMENTWISE_METHODS = {
    "add", "sub", "mul", "div", "neg", "exp", "log", "sigmoid", "tanh", "relu", "clamp",
    "abs", "sqrt", "float", "half", "bfloat16", "to", "type_as", "detach", "clone",
    "contiguous", "__add__", "__sub__", "__mul__", "__truediv__", "__radd__", "__rmul__",
}
# Methods and attributes that describe one step's tensor.
_STEP_QUERIES = {"size", "dim", "ndimension", "numel", "nelement"}
_STEP_ATTRS = {"shape", "ndim", "dtype", "device", "is_cuda", "requires_grad"}


def _fold(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
    y = m(x.flatten(0, 1))
    return y.unflatten(0, x.shape[:2])


def _foldable_module(m: nn.Module, x: torch.Tensor) -> bool:
    """Whether m computes each sample of x [T, B, ...] folded to [T*B, ...]
    as it would each step."""
    if x.dim() < 2:
        return False
    if isinstance(m, _FOLD_MODULES):
        return True
    if isinstance(m, nn.Flatten):
        return m.start_dim >= 1 or (m.start_dim < 0 and m.start_dim + x.dim() >= 2)
    if isinstance(m, nn.Unflatten):
        return isinstance(m.dim, int) and (m.dim >= 1 or m.dim < 0)
    if isinstance(m, (nn.Softmax, nn.LogSoftmax)):
        return m.dim is not None and m.dim != 0 and m.dim >= -(x.dim() - 1)
    if isinstance(m, nn.modules.batchnorm._BatchNorm):
        return not (m.training or not m.track_running_stats)
    return False


def _elementwise(args, kwargs) -> bool:
    flat = tree_flatten((args, kwargs))[0]
    seqs = [a.data.dim() - 1 for a in flat if isinstance(a, _Seq)]
    if len(set(seqs)) != 1:
        return False
    step_dim = seqs[0]
    return all(a.dim() <= step_dim for a in flat if isinstance(a, torch.Tensor))


def _over_steps(fn, args, kwargs):
    """fn applied to every step: the values that are _Seq vary over T."""
    flat, spec = tree_flatten((args, kwargs))
    where = [i for i, a in enumerate(flat) if isinstance(a, _Seq)]
    if not where:
        return fn(*args, **kwargs)

    def step(*datas):
        vals = list(flat)
        for i, d in zip(where, datas):
            vals[i] = d
        a, k = tree_unflatten(vals, spec)
        return fn(*a, **k)

    out = torch.vmap(step, randomness="different")(*(flat[i].data for i in where))
    return tree_map(lambda t: _Seq(t) if isinstance(t, torch.Tensor) else t, out)


def _unwrap(args, kwargs):
    un = lambda a: a.data if isinstance(a, _Seq) else a  # noqa: E731
    return tree_map(un, args), tree_map(un, kwargs)


def _batch_norm_per_step(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """BatchNorm of x [T, B, C, ...] with each step's own statistics, and the
    running statistics updated as T training steps update them."""
    T, B, C = x.shape[:3]
    if m.training and m.track_running_stats and m.num_batches_tracked is not None:
        with torch.no_grad():
            dims = [1] + list(range(3, x.dim()))
            n = x.numel() // (T * C)
            mean = x.mean(dim=dims)
            var = x.var(dim=dims, correction=1 if n > 1 else 0)
            for t in range(T):
                m.num_batches_tracked.add_(1)
                f = m.momentum if m.momentum is not None else \
                    1.0 / float(m.num_batches_tracked)
                m.running_mean.mul_(1 - f).add_(mean[t].to(m.running_mean.dtype), alpha=f)
                m.running_var.mul_(1 - f).add_(var[t].to(m.running_var.dtype), alpha=f)
    # [T, B, C, ...] -> [B, T*C, ...]: channel (t, c) is normalised over its
    # step's batch and positions alone.
    y = x.transpose(0, 1).reshape(B, T * C, *x.shape[3:])
    w = None if m.weight is None else m.weight.repeat(T)
    b = None if m.bias is None else m.bias.repeat(T)
    y = F.batch_norm(y, None, None, w, b, True, 0.0, m.eps)
    return y.reshape(B, T, C, *x.shape[3:]).transpose(0, 1)


# --------------------------------------------------------------------------
# Tracing the step
# --------------------------------------------------------------------------

class _Tracer(fx.Tracer):
    def __init__(self, leaves: set):
        super().__init__()
        self._leaves = leaves

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return id(m) in self._leaves or super().is_leaf_module(m, qualname)


def _carried_value(v) -> bool:
    """An attribute value a step may carry to the next: a tensor, None, or
    a tuple of tensors (Norse's states)."""
    if v is None or isinstance(v, torch.Tensor):
        return True
    return isinstance(v, tuple) and len(v) > 0 and \
        all(isinstance(e, torch.Tensor) or isinstance(e, (int, float)) for e in v)


def _root(step: nn.Module, n_inputs: int, slots: list) -> nn.Module:
    """A module whose forward(a0.., s0..) sets the slot attributes to s.. and
    calls step(a0, ...): the attributes' reads become placeholders."""
    names = [f"a{i}" for i in range(n_inputs)]
    snames = [f"s{i}" for i in range(len(slots))]
    src = (f"def forward(self, {', '.join(names + snames)}):\n"
           + "".join(f"    _set({i}, {s})\n" for i, s in enumerate(snames))
           + f"    return self.step({', '.join(names)})\n")

    def _set(i, v):
        m, name = slots[i]
        m.__dict__[name] = v

    scope = {"_set": _set}
    exec(src, scope)  # noqa: S102 - the source is built above from indices
    cls = type("_StepRoot", (nn.Module,), {"forward": scope["forward"]})
    root = cls()
    root.step = step
    return root


class _Program:
    """The traced step and what runs it over sequences, or the reason it
    runs step by step."""

    def __init__(self, step: nn.Module, n_inputs: int, neurons: dict):
        self.reason: Optional[str] = None
        self.neurons = neurons
        try:
            self._trace(step, n_inputs)
            self._check()
            self._build_plan()
        except _NotReorderable as e:
            self.reason = str(e)

    def _trace(self, step, n_inputs):
        modules = list(step.modules())
        leaves = {id(m) for m in modules if _kind(m) is not None}
        traced = [m for m in modules if id(m) not in leaves]
        inside = set()
        for m in modules:
            if id(m) in leaves:
                inside.update(id(s) for s in m.modules() if s is not m)
        traced = [m for m in traced if id(m) not in inside]
        self.slots = [(m, k) for m in traced for k, v in list(m.__dict__.items())
                      if not k.startswith("_") and k != "training" and _carried_value(v)]
        before = [dict(m.__dict__) for m in traced]
        root = _root(step, n_inputs, self.slots)
        try:
            graph = _Tracer(leaves).trace(root)
        except Exception as e:  # noqa: BLE001 - any failure to trace: step by step
            raise _NotReorderable(
                f"the step cannot be traced ({type(e).__name__}: {e}); Python control "
                "flow on tensor values, or on anything that changes from step to step, "
                "needs the step-by-step loop") from None
        finally:
            after = [dict(m.__dict__) for m in traced]
            for m, b in zip(traced, before):
                m.__dict__.clear()
                m.__dict__.update(b)
        self.gm = fx.GraphModule(root, graph)
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        self.inputs, self.slot_nodes = placeholders[:n_inputs], placeholders[n_inputs:]
        self.slot_of = {node: i for i, node in enumerate(self.slot_nodes)}
        self.writes = {}  # slot index -> the node whose value it is given
        for m, b, a in zip(traced, before, after):
            for k in set(a) | set(b):
                if k in b and k in a and a[k] is b[k]:
                    continue
                written = a.get(k)
                i = next((j for j, (sm, sk) in enumerate(self.slots)
                          if sm is m and sk == k), None)
                if i is not None and isinstance(written, fx.Proxy):
                    if written.node is self.slot_nodes[i]:
                        continue  # read, not written
                    self.writes[i] = written.node
                    continue
                if i is not None and written is self.slot_nodes[i]:
                    continue
                raise _NotReorderable(
                    f"the step writes {type(m).__name__}.{k}, a value carried from step "
                    "to step outside any known neuron")

    def _check(self):
        graph = self.gm.graph
        called = {}
        for node in graph.nodes:
            if node.op == "call_module":
                m = self.gm.get_submodule(node.target)
                kind = _kind(m)
                if kind in ("snntorch", "norse", "stepmode"):
                    if node.target in called:
                        raise _NotReorderable(f"neuron {node.target[5:]} is called twice "
                                              "in one step")
                    called[node.target] = node
                    self._check_neuron(node, m, kind)
            elif node.op == "call_method" and node.target.endswith("_") and \
                    not node.target.startswith("__") and node.args and \
                    not self._varies(node.args[0]):
                raise _NotReorderable(
                    f"the step writes a tensor in place ({node.target} at {node.name}): "
                    "a value carried from step to step outside any known neuron")
        for i, node in self.writes.items():
            if not self._is_state_of(node, i):
                m, k = self.slots[i]
                raise _NotReorderable(
                    f"the step writes {type(m).__name__}.{k} from a value that is not "
                    f"the next state of the neuron that read it")

    def _varies(self, arg) -> bool:
        """Whether a node's value may be a sequence (not a constant)."""
        return isinstance(arg, fx.Node) and arg.op not in ("get_attr",)

    def _state_args(self, node, m, kind) -> list:
        """[(state index, argument)] of a neuron call."""
        if kind == "snntorch":
            spec = _snntorch()._SPECS[m._flexsn_base]
            given = list(node.args[1:]) + [None] * len(spec.states)
            out = [(i, given[i]) for i in range(len(spec.states))]
            for k, v in node.kwargs.items():
                if k in spec.states:
                    out[spec.states.index(k)] = (spec.states.index(k), v)
            return out
        if kind == "norse":
            st = node.args[1] if len(node.args) > 1 else node.kwargs.get("state")
            return [(0, st)]
        return []

    def _check_neuron(self, node, m, kind):
        name = node.target[5:]
        if kind == "snntorch":
            why = self.neurons.get(id(m))
            if why:
                raise _NotReorderable(f"neuron {name}: {why}")
        if kind == "norse" and not _norse_step(m):
            raise _NotReorderable(f"Norse module {name} ({type(m).__name__}) has no "
                                  "fused single-step form")
        if kind == "stepmode" and getattr(m, "step_mode", "s") != "s":
            raise _NotReorderable(f"{name} is in step mode {m.step_mode!r} inside a step")
        for i, arg in self._state_args(node, m, kind):
            if arg is None:
                if kind == "norse":
                    raise _NotReorderable(
                        f"Norse cell {name} is given no state, so each step starts it "
                        "afresh; pass the state from step to step (an attribute, or "
                        "SequentialState's state list)")
                continue
            slot = self.slot_of.get(arg) if isinstance(arg, fx.Node) else None
            if slot is None or self.writes.get(slot) is None or \
                    not self._is_state_of(self.writes[slot], slot, node, i):
                raise _NotReorderable(
                    f"state {i} of neuron {name} is not carried from step to step "
                    "through a module attribute the step reads and writes back")

    def _is_state_of(self, written: fx.Node, slot: int, call: fx.Node = None,
                     index: int = None) -> bool:
        """Whether `written` (the value given to slot) is the next state of
        the neuron call that read the slot as its state."""
        if written.op != "call_function" or written.target is not operator.getitem or \
                not isinstance(written.args[0], fx.Node) or \
                written.args[0].op != "call_module":
            return False
        c = written.args[0]
        if call is not None and c is not call:
            return False
        m = self.gm.get_submodule(c.target)
        kind = _kind(m)
        if kind not in ("snntorch", "norse"):
            return False
        for i, arg in self._state_args(c, m, kind):
            if arg is self.slot_nodes[slot] and (index is None or i == index):
                return written.args[1] == _returned_at(m, kind, i)
        return False

    # -- running -------------------------------------------------------------
    def _build_plan(self):
        """The graph as plain tuples (what torch.compile's tracer reads
        without following fx's own classes): (op, target, kind, args,
        kwargs), arguments naming earlier values by _Ref(position)."""
        nodes = list(self.gm.graph.nodes)
        at = {n: i for i, n in enumerate(nodes)}
        ref = lambda a: fx.node.map_arg(a, lambda n: _Ref(at[n]))  # noqa: E731
        self.n_values = len(nodes)
        self.input_at = [at[n] for n in self.inputs]
        self.slot_at = [at[n] for n in self.slot_nodes]
        self.writes_at = [(i, at[n]) for i, n in self.writes.items()]
        # each value is dropped after its last use: autograd keeps what the
        # backward needs, and the rest would otherwise live to the last op
        written = {at[n] for n in self.writes.values()}
        last = {}
        for n in nodes:
            for used in n.all_input_nodes:
                last[at[used]] = at[n]
        done = {}
        for v, user in last.items():
            if v not in written:
                done.setdefault(user, []).append(v)
        self.plan = []
        written_nodes = set(self.writes.values())
        for n in nodes:
            if n.op == "placeholder":
                continue
            target, kind = n.target, None
            if n.op == "call_module":
                target = self.gm.get_submodule(n.target)
                kind = _kind(target)
                if kind in ("snntorch", "norse") and _finals_only(n, kind, written_nodes):
                    kind += "-final"
            elif n.op == "get_attr":
                target = _fetch(self.gm, n.target)
            self.plan.append((at[n], n.op, target, kind, ref(n.args), ref(n.kwargs),
                              tuple(done.get(at[n], ()))))

    def run(self, owner: "MultiStep", inputs: list, T: int):
        env = [None] * self.n_values
        for i, x in zip(self.input_at, inputs):
            env[i] = _Seq(x) if isinstance(x, torch.Tensor) else x
        for (m, k), i in zip(self.slots, self.slot_at):
            env[i] = m.__dict__.get(k)

        def load(a):  # a plain walk: pytree's costs microseconds per node
            if type(a) is _Ref:
                return env[a.i]
            if type(a) in (tuple, list):
                return type(a)(load(v) for v in a)
            if type(a) is dict:
                return {k: load(v) for k, v in a.items()}
            return a
        result = None
        for i, op, target, kind, args, kwargs, dead in self.plan:
            if op == "output":
                result = load(args[0])
                break
            env[i] = self._eval(owner, op, target, kind, load(args), load(kwargs), T)
            for d in dead:
                env[d] = None
        for slot, i in self.writes_at:
            m, k = self.slots[slot]
            v = env[i]
            # a copy of the last step: a view would keep the whole sequence
            m.__dict__[k] = v.value if isinstance(v, _Final) else \
                v.final if isinstance(v, _SeqState) else \
                v.data[-1].clone() if isinstance(v, _Seq) else v
        return _stacked(result, T)

    def _eval(self, owner, op, target, kind, args, kwargs, T):
        if op == "get_attr":
            return target
        if op == "call_module":
            m = target
            if kind in _NEURON_KINDS:
                return _neuron(owner, m, kind, args, kwargs, T)
            if len(args) == 1 and not kwargs and isinstance(args[0], _Seq):
                return _stateless_module(owner, m, args[0])
            return _over_steps(m, args, kwargs)
        if op == "call_function":
            fn = target
            if fn is getattr and isinstance(args[0], (_Seq, _SeqState)):
                if isinstance(args[0], _SeqState):
                    return _Seq(getattr(args[0].seqs, args[1]))
                if args[1] in _STEP_ATTRS:
                    return getattr(args[0].data[0], args[1])
            if fn is operator.getitem and isinstance(args[0], _SeqState):
                return _Seq(args[0].seqs[args[1]])
            if fn is operator.getitem and isinstance(args[0], (tuple, list)):
                return args[0][args[1]]
            if fn in _ELEMENTWISE and _elementwise(args, kwargs):
                a, k = _unwrap(args, kwargs)
                return _Seq(fn(*a, **k))
            return _over_steps(fn, args, kwargs)
        if op == "call_method":
            name = target
            self_ = args[0]
            if isinstance(self_, _Seq) and name in _STEP_QUERIES:
                a, k = _unwrap(args[1:], kwargs)
                return getattr(self_.data[0], name)(*a, **k)
            if name in _ELEMENTWISE_METHODS and _elementwise(args, kwargs):
                a, k = _unwrap(args, kwargs)
                return _Seq(getattr(a[0], name)(*a[1:], **k))
            return _over_steps(lambda s, *a, **k: getattr(s, name)(*a, **k), args, kwargs)
        raise RuntimeError(f"multistep: unexpected graph operation {op}")


def _returned_at(m, kind, state_index) -> int:
    """Where a neuron's call returns its state `state_index`."""
    if kind == "norse":
        return 1
    spec = _snntorch()._SPECS[m._flexsn_base]
    returns = ("spk",) + spec.returns
    name = spec.states[state_index]
    return returns.index(name) if name in returns else -1


def _fetch(root: nn.Module, target: str):
    owner, _, leaf = target.rpartition(".")
    m = root.get_submodule(owner) if owner else root
    return getattr(m, leaf)


def _stacked(result, T):
    """The step's return value with each per-step value stacked over T."""
    def one(v):
        if isinstance(v, _Seq):
            return v.data
        if isinstance(v, _SeqState):
            return v.seqs
        if isinstance(v, torch.Tensor):  # the same value at every step
            return v.unsqueeze(0).expand(T, *v.shape).contiguous()
        return v
    return tree_map(one, result, is_leaf=lambda v: isinstance(v, (_Seq, _SeqState)))


def _as_seq(v, T) -> torch.Tensor:
    if isinstance(v, _Seq):
        return v.data
    if isinstance(v, torch.Tensor):
        return v.unsqueeze(0).expand(T, *v.shape)
    raise TypeError(f"a neuron's input must be a tensor, got {type(v).__name__}")


_NEURON_KINDS = ("snntorch", "norse", "stepmode", "snntorch-final", "norse-final")


def _finals_only(node: fx.Node, kind: str, written: set) -> bool:
    """Whether the states a neuron call returns are only stored in module
    attributes (the step's carry), so that its scan needs to write final
    states only: every use of the call is an index into its result, and
    each state it indexes feeds nothing but an attribute write."""
    states = 0
    for user in node.users:
        if user.op != "call_function" or user.target is not operator.getitem or \
                not isinstance(user.args[1], int):
            return False
        if user.args[1] == 0:  # the spikes (Norse: the output)
            continue
        if user.users or user not in written:
            return False
        states += 1
    return states > 0


def _neuron(owner, m, kind, args, kwargs, T):
    x = _as_seq(args[0], T)
    if kind in ("snntorch", "snntorch-final"):
        final = kind == "snntorch-final"
        out = m._flexsn_sequence(x, args[1:], kwargs, finals=final)
        if not isinstance(out, tuple):
            return _Seq(out)
        return (_Seq(out[0]),) + tuple(_Final(o) if final else _Seq(o) for o in out[1:])
    if kind in ("norse", "norse-final"):
        wrapped = owner._norse_of(m)
        state = args[1] if len(args) > 1 else kwargs.get("state")
        want = kind == "norse"
        out, seqs, final = wrapped.scan_states(x, state, want_seqs=want)
        return _Seq(out), _SeqState(seqs, final)
    datas = [_as_seq(a, T) for a in args]
    mode = m.step_mode
    m.step_mode = "m"
    try:
        out = m(*datas, **kwargs)
    finally:
        m.step_mode = mode
    return tuple(_Seq(o) for o in out) if isinstance(out, (tuple, list)) else _Seq(out)


# --------------------------------------------------------------------------
# The module
# --------------------------------------------------------------------------

class MultiStep(nn.Module):
    """`module`, a module computing one time step, run over ``[T, ...]``
    inputs (see flexsn.multistep). It holds `module`'s own parameters,
    buffers and submodules, under the same names: ``state_dict()`` keys,
    optimisers and the libraries' reset helpers see `module`."""

    def __init__(self, module: nn.Module, batch_norm: str = "per_step"):
        if not isinstance(module, nn.Module):
            raise TypeError(f"multistep takes an nn.Module, got {type(module).__name__}")
        if isinstance(module, MultiStep):
            raise TypeError("multistep takes a module computing one step; this one "
                            "already runs sequences")
        if batch_norm not in BATCH_NORM:
            raise ValueError(f"batch_norm must be one of {BATCH_NORM}, got {batch_norm!r}")
        super().__init__()
        d = self.__dict__
        d["_parameters"], d["_buffers"] = module._parameters, module._buffers
        d["_non_persistent_buffers_set"] = module._non_persistent_buffers_set
        d["_modules"] = module._modules
        d["module"] = module
        d["batch_norm"] = batch_norm
        d["training"] = module.training
        self._prepare()

    def _prepare(self):
        d = self.__dict__
        d["_neurons"] = {}  # id(snnTorch neuron) -> why it has no fused form
        d["_programs"] = {}
        d["_norse"] = {}
        d["_subs"] = {}
        d["_warned"] = set()
        d["_root"] = ("sequential_state" if _is_sequential_state(self.module)
                      else _kind(self.module), _has_state_arg(self.module))
        for m in self.module.modules():
            if _kind(m) == "snntorch":
                d["_neurons"][id(m)] = _prepare_snntorch(m)
                # snntorch.utils.reset acts on the neurons of this list, which
                # copies (deepcopy, pickle) of a network are not in
                instances = _snntorch()._SpikingNeuron.instances
                if not any(n is m for n in instances):
                    instances.append(m)

    def __getstate__(self):
        state = dict(self.__dict__)
        for k in ("_programs", "_norse", "_subs", "_neurons", "_warned", "_root"):
            state.pop(k, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._prepare()

    def train(self, mode: bool = True):
        self.module.train(mode)
        self.__dict__["training"] = mode
        return self

    def _norse_of(self, cell):
        fn = _norse()
        if isinstance(cell, fn.NorseNeuron):
            return cell
        w = self._norse.get(id(cell))
        if w is None or w.module is not cell:
            # Norse's own cells compute SuperSpike as the released 1.1.0 does
            w = self._norse[id(cell)] = fn.NorseNeuron(cell, superspike="released",
                                                       single_step=True)
        return w

    def _sub_of(self, layer):
        """multistep of a SequentialState's stateless-looking layer that holds
        neurons, kept across calls; None for a layer without neurons."""
        hit = self._subs.get(id(layer))
        if hit is None or hit[0] is not layer:
            sub = MultiStep(layer, self.batch_norm) if _has_neurons(layer) else None
            hit = self._subs[id(layer)] = (layer, sub)
        return hit[1]

    def _program(self, n_inputs: int) -> _Program:
        p = self._programs.get(n_inputs)
        if p is None:
            p = self._programs[n_inputs] = _Program(self.module, n_inputs, self._neurons)
        return p

    def _warn(self, reason: str):
        if reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(f"multistep({type(self.module).__name__}) runs step by step: "
                          f"{reason}", StepByStepWarning, stacklevel=3)

    def forward(self, *inputs, state: Any = None):
        root_kind, takes_state = self._root
        if len(inputs) == 2 and state is None and takes_state and \
                not isinstance(inputs[1], torch.Tensor):
            inputs, state = inputs[:1], inputs[1]  # Norse's (x, state) call
        T = _steps(inputs)
        if root_kind == "sequential_state":
            return self._sequential_state(inputs, state, T)
        kind = root_kind
        if kind in ("norse", "stepmode", "snntorch") and len(inputs) == 1:
            if kind == "norse":
                if not _norse_step(self.module):
                    raise TypeError(f"multistep takes a module computing one step; Norse "
                                    f"{type(self.module).__name__} takes [T, ...] already")
                w = self._norse_of(self.module)
                out, _, final = w.scan_states(inputs[0], state)
                return out, final
            if kind == "snntorch" and self._neurons.get(id(self.module)):
                self._warn(self._neurons[id(self.module)])
                return self._loop(inputs, None, T)
            r = _neuron(self, self.module, kind, [_Seq(inputs[0])], {}, T)
            return _stacked(r, T)
        if state is not None or takes_state:
            return self._loop(inputs, state, T, "the step takes a state argument")
        program = self._program(len(inputs))
        if program.reason is not None:
            self._warn(program.reason)
            return self._loop(inputs, None, T)
        return program.run(self, list(inputs), T)

    def _loop(self, inputs, state, T, reason=None):
        """T calls of the step: the reference the other paths match."""
        if reason is not None:
            self._warn(reason)
        outs = []
        with_state = state is not None or self._root[1]
        for t in range(T):
            step = [x[t] if isinstance(x, torch.Tensor) else x for x in inputs]
            if with_state:
                out, state = self.module(*step, state)
            else:
                out = self.module(*step)
            outs.append(out)
        stacked = _stack_steps(outs)
        return (stacked, state) if with_state else stacked

    def _sequential_state(self, inputs, state, T):
        """Norse's SequentialState over all steps: each cell one scan with
        its own state, stateless layers over all steps at once."""
        net = self.module
        if len(inputs) != 1:
            raise TypeError(f"SequentialState takes one input, got {len(inputs)}")
        state = [None] * len(net) if state is None else list(state)
        x = _Seq(inputs[0])
        hidden = []
        for i, layer in enumerate(net):
            if net.stateful_layers[i]:
                if not _norse_step(layer):
                    self._warn(f"layer {i} ({type(layer).__name__}) has no fused "
                               "single-step form")
                    return self._loop(inputs, state, T)
                out, _, final = self._norse_of(layer).scan_states(x.data, state[i])
                x, state[i] = _Seq(out), final
            else:
                sub = self._sub_of(layer)
                if sub is not None:
                    x = _Seq(sub(x.data))
                else:
                    x = _stateless_module(self, layer, x)
            if net.return_hidden:
                hidden.append(x.data)
        return (hidden if net.return_hidden else x.data), state

    def extra_repr(self) -> str:
        return f"batch_norm={self.batch_norm!r}"

    def __repr__(self):
        return f"MultiStep({self.module!r})"


def _stateless_module(owner, m, x: _Seq) -> _Seq:
    """A module without neurons applied to every step of x."""
    if isinstance(m, nn.modules.batchnorm._BatchNorm) and \
            (m.training or not m.track_running_stats):
        if owner.batch_norm == "folded":
            return _Seq(_fold(m, x.data))
        return _Seq(_batch_norm_per_step(m, x.data))
    if _foldable_module(m, x.data):
        return _Seq(_fold(m, x.data))
    return _over_steps(m, (x,), {})


def _has_neurons(m: nn.Module) -> bool:
    return any(_kind(s) in ("snntorch", "norse", "stepmode") for s in m.modules())


def _is_sequential_state(m) -> bool:
    fn = _norse()
    if fn is None:
        return False
    from norse.torch import SequentialState
    return isinstance(m, SequentialState)


def _steps(inputs) -> int:
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if not tensors:
        raise TypeError("multistep's forward takes [T, ...] tensors, got none")
    Ts = {x.shape[0] if x.dim() else None for x in tensors}
    if None in Ts:
        raise ValueError("multistep's inputs are [T, ...] sequences; got a 0-d tensor")
    if len(Ts) != 1:
        raise ValueError(f"multistep's inputs must share their first (time) dimension, "
                         f"got {sorted(Ts)}")
    T = Ts.pop()
    if T == 0:
        raise ValueError("multistep needs at least one time step (T = 0)")
    return T


def _stack_steps(outs: list):
    """The per-step return values stacked over T (tensors; tuples, lists and
    dicts of them)."""
    first = outs[0]
    if isinstance(first, torch.Tensor):
        return torch.stack(outs)
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(_stack_steps([o[i] for o in outs]) for i in range(len(first))))
    if isinstance(first, (tuple, list)):
        return type(first)(_stack_steps([o[i] for o in outs]) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: _stack_steps([o[k] for o in outs]) for k in first}
    return outs


def multistep(module: nn.Module, *, batch_norm: str = "per_step") -> MultiStep:
    """`module`, whose forward computes one time step, as a module whose
    forward takes ``[T, ...]`` inputs and returns the step's outputs stacked
    over T, equal to T calls of `module` (outputs, the neurons' final
    states, gradients); see the flexsn.multistep module docstring.

    batch_norm: "per_step" (BatchNorm in training mode normalises each step
    by its own statistics, as the loop does) or "folded" (by the statistics
    of all T steps together, as SpikingJelly's multi-step layers do)."""
    return MultiStep(module, batch_norm=batch_norm)
