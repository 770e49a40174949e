"""NIR graphs in and out: :func:`load` runs a NIR graph (nir 1.0) over
``[T, B, ...]`` with every neuron node as one compiled scan, and
:func:`save` writes a model of PyTorch layers and our neurons as NIR.

Discretisation (NIR states continuous-time ODEs; ``dt`` picks the step):
forward Euler per node, the synaptic current updated before the membrane
integrates it, the threshold compared after the update, the reset applied
at once::

    LIF      v' = (1 - dt/tau) v + (r dt/tau) I + (dt/tau) v_leak
             z = (v' > v_threshold);  v = (1 - z) v' + z v_reset
    CubaLIF  i' = (1 - dt/tau_syn) i + (w_in dt/tau_syn) I
             v' = (1 - dt/tau_mem) v + (r dt/tau_mem) i' + (dt/tau_mem) v_leak, then as LIF
    IF       v' = v + (r dt) I, then as LIF;   I: v' = v + (r dt) I (output v)
    LI, CubaLI: as LIF, CubaLIF without threshold (output v)
    Threshold  z = (I > threshold)

The coefficients are computed per neuron in float64 and rounded once. With
snnTorch's export (r = tau/dt, w_in = tau_syn/dt) this is snnTorch's own
``mem = beta mem + input`` with beta = 1 - dt/tau. States start at rest
(v = v_leak, i = 0). Spikes carry a surrogate gradient (``surrogate``, by
default ATan(alpha=2), snnTorch's default).

Other nodes run as PyTorch layers over the folded ``[T * B, ...]`` batch:
Input, Output, Affine, Linear, Scale, Conv1d, Conv2d, Flatten, SumPool2d,
AvgPool2d, and Delay (a shift by round(delay / dt) steps). A node's inputs
are summed. A feed-forward graph runs each node once over all T; a graph
with a cycle runs step by step (each scan one step at a time), with a
warning the first time.
"""

from __future__ import annotations

import math
import os
import warnings
from collections import defaultdict
from typing import Optional, Union

import numpy as np
import torch
from torch import nn

try:
    import nir as _nir
except ImportError as e:  # the adapter is optional; its library is the user's
    raise ImportError(f"flexsn.nir needs nir (nir==1.0.8 is the version tested): "
                      f"{e}") from e

from . import surrogate as _surrogate
from ._adapters import Scan, StepCore, Surrogate, check_sequence, fire

__all__ = ["load", "save", "NIRGraphModule", "NIRNeuron", "NIRGraphError",
           "RecurrentGraphWarning"]

_NEURONS = (_nir.LIF, _nir.CubaLIF, _nir.IF, _nir.LI, _nir.CubaLI, _nir.I, _nir.Threshold)


class NIRGraphError(ValueError):
    """A NIR graph flexsn cannot run: the message names the node."""


class RecurrentGraphWarning(UserWarning):
    """A graph with a cycle runs step by step."""


# --------------------------------------------------------------------------
# Neuron steps. config = (kind, surrogate); parameters are per-neuron
# coefficient tensors computed by NIRNeuron.coefficients.
# --------------------------------------------------------------------------

def _spike_and_reset(v, thr, reset, sg):
    z = fire(v - thr, sg)
    return z, (1 - z) * v + z * reset


def _lif_step(config, x, v, decay, gain, bias, thr, reset):
    v = decay * v + gain * x + bias
    return _spike_and_reset(v, thr, reset, config[1])


def _cuba_lif_step(config, x, i, v, dsyn, gsyn, decay, gain, bias, thr, reset):
    i = dsyn * i + gsyn * x
    v = decay * v + gain * i + bias
    z, v = _spike_and_reset(v, thr, reset, config[1])
    return z, i, v


def _if_step(config, x, v, gain, thr, reset):
    v = v + gain * x
    return _spike_and_reset(v, thr, reset, config[1])


def _li_step(config, x, v, decay, gain, bias):
    v = decay * v + gain * x + bias
    return v, v


def _cuba_li_step(config, x, i, v, dsyn, gsyn, decay, gain, bias):
    i = dsyn * i + gsyn * x
    v = decay * v + gain * i + bias
    return v, i, v


def _i_step(config, x, v, gain):
    v = v + gain * x
    return v, v


def _threshold_step(config, x, thr):
    return (fire(x - thr, config[1]),)


_STEPS = {"LIF": (_lif_step, ("v",)), "CubaLIF": (_cuba_lif_step, ("i", "v")),
          "IF": (_if_step, ("v",)), "LI": (_li_step, ("v",)),
          "CubaLI": (_cuba_li_step, ("i", "v")), "I": (_i_step, ("v",)),
          "Threshold": (_threshold_step, ())}

# NIR fields of each neuron node (optional ones with their default)
_FIELDS = {"LIF": ("tau", "r", "v_leak", "v_threshold", "v_reset"),
           "CubaLIF": ("tau_syn", "tau_mem", "r", "v_leak", "v_threshold", "v_reset", "w_in"),
           "IF": ("r", "v_threshold", "v_reset"), "LI": ("tau", "r", "v_leak"),
           "CubaLI": ("tau_syn", "tau_mem", "r", "v_leak", "w_in"), "I": ("r",),
           "Threshold": ("threshold",)}


def _array(value, name, node_name) -> np.ndarray:
    a = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise NIRGraphError(f"node {node_name!r}: {name} has non-finite values")
    return a


class NIRNeuron(nn.Module):
    """One NIR neuron node as a compiled scan over ``[T, B, ...]``. Its NIR
    parameters are float64 buffers named as NIR names them (per-neuron
    arrays allowed); ``dt`` and the surrogate are fixed at load."""

    def __init__(self, node, dt: float, surrogate: Optional[Surrogate] = None,
                 name: str = "", backend: Optional[str] = None):
        super().__init__()
        kind = type(node).__name__
        if kind not in _STEPS:
            raise NIRGraphError(f"node {name!r}: {kind} is not a neuron node")
        self.kind, self.dt, self.node_name, self.backend = kind, float(dt), name, backend
        self.surrogate = surrogate or _default_surrogate()
        for field in _FIELDS[kind]:
            value = getattr(node, field, None)
            if value is None:
                value = 0.0 if field == "v_reset" else 1.0
            self.register_buffer(field, torch.from_numpy(_array(value, field, name).copy()))
        for field in ("tau", "tau_syn", "tau_mem"):
            if field in self._buffers and bool((self._buffers[field] <= 0).any()):
                raise NIRGraphError(f"node {name!r} ({kind}): {field} must be > 0")

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_scan", None)
        state.pop("_kept_coefficients", None)
        return state

    def coefficients(self, like: torch.Tensor) -> list:
        """The step's per-neuron coefficients, in float64, rounded once to
        `like`'s dtype; computed again only when a buffer changed (kept per
        dtype and device: a call reads them, it does not recompute them)."""
        if torch.compiler.is_compiling():
            return self._coefficients(like)
        buffers = tuple(self._buffers.values())
        state = (like.dtype, like.device) + tuple(t._version for t in buffers)
        hit = self.__dict__.get("_kept_coefficients")
        if hit is None or hit[0] != state or any(a is not b for a, b in zip(hit[1], buffers)):
            hit = self.__dict__["_kept_coefficients"] = (state, buffers, self._coefficients(like))
        return hit[2]

    def _coefficients(self, like: torch.Tensor) -> list:
        b, dt = self._buffers, self.dt
        k = self.kind
        if k == "LIF" or k == "LI":
            c = [1 - dt / b["tau"], b["r"] * dt / b["tau"], dt / b["tau"] * b["v_leak"]]
        elif k == "CubaLIF" or k == "CubaLI":
            c = [1 - dt / b["tau_syn"], b["w_in"] * dt / b["tau_syn"],
                 1 - dt / b["tau_mem"], b["r"] * dt / b["tau_mem"],
                 dt / b["tau_mem"] * b["v_leak"]]
        elif k == "IF" or k == "I":
            c = [b["r"] * dt]
        else:
            c = []
        if k in ("LIF", "CubaLIF", "IF"):
            c += [b["v_threshold"], b["v_reset"]]
        if k == "Threshold":
            c = [b["threshold"]]
        return [t.to(device=like.device, dtype=like.dtype) for t in c]

    def _get_scan(self) -> Scan:
        scan = self.__dict__.get("_scan")
        if scan is None:
            step, states = _STEPS[self.kind]
            n = len(self.coefficients(torch.zeros(())))
            scan = self.__dict__["_scan"] = Scan(
                StepCore(step, (self.kind, self.surrogate)), len(states), n,
                backend=self.backend)
        return scan

    def initial_states(self, x: torch.Tensor) -> list:
        step = tuple(x.shape[1:])
        out = []
        for s in _STEPS[self.kind][1]:
            base = x.new_zeros(step)
            if s == "v" and "v_leak" in self._buffers:
                base = base + self._buffers["v_leak"].to(x.dtype).to(x.device)
            out.append(base.contiguous())
        return out

    def forward(self, x: torch.Tensor, states=None):
        """``x [T, B, ...]`` -> (output ``[T, B, ...]``, final states)."""
        x = check_sequence(x, f"NIR {self.kind} node {self.node_name!r}")
        if states is None:
            states = self.initial_states(x)
        out, _, finals = self._get_scan()(x, states, self.coefficients(x), want_seqs=False)
        return out, finals

    def extra_repr(self) -> str:
        return f"{self.kind}, node={self.node_name!r}, dt={self.dt:g}"


def _default_surrogate() -> Surrogate:
    from ._adapters import _KIND
    return Surrogate(_KIND["ATan"], (2.0,), name="ATan(alpha=2)")


def _as_surrogate(sg) -> Surrogate:
    if sg is None:
        return _default_surrogate()
    if isinstance(sg, Surrogate):
        return sg
    if isinstance(sg, _surrogate.SurrogateFunction) or hasattr(sg, "kind"):
        return Surrogate(sg.kind, tuple(float(p) for p in sg.params), name=repr(sg))
    raise TypeError("surrogate must be a flexsn.surrogate function (e.g. "
                    f"flexsn.surrogate.ATan(alpha=2.0)), got {type(sg).__name__}")


# --------------------------------------------------------------------------
# The other nodes: PyTorch layers on one step [N, ...]
# --------------------------------------------------------------------------

class _Scale(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.register_buffer("scale", torch.as_tensor(np.asarray(scale, np.float32)))

    def forward(self, x):
        return x * self.scale


class _Delay(nn.Module):
    """y[t] = x[t - d] per neuron (d = round(delay / dt) steps; zeros
    before)."""

    def __init__(self, delay, dt, name):
        super().__init__()
        steps = np.rint(np.asarray(delay, np.float64) / dt)
        if (steps < 0).any():
            raise NIRGraphError(f"node {name!r} (Delay): negative delay")
        self.register_buffer("steps", torch.as_tensor(steps.astype(np.int64)))

    def forward(self, x):  # x: [T, B, ...]
        T = x.shape[0]
        steps = self.steps
        if steps.numel() == 1:
            d = int(steps.reshape(()).item())
            if d == 0:
                return x
            pad = x.new_zeros((min(d, T), *x.shape[1:]))
            return torch.cat([pad, x[:max(T - d, 0)]], 0)
        t = torch.arange(T, device=x.device).view(T, *([1] * (x.dim() - 1)))
        src = t - steps.to(x.device).expand(x.shape[2:]).unsqueeze(0).unsqueeze(0)
        src = src.expand(x.shape)
        out = torch.gather(x, 0, src.clamp(min=0))
        return torch.where(src >= 0, out, torch.zeros_like(out))


def _pair(v):
    v = np.asarray(v).reshape(-1).tolist()
    return tuple(int(a) for a in v) if len(v) > 1 else int(v[0])


def _layer(node, name: str, dt: float) -> nn.Module:
    """A PyTorch layer of a non-neuron node (acting on one step [N, ...])."""
    if isinstance(node, (_nir.Input, _nir.Output)):
        return nn.Identity()
    if isinstance(node, (_nir.Affine, _nir.Linear)):
        w = np.asarray(node.weight, np.float32)
        if w.ndim != 2:
            raise NIRGraphError(f"node {name!r}: weight must be 2-D, got shape {w.shape}")
        bias = isinstance(node, _nir.Affine) and node.bias is not None
        lin = nn.Linear(w.shape[1], w.shape[0], bias=bias)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
            if bias:
                b = np.asarray(node.bias, np.float32).reshape(-1)
                if b.shape[0] != w.shape[0]:
                    raise NIRGraphError(f"node {name!r}: bias has {b.shape[0]} entries "
                                        f"for {w.shape[0]} outputs")
                lin.bias.copy_(torch.from_numpy(b))
        return lin
    if isinstance(node, _nir.Scale):
        return _Scale(node.scale)
    if isinstance(node, (_nir.Conv1d, _nir.Conv2d)):
        w = np.asarray(node.weight, np.float32)
        two = isinstance(node, _nir.Conv2d)
        if w.ndim != (4 if two else 3):
            raise NIRGraphError(f"node {name!r}: weight has shape {w.shape}")
        cls = nn.Conv2d if two else nn.Conv1d
        padding = node.padding if isinstance(node.padding, str) else _pair(node.padding)
        conv = cls(w.shape[1] * node.groups, w.shape[0], w.shape[2:], stride=_pair(node.stride),
                   padding=padding, dilation=_pair(node.dilation), groups=int(node.groups),
                   bias=node.bias is not None)
        with torch.no_grad():
            conv.weight.copy_(torch.from_numpy(w))
            if node.bias is not None:
                conv.bias.copy_(torch.from_numpy(np.asarray(node.bias, np.float32).reshape(-1)))
        return conv
    if isinstance(node, _nir.Flatten):
        # NIR's dims leave out the batch
        start = node.start_dim + 1 if node.start_dim >= 0 else node.start_dim
        end = node.end_dim + 1 if node.end_dim >= 0 else node.end_dim
        return nn.Flatten(start, end)
    if isinstance(node, _nir.SumPool2d):
        return nn.AvgPool2d(_pair(node.kernel_size), _pair(node.stride), _pair(node.padding),
                            count_include_pad=True, divisor_override=1)
    if isinstance(node, _nir.AvgPool2d):
        return nn.AvgPool2d(_pair(node.kernel_size), _pair(node.stride), _pair(node.padding))
    if isinstance(node, _nir.Delay):
        return _Delay(node.delay, dt, name)
    raise NIRGraphError(f"node {name!r}: flexsn.nir has no mapping for "
                        f"{type(node).__name__}")


# --------------------------------------------------------------------------
# The graph
# --------------------------------------------------------------------------

def _flatten(graph, prefix="") -> tuple[dict, list]:
    """Nodes and edges with nested graphs inlined (their Input and Output
    nodes kept as identities, named `outer.inner`)."""
    nodes, edges = {}, []
    inner_io = {}
    for name, node in graph.nodes.items():
        full = prefix + name
        if isinstance(node, _nir.NIRGraph):
            sub_nodes, sub_edges = _flatten(node, full + ".")
            nodes.update(sub_nodes)
            edges += sub_edges
            ins = [n for n, v in node.nodes.items() if isinstance(v, _nir.Input)]
            outs = [n for n, v in node.nodes.items() if isinstance(v, _nir.Output)]
            if len(ins) != 1 or len(outs) != 1:
                raise NIRGraphError(f"subgraph {full!r} needs one Input and one Output node")
            inner_io[full] = (f"{full}.{ins[0]}", f"{full}.{outs[0]}")
        else:
            nodes[full] = node
    for src, dst in graph.edges:
        s, d = prefix + src, prefix + dst
        if s in inner_io:
            s = inner_io[s][1]
        if d in inner_io:
            d = inner_io[d][0]
        for end in (s, d):
            if end not in nodes:
                raise NIRGraphError(f"edge ({src!r}, {dst!r}) names an unknown node {end!r}")
        edges.append((s, d))
    return nodes, edges


def _order(names, preds) -> tuple[list, bool]:
    """A depth-first order in which every node comes after the
    predecessors it does not reach through a cycle, and whether there is a
    cycle."""
    order, state, cyclic = [], {}, False

    def visit(n):
        nonlocal cyclic
        state[n] = 1
        for p in preds[n]:
            if state.get(p) == 1:
                cyclic = True
            elif p not in state:
                visit(p)
        state[n] = 2
        order.append(n)

    for n in names:
        if n not in state:
            visit(n)
    return order, cyclic


class NIRGraphModule(nn.Module):
    """A NIR graph as a module: ``forward(x [T, B, ...])`` returns the
    Output node's sequence (a tuple for several Output nodes)."""

    def __init__(self, graph, dt: float, surrogate=None, backend: Optional[str] = None):
        super().__init__()
        if not isinstance(graph, _nir.NIRGraph):
            raise TypeError(f"expected a nir.NIRGraph, got {type(graph).__name__}")
        if not (isinstance(dt, (int, float)) and dt > 0 and math.isfinite(dt)):
            raise ValueError(f"dt must be a positive number, got {dt!r}")
        self.dt = float(dt)
        sg = _as_surrogate(surrogate)
        nodes, edges = _flatten(graph)
        self.names = list(nodes)
        self.inputs = [n for n, v in nodes.items() if isinstance(v, _nir.Input) and "." not in n]
        self.outputs = [n for n, v in nodes.items() if isinstance(v, _nir.Output) and "." not in n]
        if len(self.inputs) != 1:
            raise NIRGraphError(f"the graph needs exactly one Input node, has "
                                f"{len(self.inputs)} ({', '.join(self.inputs) or 'none'})")
        if not self.outputs:
            raise NIRGraphError("the graph has no Output node")
        self.preds = defaultdict(list)
        for s, d in edges:
            self.preds[d].append(s)
        for n in self.names:
            if n != self.inputs[0] and not self.preds[n] and not isinstance(nodes[n], _nir.Input):
                raise NIRGraphError(f"node {n!r} has no incoming edge")
        self.layers = nn.ModuleDict()
        self.kinds = {}
        for n, node in nodes.items():
            key = n.replace(".", "__")
            if isinstance(node, _NEURONS):
                self.layers[key] = NIRNeuron(node, self.dt, sg, name=n, backend=backend)
            else:
                self.layers[key] = _layer(node, n, self.dt)
            self.kinds[n] = type(node).__name__
        self.order, self.recurrent = _order(self.outputs + self.names, self.preds)
        if self.recurrent and any(self.kinds[n] == "Delay" for n in self.names):
            raise NIRGraphError("a Delay node in a graph with a cycle is not supported")
        self._check_shapes(nodes)

    def _check_shapes(self, nodes) -> None:
        """Shape mismatches named by node: a Linear's input size against the
        sizes its predecessors declare, neuron parameter shapes alike."""
        for n, node in nodes.items():
            if isinstance(node, (_nir.Affine, _nir.Linear)):
                want = np.asarray(node.weight).shape[1]
                for p in self.preds[n]:
                    size = _declared_size(nodes[p])
                    if size is not None and size != want:
                        raise NIRGraphError(f"node {n!r} takes {want} inputs but node {p!r} "
                                            f"gives {size}")

    def layer(self, name: str) -> nn.Module:
        return self.layers[name.replace(".", "__")]

    def forward(self, x: torch.Tensor):
        x = check_sequence(x, "flexsn.nir graph")
        if x.dim() < 2:
            raise ValueError(f"the graph takes [T, B, ...] input, got shape {tuple(x.shape)}")
        if self.recurrent:
            outs = self._run_steps(x)
        else:
            outs = self._run_sequences(x)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _node_input(self, n, values, x):
        if n == self.inputs[0]:
            return x
        got = [values[p] for p in self.preds[n] if p in values]
        if not got:
            return None
        total = got[0]
        for g in got[1:]:
            if g.shape != total.shape:
                raise NIRGraphError(f"node {n!r} sums inputs of shapes {tuple(total.shape)} "
                                    f"and {tuple(g.shape)}")
            total = total + g
        return total

    def _run_layer(self, n, v, folded: bool):
        layer = self.layer(n)
        try:
            if folded:  # [T, B, ...] through a per-step layer
                T, B = v.shape[:2]
                y = layer(v.reshape(T * B, *v.shape[2:]))
                return y.reshape(T, B, *y.shape[1:])
            return layer(v)
        except RuntimeError as e:
            raise NIRGraphError(f"node {n!r} ({self.kinds[n]}) cannot take input of shape "
                                f"{tuple(v.shape)}: {e}") from None

    def _run_sequences(self, x):
        values = {}
        for n in self.order:
            v = self._node_input(n, values, x)
            layer = self.layer(n)
            if isinstance(layer, NIRNeuron):
                _check_neuron_shape(n, layer, v)
                values[n] = layer(v)[0]
            elif isinstance(layer, _Delay):
                values[n] = layer(v)
            else:
                values[n] = self._run_layer(n, v, folded=True)
        return [values[o] for o in self.outputs]

    def _run_steps(self, x):
        if not self.__dict__.get("_warned"):
            warnings.warn("this NIR graph has a cycle: flexsn runs it one step at a time "
                          "(each neuron's scan is called T times)", RecurrentGraphWarning,
                          stacklevel=3)
            self.__dict__["_warned"] = True
        states, previous = {}, {}
        outs = [[] for _ in self.outputs]
        for t in range(x.shape[0]):
            values = {}
            for n in self.order:
                if n == self.inputs[0]:
                    values[n] = x[t]
                    continue
                got = [values[p] if p in values else previous.get(p) for p in self.preds[n]]
                got = [g for g in got if g is not None]
                if not got:
                    continue
                v = got[0]
                for g in got[1:]:
                    v = v + g
                layer = self.layer(n)
                if isinstance(layer, NIRNeuron):
                    _check_neuron_shape(n, layer, v.unsqueeze(0))
                    y, states[n] = layer(v.unsqueeze(0), states.get(n))
                    values[n] = y[0]
                else:
                    values[n] = self._run_layer(n, v, folded=False)
            for k, o in enumerate(self.outputs):
                outs[k].append(values[o])
            previous = values
        return [torch.stack(o) for o in outs]


def _declared_size(node) -> Optional[int]:
    """The per-step size a node declares (neurons by their parameter
    arrays, Linear/Affine by their weight), or None."""
    if isinstance(node, (_nir.Affine, _nir.Linear)):
        return int(np.asarray(node.weight).shape[0])
    if isinstance(node, _NEURONS):
        for f in ("v_threshold", "tau", "tau_mem", "threshold", "r"):
            a = getattr(node, f, None)
            if a is not None and np.asarray(a).ndim == 1 and np.asarray(a).size > 1:
                return int(np.asarray(a).size)
    return None


def _check_neuron_shape(name, layer, v):
    step = tuple(v.shape[2:])
    for field, t in layer._buffers.items():
        if t.dim() == 0 or t.numel() == 1:
            continue
        try:
            torch.broadcast_shapes(tuple(t.shape), step)
        except RuntimeError:
            raise NIRGraphError(f"node {name!r} ({layer.kind}): {field} has shape "
                                f"{tuple(t.shape)}, which does not broadcast to its input's "
                                f"per-sample shape {step}") from None
        if torch.broadcast_shapes(tuple(t.shape), step) != step:
            raise NIRGraphError(f"node {name!r} ({layer.kind}): {field} has shape "
                                f"{tuple(t.shape)} but its input has per-sample shape {step}")


def load(graph_or_path: Union["_nir.NIRGraph", str, os.PathLike], dt: float, *,
         surrogate=None, backend: Optional[str] = None) -> NIRGraphModule:
    """A NIR graph (or the path of a NIR file) as a module running
    ``[T, B, ...]`` input with step `dt` (see the module docstring).
    surrogate: the spikes' surrogate gradient (a flexsn.surrogate function;
    default ATan(alpha=2)). backend: None (compiled kernels) or "torch"."""
    graph = graph_or_path
    if isinstance(graph, (str, os.PathLike)):
        graph = _nir.read(os.fspath(graph))
    if isinstance(graph, _nir.NIRNode) and not isinstance(graph, _nir.NIRGraph):
        graph = _nir.NIRGraph.from_list(graph)
    return NIRGraphModule(graph, dt, surrogate=surrogate, backend=backend)


# --------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------

def _np(t) -> np.ndarray:
    return np.asarray(t.detach().cpu().double().numpy() if isinstance(t, torch.Tensor) else t,
                      dtype=np.float64)


def _node_of(module: nn.Module, dt: float, name: str):
    """The NIR node of one of our modules or a PyTorch layer."""
    if isinstance(module, NIRNeuron):
        kw = {f: module._buffers[f].cpu().numpy().copy() for f in _FIELDS[module.kind]}
        if module.dt != dt:
            raise ValueError(f"module {name!r} was loaded with dt={module.dt}; save with "
                             "the same dt so that its NIR time constants stay its own")
        return getattr(_nir, module.kind)(**kw)
    try:
        from . import snntorch as fs
        if isinstance(module, (fs.Leaky, fs.Synaptic)):
            return _from_snntorch(module, dt, name)
    except ImportError:
        pass
    try:
        from . import norse as fn
        if isinstance(module, fn.NorseNeuron):
            return _from_norse(module, dt, name)
    except ImportError:
        pass
    if isinstance(module, nn.Linear):
        w = module.weight.detach().cpu().numpy()
        if module.bias is None:
            return _nir.Linear(weight=w)
        return _nir.Affine(weight=w, bias=module.bias.detach().cpu().numpy())
    if isinstance(module, (nn.Conv1d, nn.Conv2d)):
        cls = _nir.Conv2d if isinstance(module, nn.Conv2d) else _nir.Conv1d
        bias = module.bias.detach().cpu().numpy() if module.bias is not None else \
            np.zeros(module.out_channels, np.float32)
        return cls(input_shape=None, weight=module.weight.detach().cpu().numpy(),
                   stride=module.stride, padding=module.padding, dilation=module.dilation,
                   groups=module.groups, bias=bias)
    if isinstance(module, nn.Flatten):
        start = module.start_dim - 1 if module.start_dim > 0 else module.start_dim
        end = module.end_dim - 1 if module.end_dim > 0 else module.end_dim
        return _nir.Flatten(input_type=None, start_dim=start, end_dim=end)
    if isinstance(module, nn.AvgPool2d):
        two = lambda v: np.broadcast_to(np.asarray(v).reshape(-1), (2,)).copy()  # noqa: E731
        k = two(module.kernel_size)
        s = two(module.stride if module.stride is not None else module.kernel_size)
        p = two(module.padding)
        if module.divisor_override == 1:
            return _nir.SumPool2d(kernel_size=k, stride=s, padding=p)
        return _nir.AvgPool2d(kernel_size=k, stride=s, padding=p)
    if isinstance(module, _Scale):
        return _nir.Scale(scale=module.scale.cpu().numpy())
    if isinstance(module, _Delay):
        return _nir.Delay(delay=module.steps.cpu().numpy().astype(np.float64) * dt)
    raise ValueError(f"flexsn.nir.save has no NIR node for module {name!r} "
                     f"({type(module).__name__})")


def _from_snntorch(m, dt, name):
    reset = int(m.reset_mechanism_val)
    if reset != 1 or m.reset_delay:
        warnings.warn(f"{name!r}: NIR resets to v_reset at once; snnTorch's "
                      f"reset_mechanism={m.reset_mechanism!r}, reset_delay={m.reset_delay} "
                      "is not representable and is written as a hard reset to 0",
                      stacklevel=3)
    beta = _np(m.beta.clamp(0, 1))
    thr = _np(m.threshold)
    if type(m).__name__ == "Leaky":
        tau = dt / (1 - beta)
        shape = np.broadcast_shapes(tau.shape, thr.shape)
        tau = np.broadcast_to(tau, shape).copy()
        return _nir.LIF(tau=tau, r=tau / dt, v_leak=np.zeros(shape),
                        v_threshold=np.broadcast_to(thr, shape).copy(), v_reset=np.zeros(shape))
    alpha = _np(m.alpha.clamp(0, 1))
    tau_syn, tau_mem = dt / (1 - alpha), dt / (1 - beta)
    shape = np.broadcast_shapes(tau_syn.shape, tau_mem.shape, thr.shape)
    b = lambda a: np.broadcast_to(a, shape).copy()  # noqa: E731
    return _nir.CubaLIF(tau_syn=b(tau_syn), tau_mem=b(tau_mem), r=b(tau_mem / dt),
                        v_leak=np.zeros(shape), v_threshold=b(thr), v_reset=np.zeros(shape),
                        w_in=b(tau_syn / dt))


def _from_norse(m, dt, name):
    p, model = m.module.p, m.model.name
    if float(getattr(m.module, "dt", dt)) != dt:
        raise ValueError(f"{name!r} steps with Norse dt={m.module.dt}; save with that dt")
    g = {f: _np(getattr(p, f)) for f in m.model.params}
    shape = np.broadcast_shapes(*(a.shape for a in g.values()))
    b = lambda a: np.broadcast_to(a, shape).copy()  # noqa: E731
    if model == "LIF":  # j = i + x integrates with gain 1: w_in = tau_syn / dt
        tau_syn = 1 / g["tau_syn_inv"]
        return _nir.CubaLIF(tau_syn=b(tau_syn), tau_mem=b(1 / g["tau_mem_inv"]), r=b(1.0),
                            v_leak=b(g["v_leak"]), v_threshold=b(g["v_th"]),
                            v_reset=b(g["v_reset"]), w_in=b(tau_syn / dt))
    if model == "LIFBox":
        if m._config(torch.zeros(()))[0][2]:
            raise ValueError(f"{name!r}: NIR has no subtractive reset (LIFBox reset_subtract)")
        return _nir.LIF(tau=b(1 / g["tau_mem_inv"]), r=b(1.0), v_leak=b(g["v_leak"]),
                        v_threshold=b(g["v_th"]), v_reset=b(g["v_reset"]))
    if model == "LI":
        tau_syn = 1 / g["tau_syn_inv"]
        return _nir.CubaLI(tau_syn=b(tau_syn), tau_mem=b(1 / g["tau_mem_inv"]), r=b(1.0),
                           v_leak=b(g["v_leak"]), w_in=b(tau_syn / dt))
    if model == "IAF":
        return _nir.IF(r=b(1 / dt), v_threshold=b(g["v_th"]), v_reset=b(g["v_reset"]))
    raise ValueError(f"{name!r}: NIR has no node for Norse {model}")


def to_graph(model: nn.Module, dt: float, input_shape=None):
    """The NIR graph of `model`: a graph loaded by :func:`load`, an
    nn.Sequential of PyTorch layers and our neurons, or one such module.
    input_shape: one sample's shape (no T, no batch), needed where a
    convolution or a Flatten comes before any layer that states its size."""
    if isinstance(model, NIRGraphModule):
        nodes = {n: _node_of(model.layer(n), dt, n) if model.kinds[n] not in ("Input", "Output")
                 else None for n in model.names}
        return _graph_from(model, nodes)
    mods = list(model) if isinstance(model, nn.Sequential) else [model]
    nodes = {}
    for k, m in enumerate(mods):
        nodes[str(k)] = _node_of(m, dt, str(k))
    names = list(nodes)
    first, last = nodes[names[0]], nodes[names[-1]]
    given = input_shape is not None
    nodes["input"] = _nir.Input(input_type=np.array(input_shape) if given
                                else _io_shape(first, "input"))
    nodes["output"] = _nir.Output(output_type=_io_shape(last, "output"))
    edges = [("input", names[0])] + list(zip(names, names[1:])) + [(names[-1], "output")]
    graph = _nir.NIRGraph(nodes=nodes, edges=edges, type_check=False)
    if given:
        graph.infer_types()
    for n, node in nodes.items():
        for field in ("input_shape", "input_type"):
            if field in vars(node) and getattr(node, field) is None:
                raise ValueError(f"module {n!r} ({type(node).__name__}) needs its input "
                                 "shape: pass input_shape=(one sample's shape)")
    return graph


def _io_shape(node, which):
    if isinstance(node, (_nir.Affine, _nir.Linear)):
        w = np.asarray(node.weight)
        return np.array([w.shape[1] if which == "input" else w.shape[0]])
    size = _declared_size(node)
    return np.array([size]) if size is not None else np.array([1])


def _graph_from(model, nodes):
    """The loaded graph written flat: a nested graph's own Input and Output
    nodes (identities, named `outer.inner`) are bypassed, and its nodes are
    named `outer__inner` (NIR reads a dot as nesting)."""
    preds = {d: list(ps) for d, ps in model.preds.items()}
    inner = [n for n in nodes if "." in n and model.kinds[n] in ("Input", "Output")]
    for n in inner:  # bypass: n's successors read n's predecessors
        for d, ps in preds.items():
            if n in ps:
                i = ps.index(n)
                ps[i:i + 1] = preds.get(n, [])
        preds.pop(n, None)
        del nodes[n]
    rename = {n: n.replace(".", "__") for n in nodes}
    out = {}
    for n, node in nodes.items():
        if node is None:
            kind = model.kinds[n]
            nb = preds.get(n, []) if kind == "Output" else \
                [d for d, ps in preds.items() if n in ps]
            size = None
            for k in nb:
                if nodes.get(k) is not None:
                    size = _io_shape(nodes[k], "output" if kind == "Output" else "input")
            size = size if size is not None else np.array([1])
            node = _nir.Input(input_type=size) if kind == "Input" else \
                _nir.Output(output_type=size)
        out[rename[n]] = node
    edges = [(rename[p], rename[d]) for d, ps in preds.items() if d in rename
             for p in ps]
    return _nir.NIRGraph(nodes=out, edges=edges, type_check=False)


def save(model: nn.Module, path: Union[str, os.PathLike], dt: float,
         input_shape=None) -> None:
    """Writes `model` (see :func:`to_graph`) as a NIR file at `path`."""
    _nir.write(os.fspath(path), to_graph(model, dt, input_shape))
