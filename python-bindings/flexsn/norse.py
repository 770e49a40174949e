"""Norse neurons as fused multi-step kernels.

``flexsn.from_norse(module)`` takes a Norse 1.1 cell (``LIFCell``,
``LIFBoxCell``, ``LICell``, ``IAFCell``, ``LIFAdExCell``,
``IzhikevichCell``), its multi-step module (``LIF``, ``LI``, ``IAF``,
``LIFAdEx``, ``Izhikevich``) or ``Lift(cell)``, and returns a module whose
call means what the given module's call means in Norse: a cell takes one
step ``(x, state=None) -> (output, state)``, so a loop written for Norse
runs unchanged; a multi-step module takes
``[T, ...]`` and runs all T steps in one compiled scan, returning the output
sequence and the final state (Norse's own state tuple; the stacked states
with ``record_states=True``). ``forward_sequence(x_seq, state=None)`` is
that scan for either::

    lif = norse.torch.LIF(norse.torch.LIFParameters(v_th=torch.tensor(0.5)))
    z_seq, state = flexsn.from_norse(lif)(x_seq)
    cell = flexsn.from_norse(norse.torch.LIFCell())
    z, s = cell(x_seq[0])                          # one step
    z_seq, s = cell.forward_sequence(x_seq)        # all T steps

``flexsn.multistep`` runs a network of cells, written a step at a time,
over whole sequences.

Each step is Norse's ``*_feed_forward_step`` op for op, with the module's
parameter object and ``dt`` read at every call: tensor fields are kernel
parameters (per-neuron tensors allowed; those that require grad get their
gradient), Python numbers are constants. The threshold's surrogate is
``p.method`` with ``p.alpha``: super, triangle, tanh, circ, heavi_erfc, or
heaviside (no gradient); ``method="adjoint"`` (Norse's hand-written adjoint
of LIF) is refused.

SuperSpike: Norse 1.1.0's released backward is ``grad / (|x| + 1)^2``,
ignoring alpha; the formula (and Norse's unreleased master) is
``grad / (alpha |x| + 1)^2``. ``superspike="formula"`` (the default) follows
the formula; ``superspike="released"`` reproduces 1.1.0.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

import torch
from torch import nn

try:
    from norse.torch.functional import reset as _reset
    from norse.torch.functional.iaf import IAFFeedForwardState
    from norse.torch.functional.izhikevich import IzhikevichState
    from norse.torch.functional.leaky_integrator import LIState
    from norse.torch.functional.lif import LIFFeedForwardState
    from norse.torch.functional.lif_adex import LIFAdExFeedForwardState
    from norse.torch.functional.lif_box import LIFBoxFeedForwardState
    import norse.torch as _m
except ImportError as e:  # the adapter is optional; its library is the user's
    raise ImportError(f"flexsn.norse needs norse (norse==1.1.0 is the version tested): "
                      f"{e}") from e

from ._adapters import (Scan, StepCore, Surrogate, as_param, check_sequence, fire,
                        read_back)
from ._adapters import _KIND, traced_for_flexsn

__all__ = ["from_norse", "NorseNeuron", "surrogate_of"]

SUPERSPIKE = ("formula", "released")


def surrogate_of(method: str, alpha, superspike: str = "formula") -> Surrogate:
    """The compiled form of Norse's ``threshold(x, method, alpha)``."""
    a = float(alpha)
    if method == "heaviside":
        return Surrogate(None, name="heaviside")
    if method == "super":
        if superspike == "released":  # 1 / (|x| + 1)^2
            return Surrogate(_KIND["SuperSpike"], (1.0,), name="super (1.1.0)")
        if a <= 0:
            raise ValueError(f"method 'super' needs alpha > 0, got {a}")
        # 1 / (alpha |x| + 1)^2 = d/dx of SuperSpike(1/alpha) at alpha x
        return Surrogate(_KIND["SuperSpike"], (1.0 / a,), scale_in=a, name=f"super({a})")
    if method == "triangle":  # alpha relu(1 - |x|)
        return Surrogate(_KIND["PiecewiseQuadratic"], (1.0,), scale_out=a,
                         name=f"triangle({a})")
    if method == "tanh":  # 1 - tanh^2(alpha x) = (2 / alpha) Sigmoid(2 alpha)'
        if a <= 0:
            raise ValueError(f"method 'tanh' needs alpha > 0, got {a}")
        return Surrogate(_KIND["Sigmoid"], (2.0 * a,), scale_out=2.0 / a, name=f"tanh({a})")
    if method == "circ":
        if a <= 0:
            raise ValueError(f"method 'circ' needs alpha > 0, got {a}")
        return Surrogate("circ", (a,), name=f"circ({a})")
    if method == "heavi_erfc":  # 2 exp(-(alpha x)^2) / sqrt(pi) = (2 / alpha) Erf(alpha)'
        if a <= 0:
            raise ValueError(f"method 'heavi_erfc' needs alpha > 0, got {a}")
        return Surrogate(_KIND["Erf"], (a,), scale_out=2.0 / a, name=f"heavi_erfc({a})")
    if method == "adjoint":
        raise ValueError("method='adjoint' runs Norse's hand-written adjoint equations; "
                         "flexsn differentiates the step itself: use method='super' (or "
                         "another surrogate) for the same forward")
    raise ValueError(f"flexsn cannot compile Norse threshold method {method!r}: supported "
                     "are super, triangle, tanh, circ, heavi_erfc and heaviside")


# --------------------------------------------------------------------------
# Steps: Norse's feed-forward steps, op for op. config = (surrogate, dt,
# extra, layout); layout names each parameter and holds Python numbers as
# constants (None: the next tensor parameter).
# --------------------------------------------------------------------------

def _p(layout, tensors) -> dict:
    it = iter(tensors)
    return {name: (next(it) if const is None else const) for name, const in layout}


def _current_step(dt, p, x, v, i):
    """LIF's and LI's shared update: the input jumps the current, the
    membrane integrates it, the current decays."""
    i_jump = i + x
    dv = dt * p["tau_mem_inv"] * (p["v_leak"] - v + i_jump)
    v_new = v + dv
    di = -dt * p["tau_syn_inv"] * i_jump
    return v_new, i_jump + di


def _lif_step(config, x, v, i, *tensors):
    sg, dt, _, layout = config
    p = _p(layout, tensors)
    v_decayed, i_decayed = _current_step(dt, p, x, v, i)
    z = fire(v_decayed - p["v_th"], sg)
    v_new = (1 - z) * v_decayed + z * p["v_reset"]
    return z, v_new, i_decayed


def _lif_box_step(config, x, v, *tensors):
    sg, dt, subtract, layout = config
    p = _p(layout, tensors)
    dv = dt * p["tau_mem_inv"] * (x + p["v_leak"] - v)
    v_decayed = v + dv
    z = fire(v_decayed - p["v_th"], sg)
    if subtract:
        v_new = (1 - z) * v_decayed + z * (v_decayed - p["v_th"])
    else:
        v_new = (1 - z) * v_decayed + z * p["v_reset"]
    return z, v_new


def _li_step(config, x, v, i, *tensors):
    _, dt, _, layout = config
    v_new, i_decayed = _current_step(dt, _p(layout, tensors), x, v, i)
    return v_new, v_new, i_decayed


def _iaf_step(config, x, v, *tensors):
    sg, _, _, layout = config
    p = _p(layout, tensors)
    v_new = v + x
    z = fire(v_new - p["v_th"], sg)
    v_new = (1 - z) * v_new + z * p["v_reset"]
    return z, v_new


def _lif_adex_step(config, x, v, i, a, *tensors):
    sg, dt, _, layout = config
    p = _p(layout, tensors)
    i_jump = i + x
    dv_leak = p["v_leak"] - v
    dv_exp = p["delta_T"] * torch.exp((v - p["v_th"]) / p["delta_T"])
    dv = dt * p["tau_mem_inv"] * (dv_leak + dv_exp + i_jump - a)
    v_decayed = v + dv
    di = -dt * p["tau_syn_inv"] * i_jump
    i_decayed = i_jump + di
    da = dt * p["tau_ada_inv"] * (p["adaptation_current"] * (v - p["v_leak"]) - a)
    a_decayed = a + da
    z = fire(v_decayed - p["v_th"], sg)
    v_new = (1 - z) * v_decayed + z * p["v_reset"]
    a_new = a_decayed + z * p["adaptation_spike"]
    return z, v_new, i_decayed, a_new


def _izhikevich_step(config, x, v, u, *tensors):
    sg, dt, _, layout = config
    p = _p(layout, tensors)
    v_ = v + p["tau_inv"] * dt * (p["sq"] * v ** 2 + p["mn"] * v + p["bias"] - u + x)
    u_ = u + p["tau_inv"] * dt * p["a"] * (p["b"] * v - u)
    z = fire(v_ - p["v_th"], sg)
    v_ = (1 - z) * v_ + z * p["c"]
    u_ = (1 - z) * u_ + z * (u_ + p["d"])
    return z, v_, u_


@dataclass(frozen=True)
class _Model:
    name: str
    step: Callable
    state: type                 # Norse's state tuple
    params: tuple               # parameter fields the step reads
    spiking: bool = True        # has p.method / p.alpha
    initial: Callable = None    # module, p -> {state field: value}


def _from_leak(module, p):
    return {"v": p.v_leak}


def _from_reset(module, p):
    return {"v": p.v_reset}


def _from_behaviour(module, p):
    return dict(module.spiking_method.s._asdict())


_MODELS = {
    "LIF": _Model("LIF", _lif_step, LIFFeedForwardState,
                  ("tau_syn_inv", "tau_mem_inv", "v_leak", "v_th", "v_reset"),
                  initial=_from_leak),
    "LIFBox": _Model("LIFBox", _lif_box_step, LIFBoxFeedForwardState,
                     ("tau_mem_inv", "v_leak", "v_th", "v_reset"), initial=_from_leak),
    "LI": _Model("LI", _li_step, LIState, ("tau_syn_inv", "tau_mem_inv", "v_leak"),
                 spiking=False, initial=_from_leak),
    "IAF": _Model("IAF", _iaf_step, IAFFeedForwardState, ("v_th", "v_reset"),
                  initial=_from_reset),
    "LIFAdEx": _Model("LIFAdEx", _lif_adex_step, LIFAdExFeedForwardState,
                      ("adaptation_current", "adaptation_spike", "delta_T", "tau_ada_inv",
                       "tau_syn_inv", "tau_mem_inv", "v_leak", "v_th", "v_reset"),
                      initial=_from_leak),
    "Izhikevich": _Model("Izhikevich", _izhikevich_step, IzhikevichState,
                         ("a", "b", "c", "d", "sq", "mn", "bias", "v_th", "tau_inv"),
                         initial=_from_behaviour),
}

_CLASSES = {
    _m.LIF: "LIF", _m.LIFCell: "LIF", _m.LIFBoxCell: "LIFBox", _m.LI: "LI",
    _m.LICell: "LI", _m.IAF: "IAF", _m.IAFCell: "IAF", _m.LIFAdEx: "LIFAdEx",
    _m.LIFAdExCell: "LIFAdEx", _m.Izhikevich: "Izhikevich", _m.IzhikevichCell: "Izhikevich",
}


# Norse's single-step modules: their call takes one step.
_CELLS = (_m.LIFCell, _m.LIFBoxCell, _m.LICell, _m.IAFCell, _m.LIFAdExCell,
          _m.IzhikevichCell)


def _model_of(module) -> str:
    for cls in type(module).__mro__:
        if cls in _CLASSES:
            if type(module).forward is not cls.forward:
                raise ValueError(f"{type(module).__name__} overrides forward of norse "
                                 f"{cls.__name__}; flexsn reads only Norse's own step")
            return _CLASSES[cls]
    supported = sorted({c.__name__ for c in _CLASSES})
    raise ValueError(f"from_norse has no fused form of {type(module).__name__}: supported "
                     f"are {', '.join(supported)} and Lift(cell) of those cells")


class NorseNeuron(nn.Module):
    """A Norse neuron whose ``forward_sequence(x, state=None) -> (outputs
    [T, ...], final state)`` is one compiled scan (see flexsn.norse). The
    wrapped Norse module is ``self.module``: its ``p`` and ``dt`` are read at
    each call. ``forward`` is one step when the module is a cell
    (``single_step``), else the scan, as in Norse."""

    def __init__(self, module: nn.Module, superspike: str = "formula",
                 backend: Optional[str] = None, single_step: Optional[bool] = None):
        super().__init__()
        if single_step is None:
            single_step = isinstance(module, _CELLS)
        self.single_step = bool(single_step)
        if superspike not in SUPERSPIKE:
            raise ValueError(f"superspike must be one of {SUPERSPIKE}, got {superspike!r}")
        self.model = _MODELS[_model_of(module)]
        self.module = module
        self.superspike, self.backend = superspike, backend
        self._scan(self._config(torch.zeros(()))[0])  # refuse what cannot compile now

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_scans", None)  # kernels of this process
        state.pop("_copies", None)
        state.pop("_alpha", None)
        state.pop("_current", None)
        return state

    def __setstate__(self, state):
        nn.Module.__setstate__(self, state)
        self._scan(self._config(torch.zeros(()))[0])  # traced again now

    def _config(self, like: torch.Tensor):
        p, model = self.module.p, self.model
        sg = None
        if model.spiking:
            sg = surrogate_of(p.method, self._number(p.alpha), self.superspike)
        subtract = False
        if model.name == "LIFBox":
            if p.reset_method is _reset.reset_subtract:
                subtract = True
            elif p.reset_method is not _reset.reset_value:
                raise ValueError("LIFBoxParameters.reset_method must be norse's "
                                 "reset_value or reset_subtract")
        layout, tensors = [], []
        for name in model.params:
            value = getattr(p, name)
            if isinstance(value, torch.Tensor):
                layout.append((name, None))
                tensors.append(self._on(like, name, value))
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                layout.append((name, value))
            else:
                raise TypeError(f"{type(p).__name__}.{name} must be a number or a tensor, "
                                f"got {type(value).__name__}")
        dt = float(getattr(self.module, "dt", 0.001))
        return (sg, dt, subtract, tuple(layout)), tensors

    def _on(self, like: torch.Tensor, name: str, value: torch.Tensor) -> torch.Tensor:
        """`value` as a tensor of `like`'s dtype on its device. Norse keeps
        p (and initial states made from it) on the CPU: a tensor that needs
        no gradient is copied once per value, not at every call (a copy per
        call costs a synchronous transfer, which a CUDA graph capture
        refuses)."""
        if value.requires_grad or (value.device == like.device and
                                   value.dtype == like.dtype):
            return as_param(value, like, name)
        if torch.compiler.is_compiling():
            # a copy inside the graph: Dynamo cannot trace the store's
            # update, and a break there would make it skip the whole loop
            return value.to(like.device, like.dtype)
        return read_back(self.__dict__.setdefault("_copies", {}),
                         (name, like.device, like.dtype), value,
                         lambda t: t.to(like.device, like.dtype))

    def _number(self, value) -> float:
        """A tensor's value, read back only when the tensor changed (a read
        of a GPU tensor is a device sync, refused in a CUDA graph capture)."""
        if not isinstance(value, torch.Tensor):
            return float(value)
        return read_back(self.__dict__, "_alpha", value, float)

    def _scan(self, config) -> Scan:
        scans = self.__dict__.setdefault("_scans", {})
        scan = scans.get(config)
        if scan is None:
            ns = len(self.model.state._fields)
            scan = scans[config] = Scan(StepCore(self.model.step, config), ns,
                                        sum(c is None for _, c in config[3]),
                                        backend=self.backend)
        self.__dict__["_current"] = (scan, config[3])
        return scan

    def initial_state(self, x: torch.Tensor) -> NamedTuple:
        """Norse's initial state for input ``[T, ...]``, one step's shape."""
        values = self.model.initial(self.module, self.module.p)
        return self.model.state(**{f: values.get(f, 0.0) for f in self.model.state._fields})

    def forward(self, x: torch.Tensor, state: Optional[NamedTuple] = None):
        """One step (a cell: the scan over that one step, Norse's cell
        arithmetic), or all T steps of ``[T, ...]`` (a multi-step module), as
        in Norse."""
        if self.single_step:
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"flexsn {self.model.name} takes a tensor, got "
                                f"{type(x).__name__}")
            out, _, final = self.scan_states(x.unsqueeze(0), state)
            return out[0], final
        return self.forward_sequence(x, state)

    def forward_sequence(self, x: torch.Tensor, state: Optional[NamedTuple] = None):
        """All T steps of `x` ``[T, ...]`` in one compiled scan: ``(outputs
        [T, ...], final state)``, what Norse's multi-step module returns."""
        record = bool(getattr(self.module, "record_states", False))
        out, seqs, finals = self.scan_states(x, state, want_seqs=record)
        return out, (seqs if record else finals)

    def scan_states(self, x: torch.Tensor, state: Optional[NamedTuple] = None,
                    want_seqs: bool = False):
        """``(outputs [T, ...], state sequences or None, final state)`` of
        the scan, the states as Norse's state tuples."""
        x = check_sequence(x, f"flexsn {self.model.name}")
        if torch.compiler.is_compiling():
            # Dynamo cannot read alpha's value back: inside a compiled graph
            # the configuration (method, alpha, Python numbers) is the one of
            # the last eager call; tensor parameters are read as always
            scan, layout = self._current
            p = self.module.p
            params = [as_param(getattr(p, n), x, n) for n, const in layout if const is None]
        else:
            config, params = self._config(x)
            scan = self._scan(config)
        step = tuple(x.shape[1:])
        if state is None:
            state = self.initial_state(x)
        fields = self.model.state._fields
        if not isinstance(state, tuple) or len(state) != len(fields):
            raise TypeError(f"state must be a {self.model.state.__name__}"
                            f"({', '.join(fields)}), got {type(state).__name__}")
        inits = []
        for name, s in zip(fields, state):
            if not isinstance(s, torch.Tensor):
                s = torch.full(step, float(s), dtype=x.dtype, device=x.device)
            elif s.requires_grad:  # keeps its gradient
                s = s.to(x.device, x.dtype)
            else:
                s = self._on(x, "state." + name, s)
            if tuple(s.shape) != step:
                try:
                    s = s.expand(step)
                except RuntimeError:
                    raise ValueError(f"state.{name} has shape {tuple(s.shape)}, which does "
                                     f"not broadcast to one step of the input {step}") \
                        from None
            inits.append(s.contiguous())
        out, seqs, finals = scan(x, inits, params, want_seqs=want_seqs)
        return (out, None if seqs is None else self.model.state(*seqs),
                self.model.state(*finals))

    def extra_repr(self) -> str:
        return (f"model={self.model.name}, superspike={self.superspike!r}, "
                f"single_step={self.single_step}")


def from_norse(module: nn.Module, *, superspike: str = "formula",
               backend: Optional[str] = None) -> NorseNeuron:
    """The fused multi-step form of Norse `module` (a cell, its multi-step
    module, or ``Lift(cell)``); see the module docstring. backend: None
    (compiled kernels on the input's device) or "torch" (a Python loop)."""
    if isinstance(module, NorseNeuron):
        return module
    if not isinstance(module, nn.Module):
        raise TypeError(f"from_norse takes a Norse module, got {type(module).__name__}")
    single_step = isinstance(module, _CELLS)
    if isinstance(module, _m.Lift):
        module = module.lifted_module
    return NorseNeuron(module, superspike=superspike, backend=backend,
                       single_step=single_step)


# --------------------------------------------------------------------------
# Norse's own cells under flexsn.backend. A cell called without a state
# makes its initial one and sets requires_grad on its v: a store Dynamo
# cannot trace, and a break inside a loop over time makes it skip the whole
# loop. While a flexsn.backend graph is traced, the initial state is made
# here as each cell makes it, without that flag (a leaf of the cell's own,
# which no caller can read a gradient of); the step is Norse's own.
# --------------------------------------------------------------------------

def _zeros(x, dtype=None):
    return torch.zeros(x.shape, device=x.device, dtype=x.dtype if dtype is None else dtype)


_INITIAL = {
    _m.LIFCell: lambda cell, x: LIFFeedForwardState(
        v=cell.p.v_leak.detach().clone(), i=_zeros(x, torch.float32)),
    _m.LIFBoxCell: lambda cell, x: LIFBoxFeedForwardState(v=cell.p.v_leak.detach().clone()),
    _m.LICell: lambda cell, x: LIState(v=cell.p.v_leak.detach(), i=_zeros(x)),
    _m.IAFCell: lambda cell, x: IAFFeedForwardState(v=cell.p.v_reset.to(x.device)),
    _m.LIFAdExCell: lambda cell, x: LIFAdExFeedForwardState(
        v=cell.p.v_leak.detach(), i=_zeros(x), a=_zeros(x)),
    _m.IzhikevichCell: lambda cell, x: cell.spiking_method.s,
}


@torch._dynamo.assume_constant_result
def _initial_of(cls) -> Optional[type]:
    """The cell class of _INITIAL whose initial state a `cls` cell makes (a
    subclass may override it), or None. A constant of the trace: Dynamo does
    not follow the class walk."""
    for base in cls.__mro__:
        if base in _INITIAL:
            return base if cls.initial_state is base.initial_state else None
    return None


def captured_forward(original: Callable) -> Callable:
    """`original` (Norse's cell forward) with the initial state above while
    Dynamo traces; flexsn.backend installs it while it compiles."""
    @functools.wraps(original)
    def forward(self, input_tensor, state=None):
        if state is None and torch.compiler.is_compiling() and traced_for_flexsn():
            base = _initial_of(type(self))
            if base is not None:
                state = _INITIAL[base](self, input_tensor)
        return original(self, input_tensor, state)
    return forward
