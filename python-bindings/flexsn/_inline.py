"""Neurons written inline in a time loop, for flexsn.backend.

A loop such as ``mem = beta * mem + cur; spk = spike_fn(mem - 1); mem = mem -
spk`` unrolled by Dynamo is T copies of the same nodes, each copy reading
the previous copy's ``mem``. This pass finds those copies, the values
carried from one copy to the next (the states) and the elementwise nodes
that carry them (the core), compiles that core once as a flexsn core, and
replaces each copy's core nodes by one call of the package's operator over
that step, its state inputs the previous call's state results: the chain
flexsn.backend then rolls into one scan, as it does for flexsn's modules.

How the copies are found: the loop reads its input as ``x[t]`` for t = 0,
1, ..., T-1, and Dynamo emits the nodes of each iteration in program order,
so the iterations are equal stretches of the graph between those reads.
Every node of copy t must be the same op as its counterpart in copy 1, its
arguments the counterpart's (a node of the same copy, of the copy before,
the same value outside the loop, or ``x[t]`` itself); the first copy reads
the states' initial values where the others read the copy before, and the
last may lack nodes whose only use would have been the next copy.

The spike function is the one the code calls: flexsn's surrogates (one
``flexsn.spike`` node), or any ``torch.autograd.Function`` (snnTorch's,
SpikingJelly's, Norse's) whose backward is the incoming gradient times a
function of the saved values, read from the backward graph Dynamo traced.
Anything else that carries a state (a reduction, a layer, an in-place op,
a backward of another form) leaves the loop as it is, with a LoopWarning
that names the node.
"""

from __future__ import annotations

import operator
import warnings
from collections import Counter
from typing import Optional

import torch
from torch import fx

from ._errors import LoopWarning

# Elementwise ops a core may use: by function name (call_function) and by
# method name (call_method). Each is the same per element at any shape.
_ELEMENTWISE = frozenset({
    "add", "sub", "mul", "truediv", "div", "neg", "pos", "pow", "abs", "gt", "ge", "lt",
    "le", "eq", "ne", "and_", "or_", "xor", "invert", "where", "clamp", "clamp_min",
    "clamp_max", "clip", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt",
    "rsqrt", "sigmoid", "tanh", "sin", "cos", "atan", "erf", "erfc", "relu", "heaviside",
    "maximum", "minimum", "fmax", "fmin", "sign", "sgn", "floor", "ceil", "round", "trunc",
    "frac", "reciprocal", "square", "lerp", "addcmul", "addcdiv", "logical_and",
    "logical_or", "logical_not", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_not",
    "float", "double", "half", "bfloat16", "to", "type_as", "detach", "clone", "contiguous",
    "zeros_like", "ones_like", "full_like", "masked_fill", "softplus", "silu", "gelu",
    "leaky_relu", "hardtanh", "elu", "sub_rsub", "rsub", "fmod", "remainder", "hypot",
    "atan2", "copysign", "isnan",
})
_AUTOGRAD_FUNCTION = "autograd_function_apply"


def _name(node: fx.Node) -> str:
    if node.op == "call_method":
        return node.target
    return getattr(node.target, "__name__", str(node.target))


class _Refused(Exception):
    """An inline core that cannot be compiled: the node and the reason."""


# -- the copies ---------------------------------------------------------------

def _rows(nodes: list) -> Optional[tuple]:
    """(source, [x[0], ..., x[T-1]]) of the tensor the loop reads row by row
    (T >= 2, the reads in order, equally far apart), or None."""
    by_source: dict = {}
    for n in nodes:
        if n.op == "call_function" and n.target is operator.getitem and \
                isinstance(n.args[1], int) and isinstance(n.args[0], fx.Node) and \
                isinstance(n.args[0].meta.get("example_value"), torch.Tensor):
            by_source.setdefault(n.args[0], {}).setdefault(n.args[1], n)
    best = None
    for source, rows in by_source.items():
        T = 0
        while T in rows:
            T += 1
        if T >= 2 and (best is None or T > len(best[1])):
            best = (source, [rows[t] for t in range(T)])
    return best


class _Template:
    """The loop's copies aligned: slots[t][k] is copy t's node k (None where
    the last copy lacks it), sig[k] what node k computes from what, and
    inits[k] the values copy 0 reads where the others read node k of the
    copy before."""

    def __init__(self, gm: fx.GraphModule, blocks: list, length: int):
        self.gm, self.length = gm, length
        self.slots = blocks
        self.where = {n: (t, k) for t, b in enumerate(blocks) for k, n in enumerate(b)
                      if n is not None}
        self.sig, self.inits = [None] * length, {}

    def arg(self, a, t):
        if isinstance(a, fx.Node):
            at = self.where.get(a)
            if at is None:
                return ("outer", a)
            if at[0] == t:
                return ("in", at[1])
            if at[0] == t - 1:
                return ("prev", at[1])
            raise _Refused(a, "reads a value from more than one step back")
        if isinstance(a, (list, tuple)):
            return (type(a).__name__,) + tuple(self.arg(x, t) for x in a)
        if isinstance(a, (torch.dtype, torch.device, str, bool, int, float, type(None))):
            return ("const", type(a).__name__, repr(a))
        return ("const", type(a).__name__, id(a))

    def node_sig(self, n: fx.Node, t: int):
        if n.op == "call_function" and n.target is operator.getitem and \
                isinstance(n.args[1], int) and n.args[1] == t and \
                self.where.get(n.args[0]) is None and \
                isinstance(n.args[0].meta.get("example_value"), torch.Tensor):
            return ("row", n.args[0])
        if n.op == "get_attr":
            sub = getattr(self.gm, n.target, None)
            key = _graph_key(sub) if isinstance(sub, fx.GraphModule) else n.target
            return ("get_attr", key)
        if n.op not in ("call_function", "call_method"):
            return None
        return (n.op, n.target, self.arg(tuple(n.args), t),
                tuple(sorted((k, self.arg(v, t)) for k, v in n.kwargs.items())))


def _graph_key(gm: fx.GraphModule) -> tuple:
    """What a subgraph computes, whatever its nodes are named: each node's
    op, target and arguments (nodes by position)."""
    at = {n: i for i, n in enumerate(gm.graph.nodes)}

    def arg(a):
        if isinstance(a, fx.Node):
            return ("node", at[a])
        if isinstance(a, (list, tuple)):
            return (type(a).__name__,) + tuple(arg(x) for x in a)
        if isinstance(a, dict):
            return ("dict",) + tuple(sorted((k, arg(v)) for k, v in a.items()))
        return ("const", type(a).__name__, repr(a))
    return tuple((n.op, n.target if n.op != "placeholder" else None, arg(n.args), arg(n.kwargs))
                 for n in gm.graph.nodes)


def _align(gm: fx.GraphModule, nodes: list, pos: list, offset: int, period: int):
    """The template of the copies starting `offset` nodes before each row
    read, or None where they are not copies of one another."""
    T = len(pos)
    if pos[0] - offset < 0:
        return None
    blocks = [nodes[p - offset:p - offset + period] for p in pos[:-1]]
    tail = nodes[pos[-1] - offset:]
    tpl = _Template(gm, blocks, period)
    try:
        ref = [tpl.node_sig(n, 1) for n in blocks[1]]
        if any(s is None for s in ref):
            return None
        for t in range(2, T - 1):
            if [tpl.node_sig(n, t) for n in blocks[t]] != ref:
                return None
        if not all(_matches_first(tpl, n, ref[k], k) for k, n in enumerate(blocks[0])):
            return None
    except _Refused:
        return None
    tpl.sig = ref
    return tpl if _place_last(tpl, tail, T) else None


def _matches_first(tpl: _Template, n: fx.Node, ref, k: int) -> bool:
    """Copy 0's node k is ref but for the initial values it reads (noted
    in tpl.inits)."""
    got = tpl.node_sig(n, 0)
    if got is None or got[:2] != ref[:2] or len(got) != len(ref):
        return got == ref

    def same(g, r, path):
        if isinstance(r, tuple) and r and r[0] == "prev":
            if isinstance(g, tuple) and g and g[0] == "outer":
                tpl.inits.setdefault(r[1], set()).add(g[1])
                return True
            return False
        if isinstance(r, tuple) and isinstance(g, tuple) and len(r) == len(g) and r and \
                r[0] in ("tuple", "list"):
            return all(same(x, y, path + (i,)) for i, (x, y) in enumerate(zip(g[1:], r[1:])))
        return g == r
    return all(same(g, r, (i,)) for i, (g, r) in enumerate(zip(got[2:], ref[2:])))


def _place_last(tpl: _Template, tail: list, T: int) -> bool:
    """Copy T-1's nodes in its slots, skipping the slots whose only use is
    the copy that would follow (dead in the last copy)."""
    only_next = _only_read_by_next(tpl, set(tail))
    last, i = [], 0
    for k in range(tpl.length):
        n = tail[i] if i < len(tail) else None
        try:
            ok = n is not None and tpl.node_sig(n, T - 1) == tpl.sig[k]
        except _Refused:
            ok = False
        if ok:
            last.append(n)
            tpl.where[n] = (T - 1, k)
            i += 1
        elif k in only_next:
            last.append(None)
        else:
            return False
    tpl.slots.append(last)
    return True


def _only_read_by_next(tpl: _Template, tail: set) -> set:
    """Slots read by nothing but the next copy."""
    read = {"in": set(), "prev": set()}

    def walk(s):
        if isinstance(s, tuple) and s:
            if s[0] in ("in", "prev") and len(s) == 2 and isinstance(s[1], int):
                read[s[0]].add(s[1])
            else:
                for x in s:
                    walk(x)
    for s in tpl.sig:
        walk(s[2:] if s[0] in ("call_function", "call_method") else ())
    copy1 = tpl.slots[1]
    outside = {k for k, n in enumerate(copy1)
               if any(u not in tpl.where and u not in tail for u in n.users)}
    return read["prev"] - read["in"] - outside


# Ops that compute a value from their arguments alone (no randomness, no
# in-place change): those _hoist_first_step may move.
_PURE = _ELEMENTWISE | {"zeros", "ones", "full", "tensor", "scalar_tensor", "new_zeros",
                        "new_ones", "new_full", "expand", "expand_as", "view", "reshape",
                        "unsqueeze", "squeeze"}


def _hoist_first_step(gm: fx.GraphModule, rows: list) -> bool:
    """Moves before the loop the nodes of its first step that make an
    initial state: nodes that read nothing of any step, of ops the first
    step has more of than the second (snnTorch's zeros, Norse's
    ``v_leak.detach().clone()``; not an op of the update that happens to
    read only initial values). Only pure ops move, in their order, after
    all they read. Returns whether any moved: the steps may then be copies
    of one another (find_copies checks that)."""
    if len(rows) < 3:
        return False
    nodes = list(gm.graph.nodes)
    at = {n: i for i, n in enumerate(nodes)}
    first, second, third = at[rows[0]], at[rows[1]], at[rows[2]]

    def shape(n):
        return (n.op, n.target, repr(fx.node.map_arg((n.args, n.kwargs), lambda a: None)))
    excess = Counter(shape(n) for n in nodes[first:second])
    excess.subtract(shape(n) for n in nodes[second:third])
    moved: list = []
    for n in nodes[first:second]:
        if n.op in ("call_function", "call_method") and _name(n) in _PURE and \
                n is not rows[0] and excess[shape(n)] > 0 and \
                all(at[a] < first or a in moved for a in n.all_input_nodes):
            excess[shape(n)] -= 1
            moved.append(n)
    for n in moved:
        rows[0].prepend(n)
    return bool(moved)


def find_copies(gm: fx.GraphModule) -> Optional[_Template]:
    """The template of the loop's copies in `gm`, or None."""
    nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    found = _rows(nodes)
    if found is None:
        return None
    if _hoist_first_step(gm, found[1]):
        nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    index = {n: i for i, n in enumerate(nodes)}
    pos = [index[r] for r in found[1]]
    period = pos[1] - pos[0]
    # copy 1 is the reference: a whole copy with a copy on each side
    if len(pos) < 3 or period <= 0 or any(b - a != period for a, b in zip(pos, pos[1:])):
        return None
    for offset in range(period):
        tpl = _align(gm, nodes, pos, offset, period)
        if tpl is not None:
            return tpl
    return None


# -- the cores ----------------------------------------------------------------

def _reads(sig) -> tuple:
    """(slots of the same copy, slots of the copy before) `sig` reads."""
    same, before = set(), set()

    def walk(s):
        if isinstance(s, tuple) and s:
            if s[0] in ("in", "prev") and len(s) == 2 and isinstance(s[1], int):
                (same if s[0] == "in" else before).add(s[1])
            elif s[0] != "outer":
                for x in s:
                    walk(x)
    if sig[0] in ("call_function", "call_method"):
        walk(sig[2:])
    return same, before


def _carrying_groups(tpl: _Template) -> list:
    """The slots that carry a state from copy to copy, in groups: the
    strongly connected parts of the copy's graph (edges from the slot read
    to its reader, those from the copy before included) that hold an edge
    from the copy before."""
    n = tpl.length
    succ = [set() for _ in range(n)]
    back = []
    for k, s in enumerate(tpl.sig):
        same, before = _reads(s)
        for j in same | before:
            succ[j].add(k)
        back += [(j, k) for j in before]
    reach = []
    for k in range(n):
        seen, stack = set(), [k]
        while stack:
            for m in succ[stack.pop()]:
                if m not in seen:
                    seen.add(m)
                    stack.append(m)
        reach.append(seen)
    groups, placed = [], set()
    for j, k in back:
        if j in placed or j not in reach[k] and j != k:
            continue
        group = sorted(m for m in range(n) if m == j or (m in reach[j] and j in reach[m]))
        placed.update(group)
        groups.append(group)
    return groups


def _is_function_spike(node: fx.Node) -> bool:
    return node.op == "call_function" and _name(node) == _AUTOGRAD_FUNCTION


def _is_flexsn_spike(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target in (
        torch.ops.flexsn.spike, torch.ops.flexsn.spike.default)


def _linear_in_gradient(bwd: fx.GraphModule, num_grads: int) -> bool:
    """Whether `bwd` returns, for the first operand, its first incoming
    gradient times a value that does not depend on any gradient (clones and
    products only), and nothing for the others."""
    places = [n for n in bwd.graph.nodes if n.op == "placeholder"]
    if len(places) < num_grads or any(p.users for p in places[1:num_grads]):
        return False
    dep = {places[0]}
    for n in bwd.graph.nodes:
        if n.op not in ("call_function", "call_method") or \
                not any(a in dep for a in n.all_input_nodes):
            continue
        name, args = _name(n), list(n.args)
        tensors = [a for a in args if isinstance(a, fx.Node)]
        if name in ("clone", "contiguous") and args[0] in dep:
            pass
        elif name == "mul" and sum(a in dep for a in tensors) == 1 and len(args) == 2:
            pass
        elif name in ("truediv", "div") and args[0] in dep and \
                not (isinstance(args[1], fx.Node) and args[1] in dep):
            pass
        else:
            return False
        dep.add(n)
    out = next(n for n in bwd.graph.nodes if n.op == "output").args[0]
    out = out if isinstance(out, (list, tuple)) else (out,)
    return len(out) >= 1 and out[0] in dep and all(o is None for o in out[1:])


def _function_spike(fwd, bwd, *operands, **_):
    """The autograd function's forward value, whose gradient is its
    backward's factor g (read with an incoming gradient of one): x - x is
    zero, so the value is the function's; where g or x is not finite the
    term is NaN and is dropped (a gradient of zero there)."""
    results, saved = fwd(*operands)
    results = (results,) if isinstance(results, torch.Tensor) else results
    out, x = results[0], operands[0]
    g = bwd(torch.ones_like(out), *([None] * (len(results) - 1)), *saved)[0]
    term = (x - x.detach()) * g.detach()
    return (out.detach() + torch.where(torch.isnan(term), torch.zeros_like(term), term),)


def _check_op(tpl: _Template, node: fx.Node) -> None:
    """Raises _Refused unless a core can compute `node`: an elementwise op,
    a spike function whose backward is linear in the gradient, or its first
    result."""
    if _is_flexsn_spike(node):
        return
    if _is_function_spike(node):
        fwd, bwd = (getattr(tpl.gm, a.target) for a in node.args[:2])
        results = next(n for n in fwd.graph.nodes if n.op == "output").args[0][0]
        num = len(results) if isinstance(results, (list, tuple)) else 1
        if not _linear_in_gradient(bwd, num):
            raise _Refused(node, "its autograd function's backward is not the incoming "
                                 "gradient times a function of the saved values")
        if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
            raise _Refused(node, "a result of its autograd function other than the "
                                 "first is read")
        return
    if node.op == "call_function" and node.target is operator.getitem:
        src = node.args[0]
        if isinstance(src, fx.Node) and _is_function_spike(src) and node.args[1] == 0:
            return
    if node.op in ("call_function", "call_method") and _name(node) in _ELEMENTWISE:
        return
    if node.op == "call_function" and node.target is torch.as_tensor and \
            len(node.args) == 1 and not node.kwargs and \
            isinstance(node.args[0], (fx.Node, float, int)):
        return  # a tensor itself, or a 0-d one of a number (Norse's threshold's alpha)
    raise _Refused(node, f"the state it carries passes {_name(node)}, which is not an "
                         "elementwise op flexsn compiles inline")


def _wants_grad(node: fx.Node) -> bool:
    v = node.meta.get("example_value")
    values = v if isinstance(v, (tuple, list)) else [v]  # a spike function's results
    return any(getattr(x, "requires_grad", False) for x in values)


def _live(gm: fx.GraphModule) -> set:
    """The nodes a gradient from the graph's results reaches: those that
    require grad and are a result, or are read by such a node (an op whose
    value requires grad passes its gradient to every argument that does)."""
    live: set = set()
    for n in reversed(gm.graph.nodes):
        if n.op == "output" or n in live:
            live.update(a for a in n.all_input_nodes if _wants_grad(a))
    return live


def _neurons(tpl: _Template, groups: list) -> list:
    """The carrying groups joined into neurons, for one core each: a group
    that reads another's value of the same step joins it (a synaptic
    current and the membrane it feeds), and an elementwise node computed
    from groups' values of the step alone joins them (a spike that no reset
    reads, as snnTorch's, whose reset compares the membrane): its per-step
    work then leaves the loop with the rest of the neuron. Groups of the
    package's own operator calls stay as they are."""
    copy = tpl.slots[1]
    parent = list(range(len(groups)))

    def find(g):
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g
    owner = {k: g for g, group in enumerate(groups) for k in group}
    kept = {g for g, group in enumerate(groups) if any(_is_operator_call(copy[k]) for k in group)}
    for k in range(tpl.length):
        same, before = _reads(tpl.sig[k])
        same = {j for j in same if copy[j].op != "get_attr"}  # a spike function's bodies
        if k not in owner:
            if before or not same or any(j not in owner or owner[j] in kept for j in same):
                continue
            try:
                _check_op(tpl, copy[k])
            except _Refused:
                continue
            owner[k] = owner[min(same)]
        if owner[k] in kept:
            continue
        for j in same:
            if j in owner and owner[j] not in kept:
                parent[find(owner[j])] = find(owner[k])
    joined: dict = {}
    for k, g in owner.items():
        joined.setdefault(find(g), []).append(k)
    return sorted(sorted(v) for v in joined.values())


class _Core:
    """One inline neuron of the template: its slots (`group`), per-step
    inputs, states (with their initial values), parameters (values from
    outside the loop) and outputs."""

    def __init__(self, tpl: _Template, group: list, mutated: set, live: set):
        self.tpl, self.group, self.live = tpl, group, live
        members = set(group)
        copy = tpl.slots[1]
        carried = {j for k in group for j in _reads(tpl.sig[k])[1] if j in members}
        if not carried:
            raise _Refused(copy[group[0]], "internal error: a group that carries no state")
        self._reference(copy[min(carried)])
        # nodes the core also computes, not moved into it: a comparison of
        # the input that feeds a choice, say (its value is not a float
        # sequence a kernel can read)
        self.recomputed: set = set()
        # values of the step before that carry no state of their own (a
        # delay line): a state of the core whose new value is the input
        self.delays: set = set()
        inputs, params, todo = set(), [], list(group)
        while todo:
            node = copy[todo.pop()]
            _check_op(self.tpl, node)
            same, before = _reads(tpl.sig[tpl.where[node][1]])
            for j in same - members - self.recomputed:
                if copy[j].op == "get_attr":
                    continue
                if self._recomputable(copy[j]):
                    self.recomputed.add(j)
                    inputs.discard(j)
                    todo.append(j)
                else:
                    inputs.add(j)
            self.delays |= before - members
            for a in node.all_input_nodes:
                if tpl.where.get(a) is None and a not in params:
                    params.append(a)
        changed = [p for p in params if p in mutated]
        if changed:
            raise _Refused(changed[0], "an op of the loop changes it in place, which "
                                       "one call over all steps would read once")
        if not inputs - self.delays:
            raise _Refused(copy[group[0]], "it reads no value of the step (an input)")
        self.inputs = sorted(inputs | self.delays)
        self.states = sorted(carried | self.delays)
        self.params = params
        self.body = sorted(members | self.recomputed)
        self.inits = []
        for j in self.states:
            init = tpl.inits.get(j, set())
            if len(init) != 1:
                raise _Refused(copy[j], "its first step starts from more than one value")
            self.inits.append(next(iter(init)))
        # an output: a value read outside the core at some step; a state
        # read only after the last step is the call's final state instead
        every, T = _members_of(tpl, members), len(tpl.slots)
        self.outputs = [k for k in group if any(
            u not in every for t in range(T - 1 if k in carried else T)
            for u in _users(tpl, t, k))]
        self._check_values()

    def differentiates(self, reads) -> bool:
        """Whether the loop's gradient reaches a value through the core
        nodes `reads` that read it (at some step). Where it does not (the
        value passes only comparisons, say), the loop leaves its gradient
        None, and the call must not make it a zero."""
        return any(b[k] in self.live for b in self.tpl.slots for k in reads
                   if b[k] is not None)

    def readers(self, value) -> list:
        """The core's slots that read `value`: a parameter (a node from
        outside the loop) or an input or state slot."""
        copy = self.tpl.slots[1]
        if isinstance(value, fx.Node):
            return [k for k in self.body if value in copy[k].all_input_nodes]
        return [k for k in self.body if value in set().union(*_reads(self.tpl.sig[k]))]

    def _reference(self, state: fx.Node) -> None:
        value = state.meta.get("example_value")
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            raise _Refused(state, "its state is not a floating-point tensor")
        self.step, self.dtype, self.device = tuple(value.shape), value.dtype, value.device
        if value.dtype in (torch.float16, torch.bfloat16):
            raise _Refused(state, f"its state is {value.dtype}: the loop rounds every op to "
                                  "it, a fused kernel computes in float32 and rounds only "
                                  "what it stores (keep the state in float32 to roll it)")

    def _recomputable(self, node: fx.Node) -> bool:
        """Whether an input node is better computed inside the core: its
        value is not a float of the step's shape and dtype, and it is an
        elementwise op (not the loop's read of x[t])."""
        v = node.meta.get("example_value")
        if isinstance(v, torch.Tensor) and tuple(v.shape) == self.step and \
                v.dtype == self.dtype:
            return False
        try:
            _check_op(self.tpl, node)
        except _Refused:
            return False
        return not (node.op == "call_function" and node.target is operator.getitem)

    def _check_values(self) -> None:
        copy = self.tpl.slots[1]
        for k in self.inputs + self.states:
            v = copy[k].meta.get("example_value")
            if not isinstance(v, torch.Tensor) or tuple(v.shape) != self.step or \
                    v.dtype != self.dtype or v.device != self.device:
                raise _Refused(copy[k], f"its value is not a {self.dtype} tensor of the "
                                        f"state's shape {self.step} on {self.device}")
        # what a value from outside the loop is converted to before the
        # call: (node, dtype, device) where it differs from the node's
        self.conversions = {}
        for p in self.params + self.inits:
            v = p.meta.get("example_value")
            # a 0-d CPU tensor is read as a number by ops on any device (Norse
            # keeps its parameters so): the same value on the core's device
            moved = isinstance(v, torch.Tensor) and v.device != self.device and \
                v.dim() == 0 and v.device.type == "cpu"
            if not isinstance(v, torch.Tensor) or v.device != self.device and not moved or \
                    not v.is_floating_point() and (p in self.inits or not self._promoted(p)):
                raise _Refused(p, "a value it reads from outside the loop is not a "
                                  f"floating-point tensor on {self.device}")
            if moved or not v.is_floating_point():
                self.conversions[p] = (v.dtype if v.is_floating_point() else self.dtype,
                                       self.device)
            try:
                torch.broadcast_shapes(tuple(v.shape), self.step)
            except RuntimeError:
                raise _Refused(p, f"shape {tuple(v.shape)} does not broadcast to the "
                                  f"state's {self.step}") from None
            if torch.broadcast_shapes(tuple(v.shape), self.step) != self.step:
                raise _Refused(p, f"shape {tuple(v.shape)} widens the state's {self.step}")

    def _promoted(self, p: fx.Node) -> bool:
        """Whether integer parameter `p` meets only arithmetic with a result
        in the core's float dtype, which converts it to that dtype first (so
        converting it before the call gives the same numbers)."""
        body = {self.tpl.slots[1][k] for k in self.body}
        users = [u for u in p.users if u in body]
        return bool(users) and all(
            _name(u) in ("add", "sub", "mul", "truediv", "div", "rsub") and
            getattr(u.meta.get("example_value"), "dtype", None) == self.dtype for u in users)

    def dtype_of(self, p: fx.Node) -> torch.dtype:
        """The dtype the core reads value `p` from outside the loop in."""
        return self.conversions[p][0] if p in self.conversions else p.meta["example_value"].dtype

    def function(self):
        """The core as a function of (inputs, states, params): outputs, then
        new states."""
        tpl, copy = self.tpl, self.tpl.slots[1]

        def core(*args):
            it = iter(args)
            given = {("in", j): next(it) for j in self.inputs}
            given.update({("prev", j): next(it) for j in self.states})
            outer = {p: next(it) for p in self.params}
            done = {}

            def value(a):
                t, k = tpl.where.get(a, (None, None))
                if t is None:
                    return outer[a]
                if t == 0:
                    return given[("prev", k)]
                if k in done:
                    return done[k]
                if copy[k].op == "get_attr":
                    return getattr(tpl.gm, copy[k].target)
                return given[("in", k)]
            for k in self.body:
                node = copy[k]
                args_ = fx.node.map_arg(node.args, value)
                kwargs = fx.node.map_arg(node.kwargs, value)
                if _is_function_spike(node):
                    done[k] = _function_spike(*args_, **kwargs)
                elif node.op == "call_method":
                    done[k] = getattr(args_[0], node.target)(*args_[1:], **kwargs)
                else:
                    done[k] = node.target(*args_, **kwargs)
            return tuple(done[k] for k in self.outputs) + tuple(
                given[("in", j)] if j in self.delays else done[j] for j in self.states)
        return core


def _members_of(tpl: _Template, group: set) -> set:
    """Every copy's nodes of the slots in `group`."""
    return {n for b in tpl.slots for k, n in enumerate(b) if k in group and n is not None}


def _users(tpl: _Template, t: int, k: int) -> list:
    n = tpl.slots[t][k]
    return [] if n is None else list(n.users)


# -- the calls ----------------------------------------------------------------

def _with_value(node: fx.Node, fn, *values) -> fx.Node:
    """Gives `node` the example value fn(*values) (fake tensors compute in
    their own mode) where the trace gave its inputs one: the roller reads
    row counts and shapes from them."""
    if all(isinstance(v, torch.Tensor) for v in values):
        try:
            node.meta["example_value"] = fn(*values)
        except Exception:  # noqa: BLE001 - then left unknown, read at run time
            pass
    return node


def _bindings(core: _Core, compiled) -> list:
    """Per copy, (id, training, recipe) of the binding its call runs (made
    before the graph changes: a configuration that fails leaves it as it
    was). One binding for every copy, differentiating what any copy needs
    (a gradient nobody asks for is dropped), as one rolled call must."""
    from . import _compiled, _ops
    handle = _ops.handle_of(compiled)
    p_dtypes = tuple(core.dtype_of(p) for p in core.params)
    p_scalar = tuple(p.meta["example_value"].numel() == 1 for p in core.params)
    wants = lambda n: bool(getattr(n.meta.get("example_value"), "requires_grad", False))  # noqa: E731
    inputs = [any(wants(n) for n in column) and core.differentiates(core.readers(j))
              for j, column in zip(core.inputs, zip(*(_step_inputs(core, block)
                                                      for block in core.tpl.slots)))]
    params = [wants(p) and core.differentiates(core.readers(p)) for p in core.params]
    mask = None
    if torch.is_grad_enabled() and any(inputs + params + [wants(i) for i in core.inits]):
        # after the first step the states carry gradients
        mask = tuple(inputs + [True] * len(core.states) + params)
    ident, training, _, last_steps, recipe = _ops._binding_ids(
        handle, core.dtype, core.device, p_dtypes, p_scalar, mask, False,
        _compiled.recompute_active())
    if last_steps:
        raise _Refused(core.tpl.slots[1][core.group[0]], "its configuration has no binding "
                                                         "that returns final states")
    return [(ident, training, recipe)] * len(core.tpl.slots)


def _step_inputs(core: _Core, block: list) -> list:
    """A copy's input nodes for its call. The last copy may lack a delay
    line's value (only a next step would read it): any input of the step
    stands in, since only the unread final state depends on it."""
    some = next(block[j] for j in core.inputs if j not in core.delays)
    return [some if block[j] is None else block[j] for j in core.inputs]


def _expanded(graph: fx.Graph, node: fx.Node, like: fx.Node) -> fx.Node:
    """`node` broadcast to the shape of `like` (a value of the step's
    shape, which may be symbolic: a batch size Dynamo made dynamic),
    contiguous."""
    v, w = node.meta.get("example_value"), like.meta.get("example_value")
    e = _with_value(graph.call_method("expand_as", (node, like)), lambda a, b: a.expand_as(b),
                    v, w)
    return _with_value(graph.call_method("contiguous", (e,)), lambda a: a.contiguous(),
                       e.meta.get("example_value"))


def _converted(graph: fx.Graph, core: _Core, node: fx.Node) -> fx.Node:
    """`node` in the dtype and on the device the core reads it in."""
    if node not in core.conversions:
        return node
    dtype, device = core.conversions[node]
    return _with_value(graph.call_method("to", (node,), {"dtype": dtype, "device": device}),
                       lambda a: a.to(dtype=dtype, device=device), node.meta["example_value"])


def _emit_calls(core: _Core, compiled, gm: fx.GraphModule) -> None:
    """Each copy's core nodes replaced by one operator call over its step."""
    from . import _backend
    bindings = _bindings(core, compiled)
    tpl, graph = core.tpl, gm.graph
    order = _order(gm)
    dead = sorted(_members_of(tpl, set(core.group)), key=lambda n: -order[n])
    last = [max((b[k] for k in core.group if b[k] is not None), key=order.__getitem__)
            for b in tpl.slots]
    like = tpl.slots[0][core.inputs[0]]  # copy 0's first input: the step's shape
    with graph.inserting_after(last[0]):
        flat = [_converted(graph, core, p) for p in core.params]
        flat = [p if p.meta["example_value"].numel() == 1 else _expanded(graph, p, like)
                for p in flat]
        states = [_expanded(graph, _converted(graph, core, i), like) for i in core.inits]
    for t, (block, after, (ident, training, recipe)) in enumerate(
            zip(tpl.slots, last, bindings)):
        with graph.inserting_after(after):
            inputs = []
            for node in _step_inputs(core, block):
                v = node.meta.get("example_value")
                u = _with_value(graph.call_method("unsqueeze", (node, 0)),
                                lambda a: a.unsqueeze(0), v)
                inputs.append(_with_value(graph.call_method("contiguous", (u,)),
                                          lambda a: a.contiguous(), u.meta.get("example_value")))
            _, _, outs, st, _ = _backend._layouts[ident]
            op = torch.ops.flexsn_native.train if training else torch.ops.flexsn_native.launch
            res = graph.call_function(op, (ident, inputs + states + flat, recipe))
            results = {}
            for k, r in zip(core.outputs, outs):
                seq = graph.call_function(operator.getitem, (res, r))
                results[k] = graph.call_function(operator.getitem, (seq, 0))
            states = [graph.call_function(operator.getitem, (res, r)) for r in st]
            for j, new in zip(core.states, states):
                if j not in core.delays:  # a delay's value stays where it is
                    results.setdefault(j, new)
            for k, new in results.items():
                if block[k] is not None and not getattr(
                        block[k].meta.get("example_value"), "requires_grad", True):
                    # a value the loop computes without a gradient (a spike
                    # with none) takes none from the call either
                    results[k] = graph.call_method("detach", (new,))
        for k, new in results.items():
            if block[k] is not None:
                _take_place(block[k], new)
                # the result is slot k now: another core reading it reads
                # this copy's result, not a value from outside the loop
                block[k] = new
                tpl.where[new] = (t, k)
    for n in dead:
        graph.erase_node(n)
    for n in list(graph.nodes):
        if n.op == "get_attr" and not n.users and \
                isinstance(getattr(gm, n.target, None), fx.GraphModule):
            graph.erase_node(n)


def _take_place(old: fx.Node, new: fx.Node) -> None:
    """`new` replaces `old` for its users, with its example value (the same
    shape and dtype: what the roller reads of it)."""
    if "example_value" in old.meta:
        new.meta.setdefault("example_value", old.meta["example_value"])
    old.replace_all_uses_with(new)


def _order(gm: fx.GraphModule) -> dict:
    return {n: i for i, n in enumerate(gm.graph.nodes)}


def _warn_unaligned(gm: fx.GraphModule) -> None:
    """A LoopWarning where a loop over x[t] calls spike functions but its
    steps are not copies of one another (nothing inline can roll)."""
    nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    found = _rows(nodes)
    if found is None or len(found[1]) < 3 or not any(
            _is_function_spike(n) or _is_flexsn_spike(n) for n in nodes):
        return
    warnings.warn(f"flexsn.backend: the steps that read {found[0].name}[0] to "
                  f"{found[0].name}[{len(found[1]) - 1}] are not the same computation each "
                  "(a state made inside the first step, or a step that branches "
                  "differently), so the neurons written inline stay as traced; start "
                  "each state as a tensor before the loop", LoopWarning, stacklevel=4)


def outline(gm: fx.GraphModule) -> int:
    """Replaces every inline neuron of `gm`'s time loop by per-step operator
    calls (which flexsn.backend then rolls); returns how many. A neuron it
    cannot compile stays as traced, with a LoopWarning."""
    from . import _compiled
    tpl = find_copies(gm)
    if tpl is None:
        _warn_unaligned(gm)
        return 0
    from ._backend import _mutated
    done, mutated = 0, _mutated(gm)  # emitting calls changes nothing in place
    live = _live(gm)
    for group in _neurons(tpl, _carrying_groups(tpl)):
        copy = tpl.slots[1]
        if any(_is_operator_call(copy[k]) for k in group):
            continue  # a neuron module's calls: rolled as they are
        try:
            core = _Core(tpl, group, mutated, live)
            examples = [torch.zeros(1, dtype=core.dtype)] * (len(core.inputs) + len(core.states))
            statics = [torch.zeros(1, dtype=core.dtype_of(p)) for p in core.params]
            compiled = _compiled.CompiledCore(core.function(), len(core.inputs),
                                              len(core.states), statics, examples)
            if compiled.num_outputs != len(core.outputs):
                raise _Refused(copy[group[0]], "internal error: the core's outputs differ")
            _emit_calls(core, compiled, gm)
            done += 1
        except _Refused as e:
            node, reason = e.args
            warnings.warn(f"flexsn.backend: the inline neuron at {node.name} stays as "
                          f"traced: {reason}", LoopWarning, stacklevel=3)
        except Exception as e:  # noqa: BLE001 - an op the compiler lacks, say
            warnings.warn(f"flexsn.backend: the inline neuron at {copy[group[0]].name} "
                          f"stays as traced: {type(e).__name__}: {str(e).strip()}",
                          LoopWarning, stacklevel=3)
    return done


# -- SpikingJelly's own operator ----------------------------------------------
# SpikingJelly 2.0's LIFNode runs each step as its multi-step operator
# sj_lif.forward over one step, which Dynamo records as one node. Each such
# node becomes a call of flexsn's LIFNode core with the same settings (the
# conversion flexsn.convert makes), chained through the membrane, which the
# roller then rolls.

_SJ_SURROGATES = ("Sigmoid", "ATan", "PiecewiseQuadratic", "PiecewiseExp", "SoftSign",
                  "SuperSpike", "Erf")
_sj_cores: dict = {}


def _sj_arguments(node: fx.Node) -> Optional[dict]:
    schema = getattr(node.target, "_schema", None)
    if schema is None or str(node.target) not in ("sj_lif.forward.default", "sj_lif.forward"):
        return None
    values = {}
    for k, a in enumerate(schema.arguments):
        if k < len(node.args):
            values[a.name] = node.args[k]
        elif a.name in node.kwargs:
            values[a.name] = node.kwargs[a.name]
        elif a.has_default_value():
            values[a.name] = a.default_value
    return values


def _sj_core(a: dict):
    """flexsn's LIFNode core for sj_lif.forward's settings (made once)."""
    from . import neuron, surrogate
    key = (float(a["tau"]), bool(a["decay_input"]), float(a["threshold"]),
           None if a["reset"] is None else float(a["reset"]), bool(a["detach_reset"]),
           float(a["alpha"]), int(a["surrogate_id"]))
    core = _sj_cores.get(key)
    if core is None:
        tau, decay_input, threshold, reset, detach, alpha, sid = key
        if not 0 <= sid < len(_SJ_SURROGATES):
            raise _Refused(None, f"SpikingJelly surrogate id {sid} is not one flexsn knows")
        sg = getattr(surrogate, _SJ_SURROGATES[sid])(alpha=alpha)
        lif = neuron.LIFNode(tau=tau, decay_input=decay_input, v_threshold=threshold,
                             v_reset=reset, surrogate_function=sg, detach_reset=detach,
                             step_mode="m")
        core = _sj_cores[key] = lif.sn.kernel.compiled
    return core


def _sj_call(gm: fx.GraphModule, node: fx.Node, a: dict) -> bool:
    """Replaces one sj_lif.forward node; False where it is left."""
    from . import _backend, _compiled, _ops
    x, v = a["x"], a["v"]
    xv = x.meta.get("example_value") if isinstance(x, fx.Node) else None
    vv = v.meta.get("example_value") if isinstance(v, fx.Node) else None
    if a["store_v_seq"] or not isinstance(xv, torch.Tensor) or not isinstance(vv, torch.Tensor) \
            or xv.dim() < 2 or xv.shape[0] != 1:
        return False
    results = {u.args[1]: u for u in node.users
               if u.op == "call_function" and u.target is operator.getitem}
    if len(results) != len(node.users) or (2 in results and results[2].users):
        return False  # the charged sequence h is read: left as SpikingJelly's
    compiled = _sj_core(a)
    if compiled is None or compiled.traced.params:
        return False
    mask = (bool(xv.requires_grad), bool(vv.requires_grad))
    mask = mask if torch.is_grad_enabled() and any(mask) else None
    ident, training, _, last_steps, recipe = _ops._binding_ids(
        _ops.handle_of(compiled), xv.dtype, xv.device, (), (), mask, False,
        _compiled.recompute_active())
    if last_steps:
        return False
    _, _, outs, st, _ = _backend._layouts[ident]
    graph = gm.graph
    with graph.inserting_before(node):
        xc = _with_value(graph.call_method("contiguous", (x,)), lambda t: t.contiguous(), xv)
        if _is_state_result(v):
            vc = v
        else:
            row = _with_value(graph.call_method("select", (x, 0, 0)),
                              lambda t: t.select(0, 0), xv)
            vc = _expanded(graph, v, row)
        op = torch.ops.flexsn_native.train if training else torch.ops.flexsn_native.launch
        res = graph.call_function(op, (ident, [xc, vc], recipe))
        new = {0: graph.call_function(operator.getitem, (res, outs[0])),
               1: graph.call_function(operator.getitem, (res, st[0]))}
    for k, user in results.items():
        if k in new:
            _take_place(user, new[k])
        graph.erase_node(user)
    graph.erase_node(node)
    return True


def _is_operator_call(node: fx.Node) -> bool:
    """Whether `node` calls the package's train or launch operator."""
    from ._backend import _ops
    return node.op == "call_function" and node.target in _ops()


def _is_state_result(v) -> bool:
    """Whether `v` is a state result of an operator call (already the step's
    shape and contiguous)."""
    return isinstance(v, fx.Node) and v.op == "call_function" and \
        v.target is operator.getitem and isinstance(v.args[0], fx.Node) and \
        _is_operator_call(v.args[0])


def spikingjelly_calls(gm: fx.GraphModule) -> int:
    """Replaces SpikingJelly's per-step LIF operator nodes by flexsn's;
    returns how many."""
    done = 0
    for node in list(gm.graph.nodes):
        a = _sj_arguments(node) if node.op == "call_function" else None
        if a is None:
            continue
        try:
            done += _sj_call(gm, node, a)
        except _Refused as e:
            warnings.warn(f"flexsn.backend: {node.name} stays SpikingJelly's: {e.args[1]}",
                          LoopWarning, stacklevel=3)
    return done
