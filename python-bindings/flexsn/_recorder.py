"""Recording a single-step PyTorch core as a graph (_graph): a
``TorchDispatchMode`` records the core's ATen calls on one-element example
tensors. Python numbers the core closes over are constants of the graph;
tensors it closes over (or receives as SpikingJelly 2.0 ``static_inputs``)
become scan parameters. While recording, SpikingJelly's surrogate functions
become our spike op."""

from __future__ import annotations

import operator
import traceback
from typing import Callable, Optional, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import surrogate as _sg
from ._errors import UnsupportedOpError
from ._graph import Graph, Node, ParamSource, TracedCore

aten = torch.ops.aten

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
