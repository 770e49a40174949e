"""A traced core: the graph of ATen calls the recorder (_recorder) made of
one step, where its parameters come from, and which of its results PyTorch
would differentiate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

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


def node_location(node: Node) -> str:
    frame = node.meta.get("frame")
    return f" at {frame}" if frame else ""


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


# ops whose result holds the values of their first argument
_SAME_VALUES = {aten.clone.default, aten.alias.default, aten.detach.default,
                aten.view.default, aten.reshape.default, aten.squeeze.dim,
                aten.unsqueeze.default, aten.contiguous.default}


def spike_outputs(traced: TracedCore) -> tuple[int, ...]:
    """The outputs (indices below num_outputs) whose every value is exactly
    0 or 1: a flexsn.spike result, or a bool made float, passed on
    unchanged."""
    def source(nd):
        """The node whose values `nd` passes on unchanged, or None."""
        if nd.target in _SAME_VALUES and nd.args:
            return nd.args[0]
        # select(stack(L, d), d, i) is L[i] (a one-step sequence's step)
        if nd.target is aten.select.int and len(nd.args) == 3:
            src, dim, i = nd.args
            if isinstance(src, Node) and src.target is aten.stack.default:
                items = src.args[0]
                sdim = src.args[1] if len(src.args) > 1 else src.kwargs.get("dim", 0)
                if sdim == dim and isinstance(i, int) and -len(items) <= i < len(items):
                    return items[i]
        return None

    def binary(nd) -> bool:
        while isinstance(nd, Node) and nd.op == "call_function":
            up = source(nd)
            if up is None:
                break
            nd = up
        if not isinstance(nd, Node) or nd.op != "call_function":
            return False
        if str(nd.target) == "flexsn.spike.default":
            return True
        if nd.target is aten._to_copy.default:
            src = nd.args[0]
            dtype = nd.kwargs.get("dtype")
            return isinstance(src, Node) and _is_bool(src) and dtype is not None \
                and dtype.is_floating_point
        return False
    for nd in traced.graph.nodes:
        if nd.op == "output":
            outs = nd.args[0]
            outs = outs if isinstance(outs, (list, tuple)) else (outs,)
            return tuple(k for k, o in enumerate(outs[:traced.num_outputs]) if binary(o))
    return ()
