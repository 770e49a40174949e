"""A traced core (_graph.TracedCore) as IR text: one ``func.func`` holding
one ``flexsn.scan``, for given storage dtypes, parameter kinds and
requires-grad mask, each ATen call written through the op table
(_optable). An op outside the table raises UnsupportedOpError naming it and
its source line."""

from __future__ import annotations

import operator
from typing import Any, Sequence

import torch

from ._errors import UnsupportedOpError
from ._graph import STORAGE, Node, TracedCore, node_location
from ._ir import Body, Value
from ._optable import MULTI, handlers, out_of_place, table_logsigmoid

aten = torch.ops.aten

def emit(traced: TracedCore, in_dtypes: Sequence[torch.dtype],
         param_dtypes: Sequence[torch.dtype], param_scalar: Sequence[bool],
         requires_grad: Sequence[bool], name: str = "core",
         chunk_width: int = 0, states_only: bool = False, state_storage=None) -> str:
    """The IR of `traced`: one kernel function `name` whose inputs and
    states are stored as `in_dtypes` (inputs then states; outputs take the
    first input's), whose parameters are scalars or per-neuron, and where
    `requires_grad` (inputs, states, params) marks what takes a gradient.
    (Initial states that are zeros need no variant: every kernel reads a
    null initial-state pointer as zeros.) `chunk_width` > 0: the
    sequences hold chunks of steps side by side, rows of that many neurons
    (flexsn.chunk_width; GPU kernels). `states_only`: the function returns
    the states alone, so its kernels write no outputs (chunked_time's
    guess of chunk ends). `state_storage`: the dtype the caller stores the
    states in outside chunk borders, narrower than theirs here
    (flexsn.state_storage: the training kernels save what they would save
    with states of that dtype)."""
    compute = "f64" if all(d == torch.float64 for d in in_dtypes) else "f32"
    B = Body(compute)
    values, block_args = _bind_arguments(traced, compute)
    result = _emit_nodes(traced, B, values)
    yielded = _yielded(traced, B, values, result)
    return _function_text(traced, B, block_args, yielded, in_dtypes, param_dtypes,
                          param_scalar, requires_grad, name, chunk_width, states_only,
                          state_storage)


def _bind_arguments(traced: TracedCore, compute: str):
    """(the values of the graph's inputs, states, parameters and constants
    by node name; the scan body's block arguments)."""
    ni, ns = traced.num_inputs, traced.num_states
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
    return values, block_args


def _emit_nodes(traced: TracedCore, B: Body, values: dict):
    """Writes each ATen call of the graph into `B` through the op table,
    filling `values`; returns the graph's output argument."""
    table = handlers(B)

    def resolve(a):
        if isinstance(a, Node):
            return values[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(resolve(x) for x in a)
        return a

    multi: dict[str, list] = {}
    for nd in traced.graph.nodes:
        if nd.op in ("placeholder", "get_attr") or nd.name in values:
            continue
        if nd.op == "output":
            return nd.args[0]
        if nd.op != "call_function":
            raise UnsupportedOpError(f"{nd.op} {nd.target}{node_location(nd)}")
        if nd.target is operator.getitem:
            src, k = nd.args
            if src.name in multi and k == 0:
                values[nd.name] = multi[src.name][0]
                continue
            if src.name in multi and not nd.users:
                continue
            raise UnsupportedOpError(f"getitem #{k} of {src.target}{node_location(nd)}")
        if nd.target in MULTI:
            multi[nd.name] = [table_logsigmoid(B, resolve(nd.args[0]))]
            continue
        if nd.target is aten.unbind.int:  # of a size-one dimension: the value
            multi[nd.name] = [resolve(nd.args[0])]
            continue
        handler = table.get(nd.target) or table.get(out_of_place(nd.target))
        if handler is None:
            raise UnsupportedOpError(
                f"the core uses {nd.target}, which flexsn cannot compile{node_location(nd)}")
        kwargs = {k: resolve(v) for k, v in nd.kwargs.items()
                  if k not in ("device", "layout", "pin_memory", "memory_format",
                               "non_blocking")}
        if nd.target in (aten.clamp.default, aten.clamp.Tensor) and kwargs:
            kwargs = {"lo": kwargs.get("min"), "hi": kwargs.get("max")}
        try:
            values[nd.name] = handler(*resolve(nd.args), **kwargs)
        except UnsupportedOpError as e:
            raise UnsupportedOpError(f"{nd.target}: {e}{node_location(nd)}") from None
        except TypeError as e:
            raise UnsupportedOpError(
                f"the core calls {nd.target} with arguments flexsn does not "
                f"support ({e}){node_location(nd)}") from None
    return None


def _yielded(traced: TracedCore, B: Body, values: dict, result) -> list:
    """The names of the values the scan yields: outputs, then new states."""
    no = traced.num_outputs
    outs = result if isinstance(result, (tuple, list)) else (result,)
    yielded = []
    for k, out in enumerate(outs):
        v = values[out.name] if isinstance(out, Node) else out
        if isinstance(v, Value) and v.kind == "b":
            what = f"output #{k}" if k < no else f"new state #{k - no}"
            raise TypeError(f"the core's {what} is a bool tensor; FlexSN needs "
                            "floating-point outputs and states (use .to(x))")
        yielded.append(B.as_float(v).name)
    return yielded


def _scan_attributes(chunk_width: int, state_storage) -> str:
    attrs = []
    if chunk_width:
        attrs.append(f"flexsn.chunk_width = {chunk_width} : i64")
    if state_storage is not None:
        attrs.append(f"flexsn.state_storage = {STORAGE[state_storage]}")
    return f" attributes {{{', '.join(attrs)}}}" if attrs else ""


def _function_text(traced: TracedCore, B: Body, block_args: list, yielded: list,
                   in_dtypes, param_dtypes, param_scalar, requires_grad, name: str,
                   chunk_width: int = 0, states_only: bool = False,
                   state_storage=None) -> str:
    """The kernel function around the scan body `B`."""
    ni, ns, no = traced.num_inputs, traced.num_states, traced.num_outputs
    compute = B.ft

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
    returned = slice(no if states_only else 0, nres)
    lines = [f"func.func @{name}(" + ", ".join(func_args) + ") -> ("
             + ", ".join(result_types[returned]) + ") {"] + [
             f"  {res} = flexsn.scan" + group("ins", ins) + group("states", sts)
             + group("params", prs)
             + _scan_attributes(chunk_width, state_storage)
             + " -> (" + ", ".join(result_types) + ") {",
             "  ^bb0(" + ", ".join(block_args) + "):"]
    lines += B.lines
    lines.append(f"    flexsn.yield {', '.join(yielded)} : {', '.join([compute] * len(yielded))}")
    lines.append("  }")
    rets = ["%r"] if nres == 1 else [f"%r#{k}" for k in range(nres)]
    lines.append(f"  return {', '.join(rets[returned])} : {', '.join(result_types[returned])}")
    lines.append("}")
    return "\n".join(lines) + "\n"
