"""Tracer: a single-step PyTorch core -> ``flexsn`` dialect IR text.

:func:`trace` records the ATen calls of the core (a ``TorchDispatchMode``) on
one-element example tensors. Python numbers the core closes over are
constants of the graph; tensors it closes over (or receives as SpikingJelly
2.0 ``static_inputs``) become scan parameters. :func:`emit` then writes the
graph as one ``func.func`` holding one ``flexsn.scan`` for given storage
dtypes, parameter kinds and requires-grad mask: the op table below maps each
ATen op to ``arith``/``math``/``flexsn`` ops on scalars. An op outside the
table raises :class:`UnsupportedOpError` naming it and its source line.
"""

from __future__ import annotations

import math
import operator
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import surrogate as _sg
from ._errors import UnsupportedOpError

aten = torch.ops.aten

STORAGE = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
           torch.float64: "f64"}


@dataclass
class ParamSource:
    """Where a scan parameter's tensor comes from at run time."""
    kind: str                 # "static": static_inputs[index]; "closure": tensor
    index: int = 0
    tensor: Optional[torch.Tensor] = None


class Node:
    """One recorded ATen call (or a placeholder / parameter / output)."""
    __slots__ = ("op", "name", "target", "args", "kwargs", "users", "meta")

    def __init__(self, op, name, target=None, args=(), kwargs=None):
        self.op, self.name, self.target = op, name, target
        self.args, self.kwargs = args, kwargs or {}
        self.users: list[Node] = []
        self.meta: dict = {}


class Graph:
    def __init__(self):
        self.nodes: list[Node] = []


@dataclass
class TracedCore:
    graph: Graph
    num_inputs: int
    num_states: int
    num_outputs: int
    params: list[ParamSource] = field(default_factory=list)
    # node name -> parameter number (placeholders and captured tensors)
    param_of_node: dict[str, int] = field(default_factory=dict)
    constants: dict[str, float] = field(default_factory=dict)


def _where(node: Node) -> str:
    frame = node.meta.get("frame")
    return f" at {frame}" if frame else ""


def _user_frame() -> str:
    """The innermost stack frame outside torch and flexsn: the user's line."""
    for frame in reversed(traceback.extract_stack()):
        f = frame.filename.replace("\\", "/")
        if "/torch/" in f or "/flexsn/" in f or f.startswith("<frozen"):
            continue
        return f'{frame.filename}:{frame.lineno} ({frame.line or frame.name})'
    return ""


def _multi_level_spike_count(sg, x):
    """SpikingJelly's multi-level spike count, written in traceable ops:
    round(clamp(x, 0, max)) forward; the gradient passes where grad_min <=
    x <= grad_max (x - detach(x) is zero forward and carries it)."""
    params = sg._sg_params
    count = torch.round(torch.clamp(x, 0, int(params["max_spike_count"])))
    inside = ((x >= float(params["grad_min"])) & (x <= float(params["grad_max"]))).to(x.dtype)
    return count.detach() + (x - x.detach()) * inside


def _sj_surrogate_patch() -> list:
    """While tracing, SpikingJelly's surrogates (when SpikingJelly is
    installed) call our spike op with the same family and parameters: its
    surrogate modules, and the spike function its neurons' reference steps
    call by family number. Returns (owner, attribute, original, patched)."""
    try:
        from spikingjelly.activation_based import surrogate as sj  # type: ignore
    except Exception:
        return []
    base = sj.SurrogateFunctionBase
    original = base.forward

    def forward(self, x):
        if not getattr(self, "spiking", True):
            return original(self, x)
        name = type(self).__name__
        if name == "MultiLevelSpikeCount":
            return _multi_level_spike_count(self, x)
        kind = _sg.KIND_OF_CLASS.get(name)
        if kind is None:
            raise UnsupportedOpError(
                f"SpikingJelly surrogate {name} has no flexsn.spike family "
                f"(supported: {', '.join(_sg.KIND_OF_CLASS)})")
        params = getattr(self, "_sg_params", None)
        if params is None:
            params = {n: getattr(self, n) for n, _ in _sg.FAMILIES[kind][2]}
        values = [float(params[n]) for n, _ in _sg.FAMILIES[kind][2]]
        return _sg.spike(x, kind, values)

    patches = [(base, "forward", original, forward)]
    try:
        from spikingjelly._ops import surrogate as ops  # type: ignore
        numbered = ops._SurrogateSpike
        names = {v: k for k, v in ops._SURROGATE_IDS.items()}
    except Exception:  # another SpikingJelly: its modules' patch is enough
        return patches

    def apply(x, alpha, surrogate_id):
        name = names.get(surrogate_id)
        kind = _sg.KIND_OF_CLASS.get(name)
        if kind is None or len(_sg.FAMILIES[kind][2]) != 1:
            raise UnsupportedOpError(f"SpikingJelly surrogate #{surrogate_id} ({name}) has "
                                     "no flexsn.spike family")
        return _sg.spike(x, kind, [float(alpha)])

    # apply is inherited from autograd.Function: None means delete it again
    patches.append((numbered, "apply", numbered.__dict__.get("apply"), staticmethod(apply)))
    try:  # STBIF's step calls a compiled inference operator: trace its reference
        from spikingjelly.activation_based.functional import neuron as fn  # type: ignore
        from spikingjelly._ops.stbif import reference as stbif  # type: ignore
        patches.append((fn, "stbif_multi_step", fn.stbif_multi_step, stbif._forward_impl))
    except Exception:  # another SpikingJelly
        pass
    return patches


class _Recorder(TorchDispatchMode):
    """Records every ATen call on tensors the core computes. A tensor the
    core did not compute and was not given is a captured one: a parameter,
    or a constant when the core made it from a number (torch.tensor(2.0))."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # TorchDispatchMode wraps __torch_dispatch__ in torch._disable_dynamo,
        # whose first call imports torch._dynamo (1-2 s). Tracing runs when a
        # module is built, never under torch.compile: leave it unwrapped.
        return False

    def __init__(self, traced: TracedCore, placeholders):
        super().__init__()
        self.traced = traced
        self.node_of: dict[int, Node] = {}
        self.keep: list = []  # keeps recorded tensors alive: ids stay unique
        for t, node in placeholders:
            self.node_of[id(t)] = node
            self.keep.append(t)

    def node(self, t: torch.Tensor, fresh: bool) -> Node:
        n = self.node_of.get(id(t))
        if n is not None:
            return n
        g = self.traced.graph
        node = Node("get_attr", f"c{len(g.nodes)}")
        g.nodes.append(node)
        if fresh and t.numel() == 1 and not t.requires_grad:
            self.traced.constants[node.name] = float(t.reshape(()).item())
        else:
            self.traced.param_of_node[node.name] = len(self.traced.params)
            self.traced.params.append(ParamSource("closure", tensor=t))
        self.node_of[id(t)] = node
        self.keep.append(t)
        return node

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.namespace == "flexsn_native":
            # our own operators (a kernel binding released by the garbage
            # collector while the core runs): never part of the core
            return out
        fresh = func in (aten.lift_fresh.default, aten.lift_fresh_copy.default)

        def ref(a):
            if isinstance(a, torch.Tensor):
                return self.node(a, fresh)
            if isinstance(a, (list, tuple)):
                return type(a)(ref(x) for x in a)
            return a

        g = self.traced.graph
        node = Node("call_function", f"n{len(g.nodes)}", func, ref(tuple(args)),
                    {k: ref(v) for k, v in kwargs.items()})
        node.meta["frame"] = _user_frame()
        for a in list(node.args) + list(node.kwargs.values()):
            for x in (a if isinstance(a, (list, tuple)) else (a,)):
                if isinstance(x, Node):
                    x.users.append(node)
        g.nodes.append(node)
        if isinstance(out, torch.Tensor):
            self.node_of[id(out)] = node
            self.keep.append(out)
        elif isinstance(out, (tuple, list)):
            for k, o in enumerate(out):
                if isinstance(o, torch.Tensor):
                    item = Node("call_function", f"n{len(g.nodes)}", operator.getitem,
                                (node, k))
                    node.users.append(item)
                    g.nodes.append(item)
                    self.node_of[id(o)] = item
                    self.keep.append(o)
        return out


def _captured_tensors(obj, depth=0, seen=None):
    """Tensors a callable holds: closure cells, defaults, partial arguments,
    bound modules' parameters and buffers (a few levels deep)."""
    seen = set() if seen is None else seen
    if depth > 3 or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, torch.nn.Module):
        yield from obj.parameters()
        yield from obj.buffers()
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _captured_tensors(x, depth + 1, seen)
    elif callable(obj):
        code = getattr(obj, "__code__", None)
        names = getattr(obj, "__globals__", {})
        for name in (code.co_names if code is not None else ()):
            value = names.get(name)
            if isinstance(value, (torch.Tensor, torch.nn.Module)):
                yield from _captured_tensors(value, depth + 1, seen)
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                yield from _captured_tensors(cell.cell_contents, depth + 1, seen)
            except ValueError:  # an empty cell
                pass
        yield from _captured_tensors(getattr(obj, "__defaults__", None) or (), depth + 1, seen)
        for attr in ("args", "func", "__self__"):
            if hasattr(obj, attr):
                yield from _captured_tensors(getattr(obj, attr), depth + 1, seen)


def example_device(core, static_inputs=(), example_inputs=None) -> torch.device:
    """Where to trace: the device of the examples, of the static inputs, or
    of the tensors the core captures (CPU when it has none)."""
    for t in list(example_inputs or []) + list(static_inputs):
        if isinstance(t, torch.Tensor):
            return t.device
    for t in _captured_tensors(core):
        return t.device
    return torch.device("cpu")


def trace(core: Callable, num_inputs: int, num_states: int,
          static_inputs: Sequence[torch.Tensor] = (),
          example_inputs: Optional[Sequence[torch.Tensor]] = None) -> TracedCore:
    """Records `core(*inputs, *states, *static_inputs)` on one-element
    tensors."""
    n = num_inputs + num_states
    dtypes = [torch.float32] * n
    for k, e in enumerate(list(example_inputs or [])[:n]):
        if isinstance(e, torch.Tensor) and e.is_floating_point():
            dtypes[k] = e.dtype
    device = example_device(core, static_inputs, example_inputs)
    example = [torch.zeros(1, dtype=d, device=device) for d in dtypes]
    statics = [s.detach() for s in static_inputs]
    traced = TracedCore(Graph(), num_inputs, num_states, 0)
    placeholders = []
    for k, t in enumerate(example + statics):
        node = Node("placeholder", f"arg{k}")
        traced.graph.nodes.append(node)
        placeholders.append((t, node))
        if k >= n:
            traced.param_of_node[node.name] = len(traced.params)
            traced.params.append(ParamSource("static", k - n))

    recorder = _Recorder(traced, placeholders)
    patches = _sj_surrogate_patch()
    for owner, attr, _, patched in patches:
        setattr(owner, attr, patched)
    try:
        with torch.no_grad(), recorder:
            result = core(*example, *statics)
    finally:
        for owner, attr, original, _ in patches:
            if original is None:
                delattr(owner, attr)
            else:
                setattr(owner, attr, original)

    outputs = (result,) if isinstance(result, torch.Tensor) else result
    if not isinstance(outputs, (tuple, list)):
        raise TypeError(f"the core must return a tuple of tensors, got "
                        f"{type(result).__name__}")
    num_outputs = len(outputs) - num_states
    if num_outputs < 0:
        raise ValueError(f"the core returns {len(outputs)} values but there are "
                         f"{num_states} states: it must return (*outputs, *new_states)")
    refs = []
    for k, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"the core's return value #{k} is {type(out).__name__} "
                            f"({out!r}); it must return tensors")
        refs.append(recorder.node(out, False))
    out_node = Node("output", "output", args=(tuple(refs),))
    traced.graph.nodes.append(out_node)
    traced.num_outputs = num_outputs
    return traced


# --------------------------------------------------------------------------
# Emission
# --------------------------------------------------------------------------

class Value:
    """An SSA value of the scan body: a compute-type float ('f') or an i1 ('b')."""
    __slots__ = ("name", "kind")

    def __init__(self, name: str, kind: str):
        self.name, self.kind = name, kind


class _Body:
    def __init__(self, ftype: str):
        self.ft = ftype
        self.lines: list[str] = []
        self.count = 0
        self._consts: dict[tuple, Value] = {}

    def emit(self, text: str, kind: str) -> Value:
        name = f"%v{self.count}"
        self.count += 1
        self.lines.append(f"    {name} = {text}")
        return Value(name, kind)

    def const(self, v: float) -> Value:
        v = float(v)
        key = ("f", repr(v))
        if key not in self._consts:
            if math.isfinite(v):
                lit = _sg.float_literal(v)
            else:
                bits = {"f32": {1: "0x7F800000", -1: "0xFF800000", 0: "0x7FC00000"},
                        "f64": {1: "0x7FF0000000000000", -1: "0xFFF0000000000000",
                                0: "0x7FF8000000000000"}}[self.ft]
                lit = bits[0 if math.isnan(v) else (1 if v > 0 else -1)]
            self._consts[key] = self.emit(f"arith.constant {lit} : {self.ft}", "f")
        return self._consts[key]

    def bconst(self, v: bool) -> Value:
        key = ("b", bool(v))
        if key not in self._consts:
            self._consts[key] = self.emit(
                f"arith.constant {'true' if v else 'false'}", "b")
        return self._consts[key]

    # Coercions -------------------------------------------------------------
    def f(self, v) -> Value:
        if isinstance(v, Value):
            if v.kind == "f":
                return v
            return self.emit(f"arith.uitofp {v.name} : i1 to {self.ft}", "f")
        if isinstance(v, (bool, int, float)):
            return self.const(float(v))
        raise UnsupportedOpError(f"unsupported operand {v!r}")

    def b(self, v) -> Value:
        if isinstance(v, Value):
            if v.kind == "b":
                return v
            return self.cmp("une", v, 0.0)
        if isinstance(v, (bool, int, float)):
            return self.bconst(bool(v))
        raise UnsupportedOpError(f"unsupported operand {v!r}")

    # Ops --------------------------------------------------------------------
    def bin(self, op: str, a, b) -> Value:
        a, b = self.f(a), self.f(b)
        return self.emit(f"{op} {a.name}, {b.name} : {self.ft}", "f")

    def un(self, op: str, a) -> Value:
        a = self.f(a)
        return self.emit(f"{op} {a.name} : {self.ft}", "f")

    def add(self, a, b): return self.bin("arith.addf", a, b)
    def sub(self, a, b): return self.bin("arith.subf", a, b)
    def mul(self, a, b): return self.bin("arith.mulf", a, b)
    def div(self, a, b): return self.bin("arith.divf", a, b)
    def neg(self, a): return self.un("arith.negf", a)

    def cmp(self, pred: str, a, b) -> Value:
        a, b = self.f(a), self.f(b)
        return self.emit(f"arith.cmpf {pred}, {a.name}, {b.name} : {self.ft}", "b")

    def select(self, c, a, b) -> Value:
        c = self.b(c)
        if isinstance(a, Value) and isinstance(b, Value) and a.kind == b.kind == "b":
            return self.emit(f"arith.select {c.name}, {a.name}, {b.name} : i1", "b")
        a, b = self.f(a), self.f(b)
        return self.emit(f"arith.select {c.name}, {a.name}, {b.name} : {self.ft}", "f")

    def logic(self, op: str, a, b) -> Value:
        a, b = self.b(a), self.b(b)
        return self.emit(f"arith.{op} {a.name}, {b.name} : i1", "b")

    def lnot(self, a) -> Value:
        return self.logic("xori", a, True)

    def round_to(self, a, storage: str) -> Value:
        """Rounds a compute value to a narrower float type and back."""
        a = self.f(a)
        t = self.emit(f"arith.truncf {a.name} : {self.ft} to {storage}", "t")
        return self.emit(f"arith.extf {t.name} : {storage} to {self.ft}", "f")


def _arg(args, i, default=None):
    return args[i] if len(args) > i else default


def _scalar_or(v, default):
    return default if v is None else v


def _pow(B: _Body, a, e):
    if isinstance(e, (int, float)) and not isinstance(a, (int, float)):
        e = float(e)
        if e == 0.0:
            return B.const(1.0)
        if e == 1.0:
            return B.f(a)
        if e == 2.0:
            return B.mul(a, a)
        if e == 3.0:
            return B.mul(B.mul(a, a), a)
        if e == 0.5:
            return B.un("math.sqrt", a)
        if e == -0.5:
            return B.un("math.rsqrt", a)
        if e == -1.0:
            return B.div(1.0, a)
    return B.bin("math.powf", a, e)


def _neg_abs(B: _Body, x):
    """-|x| as a select, not absf: its derivative at 0 is that of the x >= 0
    branch (-1), where absf's adjoint gives 0 and would zero the gradient of
    sigmoid(0) or logsigmoid(0)."""
    x = B.f(x)
    nonneg = B.cmp("oge", x, 0.0)
    return nonneg, B.select(nonneg, B.neg(x), x)


def _sigmoid(B: _Body, x):
    # Stable both ways: exp(-|x|) never overflows, in the forward or in the
    # adjoint of the branch the select does not take. One division, shared
    # by both branches: r = 1 / (1 + e) is sigmoid(|x|), e * r is
    # sigmoid(-|x|); its adjoint adds none to the backward's recomputed r
    # (the reciprocal's adjoint is a product, see ArithAdjointModels.cpp).
    # The divisor lies in [1, 2], which the GPU lowering proves: the
    # reciprocal skips rcp.rn's slow-path test (flexsn-bounded-reciprocal).
    nonneg, z = _neg_abs(B, x)
    e = B.un("math.exp", z)
    r = B.div(1.0, B.add(1.0, e))
    return B.select(nonneg, r, B.mul(e, r))


def _clamp_min(B, x, lo):
    return B.select(B.cmp("olt", x, lo), lo, x)


def _clamp_max(B, x, hi):
    return B.select(B.cmp("ogt", x, hi), hi, x)


def _clamp(B, x, lo, hi):
    if lo is not None:
        x = _clamp_min(B, x, lo)
    if hi is not None:
        x = _clamp_max(B, x, hi)
    return B.f(x)


def _softplus(B, x, beta=1.0, threshold=20.0):
    bx = B.mul(x, beta)
    big = B.cmp("ogt", bx, threshold)
    safe = B.select(big, threshold, bx)
    soft = B.div(B.un("math.log1p", B.un("math.exp", safe)), beta)
    return B.select(big, x, soft)


def _gelu(B, x, approximate="none"):
    x = B.f(x)
    if approximate == "tanh":
        inner = B.mul(math.sqrt(2.0 / math.pi),
                      B.add(x, B.mul(0.044715, B.mul(B.mul(x, x), x))))
        return B.mul(B.mul(0.5, x), B.add(1.0, B.un("math.tanh", inner)))
    return B.mul(B.mul(0.5, x), B.add(1.0, B.un("math.erf", B.mul(x, 1 / math.sqrt(2.0)))))


def _to_copy(B, x, dtype=None, **_):
    if dtype is None:
        return x
    if dtype == torch.bool:
        return B.b(x)
    if dtype in (torch.float32, torch.float64):
        return B.f(x)
    if dtype in (torch.float16, torch.bfloat16):
        return B.round_to(x, STORAGE[dtype])
    raise UnsupportedOpError(f"conversion to {dtype} (only floating types and bool)")


def _bool_or_float(B, logic_op, float_op):
    def handler(a, b, *rest, **kw):
        if all(isinstance(v, Value) and v.kind == "b" for v in (a, b)):
            return B.logic(logic_op, a, b)
        return float_op(a, b, *rest, **kw)
    return handler


def _handlers(B: _Body) -> dict:
    f, un = B.f, B.un

    def add(a, b, alpha=1):
        return B.add(a, b if alpha == 1 else B.mul(b, alpha))

    def sub(a, b, alpha=1):
        return B.sub(a, b if alpha == 1 else B.mul(b, alpha))

    def rsub(a, b, alpha=1):
        return B.sub(b, a if alpha == 1 else B.mul(a, alpha))

    def div_mode(a, b, rounding_mode=None):
        q = B.div(a, b)
        if rounding_mode == "trunc":
            return un("math.trunc", q)
        if rounding_mode == "floor":
            return un("math.floor", q)
        return q

    def remainder(a, b):
        return B.sub(a, B.mul(un("math.floor", B.div(a, b)), b))

    def sign(x):
        x = f(x)
        return B.select(B.cmp("ogt", x, 0.0), 1.0,
                        B.select(B.cmp("olt", x, 0.0), -1.0, x))

    def relu(x):
        return B.select(B.cmp("ugt", x, 0.0), x, 0.0)

    def where(c, a, b):
        return B.select(c, a, b)

    def masked_fill(x, mask, value):
        return B.select(mask, value, x)

    def heaviside(x, v):
        return B.select(B.cmp("oeq", x, 0.0), v,
                        B.select(B.cmp("ogt", x, 0.0), 1.0, 0.0))

    def leaky_relu(x, slope=0.01):
        return B.select(B.cmp("ogt", x, 0.0), x, B.mul(x, slope))

    def elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
        # expm1 of min(x, 0): the branch the select drops never overflows (its
        # adjoint would be 0 * inf).
        pos = B.cmp("ogt", x, 0.0)
        neg = B.mul(B.mul(scale, alpha),
                    un("math.expm1", B.mul(B.select(pos, 0.0, x), input_scale)))
        return B.select(pos, B.mul(x, scale), neg)

    def lerp(a, b, w):
        return B.add(a, B.mul(w, B.sub(b, a)))

    def addcmul(a, t1, t2, value=1):
        return B.add(a, B.mul(B.mul(t1, t2), value))

    def addcdiv(a, t1, t2, value=1):
        return B.add(a, B.mul(B.div(t1, t2), value))

    def hypot(a, b):
        return un("math.sqrt", B.add(B.mul(a, a), B.mul(b, b)))

    def frac(x):
        return B.sub(x, un("math.trunc", x))

    def cmp(pred):
        return lambda a, b: B.cmp(pred, a, b)

    def math1(op):
        return lambda x: un(op, x)

    def const_like(v):
        return lambda *a, **k: B.const(v)

    def full_like(x, v, **_):
        return B.const(v)

    def detach(x):
        x = f(x)
        return B.emit(f"flexsn.detach {x.name} : {B.ft}", "f")

    def spike(x, kind, params):
        x = f(x)
        return B.emit(f"flexsn.spike {x.name} surrogate "
                      f"{_sg.ir_attribute(kind, params)} : {B.ft}", "f")

    def identity(x, *_, **__):
        return x

    def select(x, dim, index):
        # a trace's tensors hold one element: only index 0 (or -1) of a
        # dimension of size one exists; anything else picks another neuron
        if index not in (0, -1):
            raise UnsupportedOpError(f"select of index {index} mixes neurons")
        return x

    def stack1(tensors, dim=0):
        if len(tensors) != 1:
            raise UnsupportedOpError(f"stack/cat of {len(tensors)} tensors mixes neurons")
        return tensors[0]

    mul_or_and = _bool_or_float(B, "andi", B.mul)
    add_or_or = _bool_or_float(B, "ori", add)

    return {
        aten.add.Tensor: add_or_or, aten.add.Scalar: add,
        aten.sub.Tensor: sub, aten.sub.Scalar: sub,
        aten.rsub.Tensor: rsub, aten.rsub.Scalar: rsub,
        aten.mul.Tensor: mul_or_and, aten.mul.Scalar: B.mul,
        aten.div.Tensor: B.div, aten.div.Scalar: B.div,
        aten.div.Tensor_mode: div_mode, aten.div.Scalar_mode: div_mode,
        aten.neg.default: B.neg, aten.reciprocal.default: lambda x: B.div(1.0, x),
        aten.bitwise_and.Tensor: lambda a, b: B.logic("andi", a, b),
        aten.bitwise_or.Tensor: lambda a, b: B.logic("ori", a, b),
        aten.bitwise_xor.Tensor: lambda a, b: B.logic("xori", a, b),
        aten.bitwise_not.default: B.lnot,
        aten.logical_and.default: lambda a, b: B.logic("andi", a, b),
        aten.logical_or.default: lambda a, b: B.logic("ori", a, b),
        aten.logical_xor.default: lambda a, b: B.logic("xori", a, b),
        aten.logical_not.default: B.lnot,
        aten.eq.Tensor: cmp("oeq"), aten.eq.Scalar: cmp("oeq"),
        aten.ne.Tensor: cmp("une"), aten.ne.Scalar: cmp("une"),
        aten.ge.Tensor: cmp("oge"), aten.ge.Scalar: cmp("oge"),
        aten.gt.Tensor: cmp("ogt"), aten.gt.Scalar: cmp("ogt"),
        aten.le.Tensor: cmp("ole"), aten.le.Scalar: cmp("ole"),
        aten.lt.Tensor: cmp("olt"), aten.lt.Scalar: cmp("olt"),
        aten.isnan.default: lambda x: B.cmp("uno", x, x),
        aten.sigmoid.default: lambda x: _sigmoid(B, x),
        aten.tanh.default: math1("math.tanh"),
        aten.exp.default: math1("math.exp"), aten.exp2.default: math1("math.exp2"),
        aten.expm1.default: math1("math.expm1"),
        aten.log.default: math1("math.log"), aten.log2.default: math1("math.log2"),
        aten.log10.default: math1("math.log10"), aten.log1p.default: math1("math.log1p"),
        aten.sqrt.default: math1("math.sqrt"), aten.rsqrt.default: math1("math.rsqrt"),
        aten.abs.default: math1("math.absf"),
        aten.sin.default: math1("math.sin"), aten.cos.default: math1("math.cos"),
        aten.tan.default: math1("math.tan"), aten.atan.default: math1("math.atan"),
        aten.asin.default: math1("math.asin"), aten.acos.default: math1("math.acos"),
        aten.sinh.default: math1("math.sinh"), aten.cosh.default: math1("math.cosh"),
        aten.asinh.default: math1("math.asinh"), aten.acosh.default: math1("math.acosh"),
        aten.atanh.default: math1("math.atanh"),
        aten.erf.default: math1("math.erf"), aten.erfc.default: math1("math.erfc"),
        aten.floor.default: math1("math.floor"), aten.ceil.default: math1("math.ceil"),
        aten.round.default: math1("math.roundeven"), aten.trunc.default: math1("math.trunc"),
        aten.frac.default: frac,
        aten.relu.default: relu, aten.sign.default: sign, aten.sgn.default: sign,
        aten.minimum.default: lambda a, b: B.bin("arith.minimumf", a, b),
        aten.maximum.default: lambda a, b: B.bin("arith.maximumf", a, b),
        aten.fmin.default: lambda a, b: B.bin("arith.minnumf", a, b),
        aten.fmax.default: lambda a, b: B.bin("arith.maxnumf", a, b),
        aten.fmod.Scalar: lambda a, b: B.bin("arith.remf", a, b),
        aten.fmod.Tensor: lambda a, b: B.bin("arith.remf", a, b),
        aten.remainder.Scalar: remainder, aten.remainder.Tensor: remainder,
        aten.pow.Tensor_Scalar: lambda a, e: _pow(B, a, e),
        aten.pow.Tensor_Tensor: lambda a, e: B.bin("math.powf", a, e),
        aten.pow.Scalar: lambda a, e: B.bin("math.powf", a, e),
        aten.atan2.default: lambda a, b: B.bin("math.atan2", a, b),
        aten.copysign.Tensor: lambda a, b: B.bin("math.copysign", a, b),
        aten.copysign.Scalar: lambda a, b: B.bin("math.copysign", a, b),
        aten.hypot.default: hypot,
        aten.clamp.default: lambda x, lo=None, hi=None: _clamp(B, x, lo, hi),
        aten.clamp.Tensor: lambda x, lo=None, hi=None: _clamp(B, x, lo, hi),
        aten.clamp_min.default: lambda x, lo: _clamp(B, x, lo, None),
        aten.clamp_min.Tensor: lambda x, lo: _clamp(B, x, lo, None),
        aten.clamp_max.default: lambda x, hi: _clamp(B, x, None, hi),
        aten.clamp_max.Tensor: lambda x, hi: _clamp(B, x, None, hi),
        aten.hardtanh.default: lambda x, lo=-1.0, hi=1.0: _clamp(B, x, lo, hi),
        aten.where.self: where, aten.where.ScalarSelf: where,
        aten.where.ScalarOther: where, aten.where.Scalar: where,
        aten.masked_fill.Scalar: masked_fill, aten.masked_fill.Tensor: masked_fill,
        aten.heaviside.default: heaviside,
        aten.lerp.Scalar: lerp, aten.lerp.Tensor: lerp,
        aten.addcmul.default: addcmul, aten.addcdiv.default: addcdiv,
        aten.softplus.default: lambda x, beta=1.0, threshold=20.0: _softplus(B, x, beta, threshold),
        aten.leaky_relu.default: leaky_relu, aten.elu.default: elu,
        aten.silu.default: lambda x: B.mul(x, _sigmoid(B, x)),
        aten.gelu.default: lambda x, approximate="none": _gelu(B, x, approximate),
        aten.square.default: lambda x: B.mul(x, x),
        aten.clone.default: identity, aten.alias.default: identity,
        # shape-only ops (a step's values are per neuron; shapes are the
        # scan's): SpikingJelly's single steps run a T=1 sequence through them
        aten.unsqueeze.default: identity, aten.squeeze.default: identity,
        aten.squeeze.dim: identity, aten.squeeze.dims: identity,
        aten.view.default: identity, aten._unsafe_view.default: identity,
        aten.reshape.default: identity, aten.select.int: select,
        aten.stack.default: stack1, aten.cat.default: stack1,
        aten.lift_fresh_copy.default: identity, aten.lift_fresh.default: identity, aten.expand.default: identity,
        aten.detach.default: detach,
        aten.zeros_like.default: const_like(0.0), aten.ones_like.default: const_like(1.0),
        aten.full_like.default: full_like,
        aten.scalar_tensor.default: lambda v, **_: B.const(v),
        aten._to_copy.default: lambda x, **kw: _to_copy(B, x, **kw),
        torch.ops.flexsn.spike.default: spike,
    }


_MULTI = {aten.log_sigmoid_forward.default}


def _out_of_place(op):
    """The out-of-place overload of an in-place ATen op (relu_ -> relu):
    the recorder maps the mutated tensor to the op's node, so the values
    the core reads after the op are its result."""
    name = getattr(getattr(op, "overloadpacket", None), "__name__", "")
    if not name.endswith("_") or name.startswith("_"):
        return None
    packet = getattr(aten, name[:-1], None)
    return getattr(packet, op._overloadname, None) if packet is not None else None


def emit(traced: TracedCore, in_dtypes: Sequence[torch.dtype],
         param_dtypes: Sequence[torch.dtype], param_scalar: Sequence[bool],
         requires_grad: Sequence[bool], name: str = "core") -> str:
    """The IR of `traced`: one kernel function `name` whose inputs and
    states are stored as `in_dtypes` (inputs then states; outputs take the
    first input's), whose parameters are scalars or per-neuron, and where
    `requires_grad` (inputs, states, params) marks what takes a gradient.
    (Initial states that are zeros need no variant: every kernel reads a
    null initial-state pointer as zeros.)"""
    ni, ns, no = traced.num_inputs, traced.num_states, traced.num_outputs
    compute = "f64" if all(d == torch.float64 for d in in_dtypes) else "f32"
    B = _Body(compute)
    table = _handlers(B)
    values: dict[str, Any] = {}
    placeholders = [nd for nd in traced.graph.nodes if nd.op == "placeholder"]
    block_args = []
    for i, nd in enumerate(placeholders[:ni + ns]):
        values[nd.name] = Value(f"%a{i}", "f")
        block_args.append(f"%a{i}: {compute}")
    for p in range(len(traced.params)):
        block_args.append(f"%p{p}: {compute}")
    for node_name, p in traced.param_of_node.items():
        values[node_name] = Value(f"%p{p}", "f")
    for node_name, c in traced.constants.items():
        values[node_name] = c

    def resolve(a):
        if isinstance(a, Node):
            return values[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(resolve(x) for x in a)
        return a

    multi: dict[str, list] = {}
    result = None
    for nd in traced.graph.nodes:
        if nd.op in ("placeholder", "get_attr") or nd.name in values:
            continue
        if nd.op == "output":
            result = nd.args[0]
            break
        if nd.op != "call_function":
            raise UnsupportedOpError(f"{nd.op} {nd.target}{_where(nd)}")
        if nd.target is operator.getitem:
            src, k = nd.args
            if src.name in multi and k == 0:
                values[nd.name] = multi[src.name][0]
                continue
            if src.name in multi and not nd.users:
                continue
            raise UnsupportedOpError(f"getitem #{k} of {src.target}{_where(nd)}")
        if nd.target in _MULTI:
            multi[nd.name] = [table_logsigmoid(B, resolve(nd.args[0]))]
            continue
        if nd.target is aten.unbind.int:  # of a size-one dimension: the value
            multi[nd.name] = [resolve(nd.args[0])]
            continue
        handler = table.get(nd.target) or table.get(_out_of_place(nd.target))
        if handler is None:
            raise UnsupportedOpError(
                f"the core uses {nd.target}, which flexsn cannot compile{_where(nd)}")
        kwargs = {k: resolve(v) for k, v in nd.kwargs.items()
                  if k not in ("device", "layout", "pin_memory", "memory_format",
                               "non_blocking")}
        if nd.target in (aten.clamp.default, aten.clamp.Tensor) and kwargs:
            kwargs = {"lo": kwargs.get("min"), "hi": kwargs.get("max")}
        try:
            values[nd.name] = handler(*resolve(nd.args), **kwargs)
        except UnsupportedOpError as e:
            raise UnsupportedOpError(f"{nd.target}: {e}{_where(nd)}") from None
        except TypeError as e:
            raise UnsupportedOpError(
                f"the core calls {nd.target} with arguments flexsn does not "
                f"support ({e}){_where(nd)}") from None

    outs = result if isinstance(result, (tuple, list)) else (result,)
    yielded = []
    for k, out in enumerate(outs):
        v = values[out.name] if isinstance(out, Node) else out
        if isinstance(v, Value) and v.kind == "b":
            what = f"output #{k}" if k < no else f"new state #{k - no}"
            raise TypeError(f"the core's {what} is a bool tensor; FlexSN needs "
                            "floating-point outputs and states (use .to(x))")
        yielded.append(B.f(v).name)

    def seq(d):
        return f"tensor<?x?x{STORAGE[d]}>"

    def vec(d):
        return f"tensor<?x{STORAGE[d]}>"

    out_dtype = in_dtypes[0]
    no_grad = " {flexsn.no_grad}"
    func_args, ins, sts, prs = [], [], [], []
    for i in range(ni):
        func_args.append(f"%x{i}: {seq(in_dtypes[i])}" + ("" if requires_grad[i] else no_grad))
        ins.append((f"%x{i}", seq(in_dtypes[i])))
    for i in range(ns):
        d = in_dtypes[ni + i]
        sts.append((f"%s{i}", vec(d)))
        func_args.append(f"%s{i}: {vec(d)}" + ("" if requires_grad[ni + i] else no_grad))
    for p, (d, scalar) in enumerate(zip(param_dtypes, param_scalar)):
        t = STORAGE[d] if scalar else vec(d)
        func_args.append(f"%q{p}: {t}" + ("" if requires_grad[ni + ns + p] else no_grad))
        prs.append((f"%q{p}", t))
    result_types = [seq(out_dtype)] * no + [seq(in_dtypes[ni + i]) for i in range(ns)]

    def group(kw, items):
        if not items:
            return ""
        return (f" {kw}(" + ", ".join(n for n, _ in items) + " : "
                + ", ".join(t for _, t in items) + ")")

    nres = len(result_types)
    res = "%r" if nres == 1 else f"%r:{nres}"
    lines = [f"func.func @{name}(" + ", ".join(func_args) + ") -> ("
             + ", ".join(result_types) + ") {"] + [
             f"  {res} = flexsn.scan" + group("ins", ins) + group("states", sts)
             + group("params", prs) + " -> (" + ", ".join(result_types) + ") {",
             "  ^bb0(" + ", ".join(block_args) + "):"]
    lines += B.lines
    lines.append(f"    flexsn.yield {', '.join(yielded)} : {', '.join([compute] * len(yielded))}")
    lines.append("  }")
    rets = ["%r"] if nres == 1 else [f"%r#{k}" for k in range(nres)]
    lines.append(f"  return {', '.join(rets)} : {', '.join(result_types)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def table_logsigmoid(B: _Body, x):
    # log sigmoid(x) = min(x, 0) - log1p(exp(-|x|)), with min and |x| as
    # selects on one predicate so that the derivative at 0 is 1/2.
    x = B.f(x)
    nonneg, z = _neg_abs(B, x)
    m = B.select(nonneg, 0.0, x)
    return B.sub(m, B.un("math.log1p", B.un("math.exp", z)))


_NO_GRAD_OPS = {aten.detach.default, aten.zeros_like.default, aten.ones_like.default,
                aten.full_like.default, aten.scalar_tensor.default,
                aten.lift_fresh.default, aten.lift_fresh_copy.default,
                aten.isnan.default}
_BOOL_OPS_PREFIX = ("aten.eq.", "aten.ne.", "aten.ge.", "aten.gt.", "aten.le.",
                    "aten.lt.", "aten.logical_", "aten.bitwise_")


def differentiable_results(traced: TracedCore) -> list[bool]:
    """For each output and new state: whether PyTorch would give it a
    gradient path (it depends on an input, state or parameter through ops
    other than comparisons, logic, detach and bool conversions)."""
    diff: dict[str, bool] = {}
    for nd in traced.graph.nodes:
        if nd.op == "placeholder":
            diff[nd.name] = True
        elif nd.op == "get_attr":
            diff[nd.name] = nd.name in traced.param_of_node
        elif nd.op == "call_function":
            name = str(nd.target)
            if nd.target in _NO_GRAD_OPS or name.startswith(_BOOL_OPS_PREFIX):
                diff[nd.name] = False
                continue
            args = list(nd.args) + list(nd.kwargs.values())
            flat = [a for x in args for a in (x if isinstance(x, (list, tuple)) else (x,))]
            d = any(diff.get(a.name, False) for a in flat if isinstance(a, Node))
            if nd.target is aten._to_copy.default and nd.kwargs.get("dtype") is not None:
                src = nd.args[0]
                d = d and not (isinstance(src, Node) and _is_bool(src))
            diff[nd.name] = d
        elif nd.op == "output":
            return [diff.get(a.name, False) for a in nd.args[0]]
    return []


def _is_bool(node: Node) -> bool:
    name = str(node.target)
    if name.startswith(_BOOL_OPS_PREFIX) or node.target is aten.isnan.default:
        return True
    if node.target is aten._to_copy.default:
        return node.kwargs.get("dtype") == torch.bool
    return False


def supported_ops() -> list[str]:
    """Names of the ATen ops the tracer compiles."""
    return sorted({str(k) for k in _handlers(_Body("f32"))} | {str(k) for k in _MULTI})
