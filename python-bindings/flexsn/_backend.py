"""flexsn.backend: a torch.compile backend that rolls a time loop's
per-step neuron calls back into one fused scan.

Dynamo unrolls a forward that loops over time into T copies of the step.
Where a step calls a neuron that runs on the package's operators (a
from_snntorch or from_norse neuron, a converted SpikingJelly neuron, a
flexsn module in step mode ``"s"``), each copy holds one
``flexsn_native.train`` (or ``launch``) node whose state inputs are the
previous copy's state results. The backend finds each such chain and
replaces it by one call on the steps' inputs concatenated over time: the
same kernels run over T steps instead of T kernels of one step, with the
loop's numbers (a binding's kernels take any T). Where the loop reads
every step's state, the call is the configuration's binding that writes
state sequences. Then the stateless computation that feeds each rolled
call, the same at every step, runs once under torch.vmap (unless
``batch_steps=False``), and the graph goes to the backend it names
(Inductor by default).

SpikingJelly's own LIFNode (its operator once per step) and neurons
written inline in the loop body become such chains first (_inline).
snnTorch's and Norse's own neurons, whose forwards break Dynamo's graph,
are traced for this backend in forms Dynamo captures
(capture_libraries): they arrive as inline neurons.

A chain is rolled only when that is exact: the calls take the same
parameters, each step's state inputs are the previous step's state results
(as they are, or through ``.to``/``.contiguous`` that change nothing), no
step's input depends on an earlier call of the chain, and the first call's
binding differentiates every input and parameter a later one does.
Anything else is compiled as traced, with one :class:`flexsn.LoopWarning`
that names the call and the reason.
"""

from __future__ import annotations

import heapq
import importlib.abc
import operator
import sys
import warnings
from typing import Callable, Optional, Union

import torch
from torch import fx

from ._errors import LoopWarning

__all__ = ["Backend", "backend"]

# Per binding id, how its call's tensors and results split: (inputs,
# states, result indices of the outputs, result indices of the states, the
# states are final states), recorded when the binding is made; and, for a
# training binding, which of its leaves get a gradient.
_layouts: dict = {}
_gradients: dict = {}


def note_layout(ident: int, num_inputs: int, num_states: int, outputs: list,
                states: list, final: bool, gradients: Optional[list] = None) -> None:
    _layouts[ident] = (num_inputs, num_states, list(outputs), list(states), final)
    if gradients is not None:
        _gradients[ident] = list(gradients)


# Per final-state binding id, a function that returns (id, recipe) of the
# binding of the same configuration whose state results are sequences
# (made on first use), or None once its owner is gone.
_sequences: dict = {}


def note_sequences(ident: int, sequences: Callable) -> None:
    _sequences[ident] = sequences


def _ops():
    """The operators a chain is made of, by the targets a graph names them
    with (Dynamo's graphs name the packet, AOTAutograd's the overload)."""
    ops = torch.ops.flexsn_native
    return {ops.train: "train", ops.train.default: "train",
            ops.launch: "launch", ops.launch.default: "launch"}


def _through_no_ops(node):
    """`node` without the ``.to``/``.contiguous`` calls around it that
    return their input unchanged (same dtype and device; the operators
    take contiguous tensors)."""
    while isinstance(node, fx.Node) and node.op == "call_method" and \
            node.target in ("to", "contiguous"):
        src = node.args[0]
        before, after = src.meta.get("example_value"), node.meta.get("example_value")
        if not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor) or \
                before.dtype != after.dtype or before.device != after.device:
            return node
        node = src
    return node


def _result(call: fx.Node, index: int) -> Optional[fx.Node]:
    """The getitem of `call`'s result `index`, where the graph has one."""
    for user in call.users:
        if user.op == "call_function" and user.target is operator.getitem and \
                user.args[1] == index:
            return user
    return None


class _Call:
    """One operator call node and its binding's layout."""

    def __init__(self, node: fx.Node, kind: str):
        self.node, self.kind = node, kind
        self.ident, self.leaves = node.args[0], list(node.args[1])
        layout = _layouts.get(self.ident)
        self.layout = layout
        if layout is not None:
            ni, ns = layout[0], layout[1]
            self.inputs, self.states = self.leaves[:ni], self.leaves[ni:ni + ns]
            self.params = self.leaves[ni + ns:]

    def previous(self, calls: dict) -> Optional["_Call"]:
        """The call whose state results this one's state inputs are, where
        every state input is one."""
        if self.layout is None or not self.states:
            return None
        found = None
        for j, s in enumerate(self.states):
            src = _through_no_ops(s)
            if not (isinstance(src, fx.Node) and src.op == "call_function"
                    and src.target is operator.getitem):
                return None
            prev = calls.get(src.args[0])
            if prev is None or prev.layout is None or prev.kind != self.kind or \
                    src.args[1] != prev.layout[3][j] or (found is not None and found is not prev):
                return None
            found = prev
        return found


def _chains(gm: fx.GraphModule) -> list:
    kinds = _ops()
    calls = {n: _Call(n, kinds[n.target]) for n in gm.graph.nodes
             if n.op == "call_function" and n.target in kinds}
    previous = {c.node: c.previous(calls) for c in calls.values()}
    nexts = {}
    for call in calls.values():
        if previous[call.node] is not None:
            nexts.setdefault(previous[call.node].node, []).append(call)
    starts = [c for c in calls.values() if previous[c.node] is None and c.node in nexts]
    chains = []
    for start in starts:
        chain, at = [start], start
        while len(nexts.get(at.node, [])) == 1:
            at = nexts[at.node][0]
            chain.append(at)
        if len(chain) > 1:
            chains.append(chain)
    return chains


# Tensor methods that compute a value from their arguments alone: the same
# call on the same arguments gives the same value
_PURE_METHODS = frozenset({"to", "contiguous", "float", "double", "half", "bfloat16", "type",
                           "detach", "view", "reshape", "expand", "unsqueeze", "squeeze",
                           "flatten"})


def _mutated(gm: fx.GraphModule) -> set:
    """The nodes some op of `gm` changes in place (``x.add_(...)``,
    ``x += ...``, an operator with a mutable schema)."""
    found = set()
    for n in gm.graph.nodes:
        target = n.target
        if n.op == "call_method" and target.endswith("_") and not target.startswith("__"):
            found.add(n.args[0])
        elif n.op == "call_function":
            name = getattr(target, "__name__", "")
            schema = getattr(target, "_schema", None)
            if (target in (operator.iadd, operator.isub, operator.imul, operator.itruediv)
                    or (schema is not None and schema.is_mutable)
                    or (name.endswith("_") and not name.startswith("_"))):
                found.update(a for a in n.args if isinstance(a, fx.Node))
    return found


def _same_value(a, b, mutated: set, top: bool = True) -> bool:
    """Whether the call arguments `a` and `b` hold the same value: the same
    node, or the same pure conversion (``p.to(device)`` at every step) of
    the same graph values, which no op of the graph changes in place."""
    if a is b:
        return top or a not in mutated
    if isinstance(a, (list, tuple)):
        return isinstance(b, type(a)) and len(a) == len(b) and \
            all(_same_value(x, y, mutated, False) for x, y in zip(a, b))
    if not isinstance(a, fx.Node) or not isinstance(b, fx.Node):
        return not isinstance(a, fx.Node) and not isinstance(b, fx.Node) and \
            type(a) is type(b) and a == b
    if a.op != "call_method" or b.op != "call_method" or a.target != b.target or \
            a.target not in _PURE_METHODS or len(a.args) != len(b.args) or \
            a.kwargs.keys() != b.kwargs.keys():
        return False
    return all(_same_value(x, y, mutated, False) for x, y in zip(a.args, b.args)) and \
        all(_same_value(a.kwargs[k], b.kwargs[k], mutated, False) for k in a.kwargs)


def _refusal(chain: list, mutated: set) -> Optional[str]:
    """Why `chain` cannot be rolled exactly, or None (`mutated`: what the
    graph changes in place)."""
    first = chain[0]
    ni, ns, outs, states, final = first.layout
    if not final:
        return "its calls return state sequences"
    for call in chain[1:]:
        if call.layout[:2] != (ni, ns) or call.layout[2:] != (outs, states, final):
            return "its calls bind kernels of different layouts"
        if len(call.params) != len(first.params) or not all(
                _same_value(a, b, mutated) for a, b in zip(call.params, first.params)):
            return "its calls take different parameters"
        mine, theirs = _gradients.get(first.ident), _gradients.get(call.ident)
        if theirs is not None and (mine is None or any(
                t and not m for i, (m, t) in enumerate(zip(mine, theirs))
                if not ni <= i < ni + ns)):
            # the first call's binding would drop a later step's gradient
            return ("a later step differentiates an input or parameter that the "
                    "first step's call does not")
    if not all(isinstance(x, fx.Node) for call in chain for x in call.inputs):
        return "a step passes no input tensor"
    return None


def _reads_every_state(chain: list) -> bool:
    """Whether the loop reads a state result of a step before the last
    (beyond passing it to the next step)."""
    states = chain[0].layout[3]
    for t, call in enumerate(chain[:-1]):
        following = chain[t + 1].node
        for j in states:
            r = _result(call.node, j)
            if r is not None and any(not (u is following or _leads_only_to(u, following))
                                     for u in r.users):
                return True
    return False


def _leads_only_to(node: fx.Node, target: fx.Node) -> bool:
    """Whether `node` is a no-op conversion used only on the way to
    `target`."""
    if _through_no_ops(node) is node:
        return False
    return all(u is target or _leads_only_to(u, target) for u in node.users)


def _feeds_itself(chain: list) -> bool:
    """Whether a step's input depends on a call of the chain (a recurrent
    connection): the calls then cannot run as one."""
    calls = {c.node for c in chain}
    seen = set()
    stack = [x for c in chain for x in c.inputs if isinstance(x, fx.Node)]
    while stack:
        node = stack.pop()
        if node in calls:
            return True
        if node in seen:
            continue
        seen.add(node)
        stack.extend(a for a in node.all_input_nodes)
    return False


def _roll(gm: fx.GraphModule, chain: list, sequences: Optional[tuple] = None) -> list:
    """Replaces `chain` by one call of its first binding on the steps'
    inputs concatenated over time: each step's outputs are its rows of the
    rolled outputs, the last step's state results the rolled final states;
    with `sequences` ((id, recipe) of the binding that writes state
    sequences), every step's state results its last row of those.
    Returns the concatenations."""
    first, last = chain[0], chain[-1]
    ni, _, outs, states, _ = first.layout
    ident, recipe = sequences if sequences is not None else (first.ident, first.node.args[2])
    layout = _layouts[ident]
    graph = gm.graph
    with graph.inserting_before(last.node):
        inputs = [graph.call_function(torch.cat, ([c.inputs[i] for c in chain], 0))
                  for i in range(ni)]
        rolled = graph.call_function(first.node.target,
                                     (ident, inputs + first.states + first.params, recipe),
                                     dict(first.node.kwargs))
        counts = _row_counts(chain)
        for k, k_rolled in zip(outs, layout[2]):
            _rows_per_step(graph, chain, rolled, k, k_rolled, counts, last_row=False)
        for k, k_rolled in zip(states, layout[3]):
            if sequences is not None:
                _rows_per_step(graph, chain, rolled, k, k_rolled, counts, last_row=True)
                continue
            old = _result(last.node, k)
            if old is not None:
                old.replace_all_uses_with(graph.call_function(operator.getitem, (rolled, k_rolled)))
    return inputs


def _rows_per_step(graph: fx.Graph, chain: list, rolled: fx.Node, k: int, k_rolled: int,
                   counts: list, last_row: bool) -> None:
    """Replaces each call's result `k` by its rows of the rolled call's
    result `k_rolled` (its last row: a final state of a sequence)."""
    pieces = graph.call_function(
        _split_steps, (graph.call_function(operator.getitem, (rolled, k_rolled)), counts))
    for t, call in enumerate(chain):
        old = _result(call.node, k)
        if old is not None:
            piece = graph.call_function(operator.getitem, (pieces, t))
            if last_row:
                piece = graph.call_function(operator.getitem, (piece, -1))
            old.replace_all_uses_with(piece)


def _row_counts(chain: list) -> list:
    """The time rows each call's input #0 holds: numbers where the trace
    knows them (a call per step: 1), else the inputs, measured at run time
    (which keeps them alive until then)."""
    counts = []
    for call in chain:
        value = call.inputs[0].meta.get("example_value")
        rows = value.shape[0] if isinstance(value, torch.Tensor) else None
        counts.append(rows if isinstance(rows, int) else call.inputs[0])
    return counts


def _split_steps(seq: torch.Tensor, counts: list) -> tuple:
    """`seq` split into the rows each step's call gave."""
    return torch.split(seq, [c if isinstance(c, int) else c.shape[0] for c in counts], 0)


class _OverSteps(torch.nn.Module):
    """One step's stateless layers (`step`, an fx.GraphModule of
    ``(step value, *shared)``) applied to every step at once: under
    torch.vmap over the leading dimension, which computes each step as the
    step alone would; the results concatenated over time as the per-step
    calls' inputs were."""

    def __init__(self, step: fx.GraphModule, num_varying: int):
        super().__init__()
        self.step, self.num_varying = step, num_varying

    def forward(self, *args):
        varying, shared = args[:self.num_varying], args[self.num_varying:]
        # each step draws its own random numbers (dropout), as the loop's
        # steps do; like any op torch.compile compiles, not the eager ones
        out = torch.vmap(lambda *v: self.step(*v, *shared), randomness="different")(*varying)
        return out.flatten(0, 1)


def _step_leaf(nodes: list) -> Optional[tuple]:
    """(what stacks the step values `nodes`) where they are a tensor's rows
    0..T-1 in order (``x[t]``), or a rolled call's steps (its output rows):
    the tensor itself then, or its first T rows."""
    first = nodes[0]
    if not all(isinstance(n, fx.Node) and n.op == "call_function" and
               n.target is operator.getitem for n in nodes):
        return None
    sources = {n.args[0] for n in nodes}
    if len(sources) == 1 and [n.args[1] for n in nodes] == list(range(len(nodes))):
        source = first.args[0]
        value = source.meta.get("example_value")
        if isinstance(value, torch.Tensor) and value.dim() >= 1:
            return ("rows", source)
    # x[t] of a rolled call's split: its output rows, one per step
    inner = [n.args[0] for n in nodes]
    if all(n.args[1] == 0 for n in nodes) and all(
            isinstance(i, fx.Node) and i.op == "call_function" and i.target is operator.getitem
            for i in inner):
        splits = {i.args[0] for i in inner}
        if len(splits) == 1 and [i.args[1] for i in inner] == list(range(len(nodes))):
            split = inner[0].args[0]
            if split.op == "call_function" and split.target is _split_steps and \
                    all(c == 1 for c in split.args[1]):
                return ("rows", split.args[0])
    return None


def _match_steps(nodes: list, varying: list, shared: list, body: dict) -> bool:
    """Walks the per-step nodes `nodes` (one per step) back in lockstep:
    the same node in every step is shared, step values of one tensor are
    varying, and anything else must be the same op on matching arguments.
    Fills `varying` and `shared` (lists of node tuples / nodes) and `body`
    (step 0's node -> its place)."""
    first = nodes[0]
    if first in body:  # met before: every step's node must be its counterpart again
        return all(n is first or body.get(n) == ("copy", first) for n in nodes)
    if all(n is first for n in nodes):
        body[first] = ("shared", len(shared))
        shared.append(first)
        return True
    leaf = _step_leaf(nodes)
    if leaf is not None:
        body[first] = ("varying", len(varying))
        varying.append(leaf)
        return True
    if any(not isinstance(n, fx.Node) or n.op not in ("call_function", "call_method") or
           n.target != first.target or len(n.args) != len(first.args) or
           n.kwargs.keys() != first.kwargs.keys() for n in nodes):
        return False
    for position in range(len(first.args)):
        if not _match_arg([n.args[position] for n in nodes], varying, shared, body):
            return False
    for key in first.kwargs:
        if not _match_arg([n.kwargs[key] for n in nodes], varying, shared, body):
            return False
    body[first] = ("op", None)
    for n in nodes[1:]:
        body[n] = ("copy", first)
    return True


def _match_arg(args: list, varying, shared, body) -> bool:
    first = args[0]
    if isinstance(first, fx.Node):
        return all(isinstance(a, fx.Node) for a in args) and \
            _match_steps(args, varying, shared, body)
    if isinstance(first, (list, tuple)):
        return all(isinstance(a, type(first)) and len(a) == len(first) for a in args) and \
            all(_match_arg([a[i] for a in args], varying, shared, body)
                for i in range(len(first)))
    return all(type(a) is type(first) and a == first for a in args)


def _batch_stateless(gm: fx.GraphModule, cat: fx.Node) -> bool:
    """Replaces ``cat([f(x[0]), ..., f(x[T-1])])`` (a rolled call's input)
    by f applied to all steps at once, where every step's f is the same
    stateless computation; False where they differ."""
    steps = list(cat.args[0])
    varying, shared, body = [], [], {}
    if not _match_steps(steps, varying, shared, body) or not varying:
        return False
    # step 0's computation as a module of (step values..., shared...)
    sub = fx.Graph()
    env = {}
    places = [sub.placeholder(f"step{i}") for i in range(len(varying))] + \
        [sub.placeholder(f"shared{i}") for i in range(len(shared))]
    order = [n for n in gm.graph.nodes if body.get(n, (None,))[0] in ("op", "varying", "shared")]
    for n in order:
        kind, index = body[n]
        if kind == "varying":
            env[n] = places[index]
        elif kind == "shared":
            env[n] = places[len(varying) + index]
        else:
            env[n] = sub.node_copy(n, lambda a: env[a])
    sub.output(env[steps[0]])
    module = _OverSteps(fx.GraphModule(gm, sub), len(varying))
    name = f"flexsn_over_steps_{len([m for m in gm.children() if isinstance(m, _OverSteps)])}"
    gm.add_submodule(name, module)
    with gm.graph.inserting_before(cat):
        stacked = []
        for _, source in varying:
            value = source.meta.get("example_value")
            rows = len(steps)
            if isinstance(value, torch.Tensor) and value.shape[0] == rows:
                stacked.append(source)
            else:
                stacked.append(gm.graph.call_method("narrow", (source, 0, 0, rows)))
        batched = gm.graph.call_module(name, tuple(stacked) + tuple(shared))
    cat.replace_all_uses_with(batched)
    return True


def _unsplit_stacks(gm: fx.GraphModule) -> None:
    """``torch.stack`` of every step's row of a rolled output, in order
    (the loop's ``torch.stack(outputs)``) is that output: no copy."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not torch.stack or \
                node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0) != 0:
            continue
        leaf = _step_leaf(list(node.args[0])) if isinstance(node.args[0], (list, tuple)) \
            and node.args[0] else None
        if leaf is None:
            continue
        source = leaf[1]
        if source.op == "call_function" and source.target is operator.getitem and \
                any(u.op == "call_function" and u.target is _split_steps for u in source.users):
            node.replace_all_uses_with(source)


def _topologically_sorted(gm: fx.GraphModule) -> None:
    """Reorders `gm`'s nodes so that each comes after its inputs, keeping
    the traced order where it can (a rolled call's outputs are read by
    nodes that stood before its last input)."""
    nodes = list(gm.graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    waiting = {n: len(set(n.all_input_nodes)) for n in nodes}
    ready = [index[n] for n in nodes if waiting[n] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        n = nodes[heapq.heappop(ready)]
        order.append(n)
        for user in n.users:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, index[user])
    if len(order) != len(nodes):
        raise RuntimeError("flexsn.backend: internal error, a cycle after rolling")
    # moved in place: placeholders keep what Dynamo attached to them
    for before, node in zip(order, order[1:]):
        before.append(node)


# Libraries whose own neurons break Dynamo's graph inside their forward: a
# loop calling them runs step by step (Dynamo skips a frame whose loop
# breaks), so no backend sees the loop. By the path of their source.
_BREAKING = {
    "/snntorch/_neurons/": (
        "snnTorch", "its forward compares the state with None (mem == None)",
        "flexsn.backend captures snnTorch's Leaky, Synaptic, Alpha, Lapicque, RLeaky and "
        "RSynaptic (and subclasses that keep their step) without inhibition, state_quant "
        "or all_to_all=True; flexsn.from_snntorch(neuron) covers the same neurons"),
    "/norse/torch/": (
        "Norse", "its initial state sets requires_grad",
        "flexsn.backend captures Norse's LIF, LIFBox, LI, IAF, LIFAdEx and Izhikevich cells "
        "whose initial_state is the class's own; flexsn.from_norse(cell) covers the same "
        "cells"),
}
_warned: set = set()


def _warn_unconverted(gm: fx.GraphModule) -> None:
    """One LoopWarning per library whose own neuron code Dynamo hands over
    piece by piece: a graph whose outermost frame is that code (the sign
    that a loop calling it was not captured: a neuron whose options
    capture_libraries leaves to the library's forward)."""
    for n in gm.graph.nodes:
        trace = n.meta.get("stack_trace") or ""
        outermost = trace.split('File "', 1)[-1].split('"', 1)[0]
        for path, (lib, why, fix) in _BREAKING.items():
            if path in outermost and lib not in _warned:
                _warned.add(lib)
                warnings.warn(
                    f"flexsn.backend: {lib}'s own neuron code broke Dynamo's graph ({why}), "
                    "so a time loop that calls it runs one step at a time and cannot be "
                    f"rolled; {fix}", LoopWarning, stacklevel=3)


def _capture_snntorch() -> None:
    from . import snntorch as s
    for k in s._SPECS:
        k.forward = s.captured_forward(k.forward)


def _capture_norse() -> None:
    from norse.torch.module.snn import SNNCell
    from . import norse as n
    SNNCell.forward = n.captured_forward(SNNCell.forward)


# per library: the module whose import completes its neuron classes, and
# what captures them; a library is taken out once captured
_UNCAPTURED = {"snntorch": _capture_snntorch, "norse.torch": _capture_norse}


def capture_libraries() -> None:
    """Makes the forwards of snnTorch's and Norse's own neuron classes ones
    Dynamo captures without a graph break while it traces for
    flexsn.backend (flexsn.snntorch.captured_forward,
    flexsn.norse.captured_forward), so that a loop that calls them reaches
    the backend whole; outside such a trace they run the library's forward,
    as before. Done for the libraries the process has imported, and for the
    others when they are: the backend itself is called only after Dynamo
    traced the graph, too late to change how it traces."""
    for name in [n for n in _UNCAPTURED if n in sys.modules]:
        _UNCAPTURED.pop(name)()
    if _UNCAPTURED and not any(isinstance(f, _OnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _OnImport())


class _OnImport(importlib.abc.MetaPathFinder):
    """Runs capture_libraries once a library of _UNCAPTURED is imported: it
    finds the module as the other finders do and captures after the
    module's code ran."""

    def find_spec(self, name, path, target=None):
        if name not in _UNCAPTURED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            capture_libraries()
            if not _UNCAPTURED and self in sys.meta_path:
                sys.meta_path.remove(self)
        loader.exec_module = exec_module
        return spec


class Backend:
    """A torch.compile backend: ``torch.compile(model, backend=flexsn.backend)``.

    ``flexsn.Backend(then=..., batch_steps=...)`` configures one: `then`, the
    backend that compiles the rolled graph (a name torch.compile takes, or a
    backend callable; Inductor by default); `batch_steps`, whether the
    stateless layers that feed a rolled neuron run once over all steps
    (under torch.vmap: a Linear's T products become one, which rounds as a
    batched product does, as in flexsn.multistep) or stay one per step, so
    that every number is the loop's bit for bit.

    torch.compile's `mode` and `options` go to Inductor as they would
    without this backend (``mode="reduce-overhead"``: the compiled step
    replayed from CUDA graphs); another `then` takes none."""

    rolls_time_loops = True  # what the library forwards of capture_libraries look for

    def __init__(self, then: Union[str, Callable] = "inductor", batch_steps: bool = True):
        self.then, self.batch_steps = then, batch_steps
        if _made_by_users:
            capture_libraries()

    def __call__(self, gm: fx.GraphModule, example_inputs, mode: Optional[str] = None,
                 options: Optional[dict] = None):
        inductor = self.then == "inductor"
        if (mode not in (None, "default") or options) and not inductor:
            raise TypeError(f"torch.compile's mode and options configure Inductor; "
                            f"flexsn.Backend(then={self.then!r}) takes none")
        gm.meta["flexsn_rolled"] = self.roll(gm, self.batch_steps)
        if not gm.meta["flexsn_rolled"]:
            _warn_unconverted(gm)
        gm.recompile()
        if inductor:
            from torch._inductor import list_mode_options
            from torch._inductor.compile_fx import compile_fx
            patches = {**(list_mode_options(mode) if mode not in (None, "default") else {}),
                       **(options or {})}
            return compile_fx(gm, example_inputs, config_patches=patches or None)
        then = self.then
        if isinstance(then, str):
            from torch._dynamo import lookup_backend
            then = lookup_backend(then)
        return then(gm, example_inputs)

    @staticmethod
    def roll(gm: fx.GraphModule, batch_steps: bool = True) -> int:
        """Rolls every chain it can in `gm` (in place); returns how many."""
        from . import _inline
        # SpikingJelly's operator and inline neurons become per-step calls,
        # rolled below
        if _inline.spikingjelly_calls(gm) + _inline.outline(gm):
            _topologically_sorted(gm)
        rolled, cats, mutated = 0, [], _mutated(gm)
        for chain in _chains(gm):
            reason = _refusal(chain, mutated) or (
                "a step's input depends on an earlier step's call" if _feeds_itself(chain)
                else None)
            sequences = None
            if reason is None and _reads_every_state(chain):
                find = _sequences.get(chain[0].ident)
                sequences = find() if find is not None else None
                if sequences is None:
                    reason = ("the loop reads the states of every step, and no binding "
                              "that writes state sequences is at hand")
            if reason is not None:
                warnings.warn(f"flexsn.backend: the {len(chain)} calls from "
                              f"{chain[0].node.name} stay one per step: {reason}",
                              LoopWarning, stacklevel=2)
                continue
            cats += _roll(gm, chain, sequences)
            rolled += 1
        if rolled:
            _topologically_sorted(gm)
            if batch_steps and any([_batch_stateless(gm, cat) for cat in cats]):
                _topologically_sorted(gm)
            _unsplit_stacks(gm)
            gm.graph.eliminate_dead_code()  # the per-step calls
            gm.graph.lint()
        return rolled


# The package's own instance is made when this module is imported, which
# every use of the kernels does (they note their layouts here): it captures
# the libraries when a user reaches for it (flexsn.__getattr__), not before.
_made_by_users = False
backend = Backend()
_made_by_users = True
