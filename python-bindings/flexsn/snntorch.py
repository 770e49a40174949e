"""snnTorch neurons as fused multi-step kernels.

``flexsn.from_snntorch(neuron)`` takes an snnTorch 1.0 neuron (``Leaky``,
``Synaptic``, ``Alpha``, ``Lapicque``, ``RLeaky`` / ``RSynaptic`` with
``all_to_all=False``) and returns the same neuron as a module of this file's
classes (subclasses of snnTorch's, sharing the neuron's parameters and
buffers). A call means what it means in snnTorch: one time step, computed by
snnTorch's own forward, so a loop written for snnTorch runs unchanged.
``forward_sequence`` runs all T steps of ``[T, ...]`` in one compiled scan
and returns what snnTorch's forward returns at each step, stacked over T::

    lif = snntorch.Leaky(beta=0.9)
    fused = flexsn.from_snntorch(lif)
    spk, mem = fused(x_seq[0])                        # one step, as snnTorch
    spk_seq, mem_seq = fused.forward_sequence(x_seq)  # x_seq: [T, B, ...]

``flexsn.multistep`` runs a network of such neurons, written a step at a
time, over whole sequences.

The classes take snnTorch's constructor too: ``flexsn.snntorch.Leaky(beta=0.9)``.

Each step is snnTorch's own arithmetic (see docs/interop.md): the reset
signal of step t is the detached spike of the previous membrane, beta and
alpha are clamped to [0, 1], the spike is ``(mem - threshold > 0)`` times
``graded_spikes_factor``, and with ``reset_delay=False`` the reset of the
step's own spike is applied at once. The surrogate gradient is snnTorch's
object, recognised and compiled into the kernel: atan (the default),
sigmoid, fast_sigmoid, straight_through_estimator, triangular,
spike_rate_escape and heaviside; ``surrogate_disable=True`` compiles a
spike with no gradient.

States live where snnTorch keeps them (``mem``, ``syn``, ...), so
``init_leaky()``, ``reset_mem()``, ``detach_hidden()`` and
``snntorch.utils.reset(net)`` act on them: a ``forward_sequence`` call
without states continues from the stored ones (zeros when their shape is not
one step of the input), and stores the final states, as T calls would.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Callable, Optional

import torch

try:
    import snntorch as _snn
    from snntorch._neurons.neurons import SpikingNeuron as _SpikingNeuron
except ImportError as e:  # the adapter is optional; its library is the user's
    raise ImportError(f"flexsn.snntorch needs snntorch (snntorch==1.0.0 is the version tested): "
                      f"{e}") from e

from ._adapters import (Scan, StepCore, Surrogate, as_param, check_sequence, fire,
                        read_back, share_as)
from ._adapters import _KIND, traced_for_flexsn

__all__ = ["from_snntorch", "surrogate_of", "Leaky", "Synaptic", "Alpha", "Lapicque",
           "RLeaky", "RSynaptic"]

_SUBTRACT, _ZERO, _NONE = 0, 1, 2


# --------------------------------------------------------------------------
# Surrogates: snnTorch's factories return closures `<name>.<locals>.inner`.
# --------------------------------------------------------------------------

def _atan(alpha=2.0):
    return Surrogate(_KIND["ATan"], (float(alpha),), name=f"atan(alpha={alpha})")


def _sigmoid(slope=25):
    # k e^{-kx} / (e^{-kx} + 1)^2 is the Sigmoid family's derivative
    return Surrogate(_KIND["Sigmoid"], (float(slope),), name=f"sigmoid(slope={slope})")


def _fast_sigmoid(slope=25):
    # 1 / (k|x| + 1)^2 = d/dx of SuperSpike(alpha=1/k) at k x
    k = float(slope)
    if k <= 0:
        raise ValueError(f"fast_sigmoid needs slope > 0, got {slope}")
    return Surrogate(_KIND["SuperSpike"], (1.0 / k,), scale_in=k,
                     name=f"fast_sigmoid(slope={slope})")


def _straight_through_estimator():
    return Surrogate(_KIND["LeakyKReLU"], (1.0, 1.0), name="straight_through_estimator()")


def _triangular(threshold=1):
    # snnTorch's gradient is threshold where x < 0 and -threshold where x >= 0
    t = float(threshold)
    return Surrogate(_KIND["LeakyKReLU"], (t, -t), name=f"triangular(threshold={threshold})")


def _spike_rate_escape(beta=1, slope=25):
    # slope * exp(-beta |x - 1|) = (2 slope / beta) * PiecewiseExp(beta)' at x - 1
    b = float(beta)
    if b <= 0:
        raise ValueError(f"spike_rate_escape needs beta > 0, got {beta}")
    return Surrogate(_KIND["PiecewiseExp"], (b,), shift=-1.0, scale_out=2.0 * float(slope) / b,
                     name=f"spike_rate_escape(beta={beta}, slope={slope})")


def _heaviside():
    # gradient = the spike itself (1 where x > 0): LeakyKReLU(leak=1, k=0)
    # read at -x, negated twice
    return Surrogate(_KIND["LeakyKReLU"], (1.0, 0.0), scale_in=-1.0, scale_out=-1.0,
                     name="heaviside()")


_FACTORIES: dict[str, Callable[..., Surrogate]] = {
    "atan": _atan, "sigmoid": _sigmoid, "fast_sigmoid": _fast_sigmoid,
    "straight_through_estimator": _straight_through_estimator,
    "triangular": _triangular, "spike_rate_escape": _spike_rate_escape,
    "heaviside": _heaviside,
}


def _factory_call(fn) -> Optional[tuple[str, dict]]:
    """(factory name, its arguments) of an snnTorch surrogate closure."""
    qual = getattr(fn, "__qualname__", "")
    if getattr(fn, "__module__", None) != "snntorch.surrogate" or \
            not qual.endswith(".<locals>.inner"):
        return None
    name = qual.split(".")[0]
    try:
        values = dict(inspect.getclosurevars(fn).nonlocals)
    except TypeError:
        return None
    return name, values


def surrogate_of(neuron) -> Surrogate:
    """The compiled form of `neuron.spike_grad` (or of
    ``surrogate_disable=True``); ValueError naming the surrogate when it has
    none."""
    if getattr(neuron, "surrogate_disable", False):
        return Surrogate(None, name="surrogate_disable")
    fn = neuron.spike_grad
    cached = neuron.__dict__.get("_flexsn_surrogate")
    if cached is not None and cached[0] is fn:  # inspecting a closure costs ~20 us
        return cached[1]
    sg = _surrogate_of_function(fn)
    neuron.__dict__["_flexsn_surrogate"] = (fn, sg)
    return sg


def _surrogate_of_function(fn) -> Surrogate:
    call = _factory_call(fn)
    if call is not None and call[0] in _FACTORIES:
        name, values = call
        factory = _FACTORIES[name]
        wanted = inspect.signature(factory).parameters
        return factory(**{k: v for k, v in values.items() if k in wanted})
    what = call[0] if call else getattr(fn, "__qualname__", repr(fn))
    raise ValueError(
        f"flexsn cannot compile the snnTorch surrogate {what!r}: supported are "
        f"{', '.join(_FACTORIES)} (snntorch.surrogate.<name>(...)) and "
        "surrogate_disable=True; stochastic surrogates (SSO, LSO), SFS and "
        "custom_surrogate have no compiled form")


# --------------------------------------------------------------------------
# Steps: snnTorch's arithmetic, op for op. config = (reset, reset_delay, sg).
# --------------------------------------------------------------------------

def _spike(x, sg):
    """sg: a compiled Surrogate, or (as flexsn.backend traces snnTorch's own
    classes) the neuron's spike_grad itself."""
    return fire(x, sg) if isinstance(sg, Surrogate) else sg(x)


def _reset_signal(mem, thr, config):
    # snnTorch: spike_grad(mem - threshold).clone().detach(): no gradient
    sg = config[2]
    if isinstance(sg, Surrogate) or _spikes_as_step(sg):
        return (mem - thr > 0).to(mem.dtype)
    return sg(mem - thr).detach()


@torch._dynamo.assume_constant_result
def _spikes_as_step(fn) -> bool:
    """Whether spike_grad `fn` spikes as (x > 0), as snnTorch's surrogate
    factories and its surrogate_disable bypass do. A constant of a trace:
    the reset then is the comparison whatever needs a gradient (Dynamo
    traces the spike function's forward alone where nothing does, which
    would make a loop's first step differ from the others)."""
    if fn is _SpikingNeuron._surrogate_bypass:  # a staticmethod
        return True
    call = _factory_call(fn)
    return call is not None and call[0] in _FACTORIES


def _delayed_reset(base, rst, thr, reset):
    """The previous step's spike (rst) resets the new membrane."""
    if reset == _SUBTRACT:
        return base - rst * thr
    if reset == _ZERO:
        return base - rst * base
    return base


def _fire(base, rst, thr, g, config):
    """The spike of the membrane, and the membrane after an immediate reset
    (reset_delay=False: do_reset = spk / g - rst, as snnTorch computes it)."""
    reset, delay, sg = config
    spk = _spike(base - thr, sg) * g
    if not delay:
        do_reset = spk / g - rst
        if reset == _SUBTRACT:
            base = base - do_reset * thr
        elif reset == _ZERO:
            base = base - do_reset * base
    return spk, base


def _leaky_step(config, x, mem, beta, thr, g):
    rst = _reset_signal(mem, thr, config)
    b = beta.clamp(0, 1)
    if config[0] == _ZERO:  # Leaky zeroes the old membrane before the decay
        base = b * ((1 - rst) * mem) + x
    else:
        base = _delayed_reset(b * mem + x, rst, thr, config[0])
    return _fire(base, rst, thr, g, config)


def _synaptic_step(config, x, syn, mem, alpha, beta, thr, g):
    rst = _reset_signal(mem, thr, config)
    syn = alpha.clamp(0, 1) * syn + x
    base = _delayed_reset(beta.clamp(0, 1) * mem + syn, rst, thr, config[0])  # syn not reset
    spk, base = _fire(base, rst, thr, g, config)
    return spk, syn, base


def _alpha_step(config, x, syn_exc, syn_inh, mem, alpha, beta, thr, g):
    reset = config[0]
    rst = _reset_signal(mem, thr, config)
    a, b = alpha.clamp(0, 1), beta.clamp(0, 1)
    exc = a * syn_exc + x
    inh = b * syn_inh - x
    tau_alpha = torch.log(a) / (torch.log(b) - torch.log(a)) + 1
    base = tau_alpha * (exc + inh)
    if reset == _SUBTRACT:
        exc = exc - thr * rst
        inh = inh - (b * syn_inh - x) * rst
        base = base - (-syn_inh) * rst
    elif reset == _ZERO:
        exc = exc - exc * rst
        inh = inh - inh * rst
        base = base - base * rst
    spk, base = _fire(base, rst, thr, g, config)  # Alpha has no reset_delay
    return spk, exc, inh, base


def _lapicque_step(config, x, mem, r, c, dt, thr, g):
    rst = _reset_signal(mem, thr, config)
    base = x * r * (1 / (r * c)) * dt + (1 - dt / (r * c)) * mem
    return _fire(_delayed_reset(base, rst, thr, config[0]), rst, thr, g, config)


def _rleaky_step(config, x, spk, mem, beta, v, thr, g):
    rst = _reset_signal(mem, thr, config)
    base = beta.clamp(0, 1) * mem + x + spk * v
    spk, base = _fire(_delayed_reset(base, rst, thr, config[0]), rst, thr, g, config)
    return spk, spk, base


def _rsynaptic_step(config, x, spk, syn, mem, alpha, beta, v, thr, g):
    rst = _reset_signal(mem, thr, config)
    syn = alpha.clamp(0, 1) * syn + x + spk * v
    base = _delayed_reset(beta.clamp(0, 1) * mem + syn, rst, thr, config[0])
    spk, base = _fire(base, rst, thr, g, config)
    return spk, spk, syn, base


@dataclass(frozen=True)
class _Spec:
    step: Callable
    states: tuple        # state attributes, in the step's order
    returns: tuple       # what forward returns after spk (state names)
    params: tuple        # attributes read as kernel parameters
    has_delay: bool      # the class takes reset_delay


_SPECS = {
    _snn.Leaky: _Spec(_leaky_step, ("mem",), ("mem",),
                      ("beta", "threshold", "graded_spikes_factor"), True),
    _snn.Synaptic: _Spec(_synaptic_step, ("syn", "mem"), ("syn", "mem"),
                         ("alpha", "beta", "threshold", "graded_spikes_factor"), True),
    _snn.Alpha: _Spec(_alpha_step, ("syn_exc", "syn_inh", "mem"), ("syn_exc", "syn_inh", "mem"),
                      ("alpha", "beta", "threshold", "graded_spikes_factor"), False),
    _snn.Lapicque: _Spec(_lapicque_step, ("mem",), ("mem",),
                         ("R", "C", "time_step", "threshold", "graded_spikes_factor"), False),
    _snn.RLeaky: _Spec(_rleaky_step, ("spk", "mem"), ("mem",),
                       ("beta", "V", "threshold", "graded_spikes_factor"), True),
    _snn.RSynaptic: _Spec(_rsynaptic_step, ("spk", "syn", "mem"), ("syn", "mem"),
                          ("alpha", "beta", "V", "threshold", "graded_spikes_factor"), True),
}

# Methods whose override in a user's subclass changes the dynamics.
_STEP_METHODS = ("forward", "fire", "mem_reset", "_base_state_function", "_base_sub",
                 "_base_zero", "_base_int", "_base_state_reset_zero",
                 "_base_state_reset_sub_function")


def _spec_base(cls) -> type:
    """The snnTorch class whose dynamics `cls` has."""
    for base in cls.__mro__:
        if base in _SPECS:
            for k in cls.__mro__[:cls.__mro__.index(base)]:
                if k.__module__ == __name__:
                    continue
                changed = [m for m in _STEP_METHODS if m in vars(k)]
                if changed:
                    raise ValueError(
                        f"{cls.__name__} overrides {', '.join(changed)} of snntorch."
                        f"{base.__name__}: its dynamics are its own, which flexsn does "
                        "not read; write them as a flexsn.FlexSN core")
            return base
    if isinstance(cls, type) and issubclass(cls, _SpikingNeuron):
        raise ValueError(
            f"snntorch.{cls.__name__} has no fused form: supported are "
            f"{', '.join(c.__name__ for c in _SPECS)}"
            + ("; SLSTM and SConv2dLSTM mix neurons through an LSTM cell"
               if "LSTM" in cls.__name__ else ""))
    raise TypeError(f"from_snntorch takes an snnTorch neuron, got {cls.__name__}")


def _store_given(neuron, spec: _Spec, states: tuple, named: dict) -> None:
    """Stores the states a call passes where snnTorch's forward keeps them,
    with snnTorch's refusals."""
    name = type(neuron).__name__
    if len(states) > len(spec.states):
        raise TypeError(f"{name} takes the input and at most {len(spec.states)} "
                        f"states ({', '.join(spec.states)}), got {1 + len(states)} "
                        "arguments")
    given = dict(zip(spec.states, states))
    for k, v in named.items():
        if k not in spec.states:
            raise TypeError(f"{name}.forward() got an unexpected keyword argument {k!r}")
        if k in given:
            raise TypeError(f"{name}.forward() got multiple values for argument {k!r}")
        given[k] = v
    given = {k: v for k, v in given.items() if v is not None}
    if neuron.init_hidden and given:
        raise TypeError(f"{', '.join(given)} should not be passed as an argument "
                        "while `init_hidden=True`")
    for k, v in given.items():
        setattr(neuron, k, v)


def _returns(neuron, spec: _Spec, spk, by_name: dict):
    """What snnTorch's forward returns: the spikes alone for a neuron that
    keeps its states (init_hidden) and does not output them, else the
    spikes and the states the class returns."""
    if neuron.init_hidden and not neuron.output:
        return spk
    return (spk, *(by_name[k] for k in spec.returns))


class _Fused:
    """The multi-step forward shared by the fused classes (mixed in before
    the snnTorch class)."""

    _flexsn_base: type = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._flexsn_current_scan()

    # -- configuration ---------------------------------------------------
    def _flexsn_config(self) -> tuple:
        spec = _SPECS[self._flexsn_base]
        name = self._flexsn_base.__name__
        if getattr(self, "inhibition", False):
            raise ValueError(f"{name}(inhibition=True) fires only the strongest neuron "
                             "of each sample (argmax over dim 1): a cross-neuron "
                             "operation a per-neuron scan cannot compute")
        if getattr(self, "state_quant", False):
            raise ValueError(f"{name}(state_quant=...) quantizes states with snnTorch's "
                             "own autograd function; flexsn does not compile it")
        if getattr(self, "all_to_all", False):
            raise ValueError(f"{name}(all_to_all=True) feeds the previous spikes through "
                             "an nn.Linear/nn.Conv2d, mixing neurons: not a per-neuron "
                             "scan. all_to_all=False (a per-neuron weight V) is supported")
        reset = self._flexsn_reset()
        delay = bool(getattr(self, "reset_delay", True)) if spec.has_delay else True
        return reset, delay, surrogate_of(self)

    def _flexsn_reset(self) -> int:
        """The reset mechanism as snnTorch's forward reads it: the buffer
        `reset_mechanism_val` (a state_dict may set it). Its value is read
        back only when the buffer changed: a read is a device sync, which a
        CUDA graph capture refuses and every eager call would pay."""
        if torch.compiler.is_compiling():  # a Python value: no graph break
            return _SpikingNeuron.reset_dict[self._reset_mechanism]
        return read_back(self.__dict__, "_flexsn_reset_val", self.reset_mechanism_val, int)

    def _flexsn_current_scan(self) -> Scan:
        """The scan of the current configuration. Inside a torch.compile'd
        graph, the one of the last eager call (Dynamo cannot follow reading
        the surrogate closure or a buffer's value back)."""
        if torch.compiler.is_compiling():
            return self._flexsn_current
        return self._flexsn_scan(self._flexsn_config())

    def _flexsn_scan(self, config) -> Scan:
        scans = self.__dict__.setdefault("_flexsn_scans", {})
        scan = scans.get(config)
        if scan is None:
            spec = _SPECS[self._flexsn_base]
            scan = scans[config] = Scan(StepCore(spec.step, config), len(spec.states),
                                        len(spec.params),
                                        backend=self.__dict__.get("_flexsn_backend"))
        self.__dict__["_flexsn_current"] = scan
        return scan

    # -- the call: one step (snnTorch's own forward, eagerly) -------------------
    def forward(self, input_, *states, **named):
        """One step, as snnTorch's forward computes it. Under torch.compile,
        where Dynamo cannot trace snnTorch's forward without a graph break
        (its ``mem == None`` test) and a break inside a loop over time makes
        it run the whole forward eagerly, the step runs as this neuron's
        scan over one step: the same update, returns and stored states, as
        one operator call (which flexsn.backend rolls over a loop's steps)."""
        if not torch.compiler.is_compiling():
            return super().forward(input_, *states, **named)
        out = self._flexsn_sequence(input_.unsqueeze(0), states, named, finals=True)
        if isinstance(out, torch.Tensor):
            return out[0]
        return (out[0][0], *out[1:])

    def forward_sequence(self, input_, *states, **named):
        """All T steps of `input_` ``[T, ...]`` in one compiled scan: what T
        calls of ``forward`` on ``input_[t]`` return, stacked over T, with
        the final states stored where those calls leave them."""
        return self._flexsn_sequence(input_, states, named)

    def _flexsn_sequence(self, input_, states, named, finals: bool = False):
        """forward_sequence; `finals`: the states it returns are the final
        ones (``[...]``, not ``[T, ...]``), and no state sequence is written
        (flexsn.multistep, where the step only stores them)."""
        spec = _SPECS[self._flexsn_base]
        x = check_sequence(input_, type(self).__name__)
        _store_given(self, spec, states, named)
        scan = self._flexsn_current_scan()
        step = tuple(x.shape[1:])
        current = [getattr(self, k) for k in spec.states]
        fresh = [not isinstance(s, torch.Tensor) or tuple(s.shape) != step for s in current]
        if all(fresh):
            inits = None  # zeros, made inside the kernel
        else:
            inits = [x.new_zeros(step) if f else s.to(x.dtype) if s.dtype != x.dtype else s
                     for s, f in zip(current, fresh)]
        params = [as_param(getattr(self, p), x, p) for p in spec.params]
        spikes_only = self.init_hidden and not self.output
        spk, seqs, ends = scan(x, inits, params, want_seqs=not (spikes_only or finals))
        for k, v in zip(spec.states, ends):
            setattr(self, k, v)
        return _returns(self, spec, spk,
                        dict(zip(spec.states, ends if finals or spikes_only else seqs)))

    # -- copies and pickles ------------------------------------------------
    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_flexsn_scans", None)  # kernels of this process
        state.pop("_flexsn_surrogate", None)
        state.pop("_flexsn_reset_val", None)
        state.pop("_flexsn_current", None)
        call = _factory_call(state.get("spike_grad"))
        if call is not None:  # snnTorch's closures do not pickle: keep the call
            state["spike_grad"] = _SurrogateCall(*call)
        return state

    def __setstate__(self, state):
        sg = state.get("spike_grad")
        if isinstance(sg, _SurrogateCall):
            state["spike_grad"] = sg.build()
        self.__dict__.update(state)
        self._flexsn_current_scan()  # traced again now, not inside a compiled graph

    def extra_repr(self) -> str:
        return "fused=flexsn"


@dataclass(frozen=True)
class _SurrogateCall:
    name: str
    args: dict

    def build(self):
        import snntorch.surrogate as s
        factory = getattr(s, self.name)
        wanted = inspect.signature(factory).parameters
        return factory(**{k: v for k, v in self.args.items() if k in wanted})


def _fused_class(base: type) -> type:
    cls = type(base.__name__, (_Fused, base), {
        "__module__": __name__, "__qualname__": base.__name__, "_flexsn_base": base,
        "__doc__": f"snntorch.{base.__name__} over ``[T, ...]`` in one fused scan "
                   "(see flexsn.snntorch)."})
    return cls


Leaky = _fused_class(_snn.Leaky)
Synaptic = _fused_class(_snn.Synaptic)
Alpha = _fused_class(_snn.Alpha)
Lapicque = _fused_class(_snn.Lapicque)
RLeaky = _fused_class(_snn.RLeaky)
RSynaptic = _fused_class(_snn.RSynaptic)
_FUSED = {c._flexsn_base: c for c in (Leaky, Synaptic, Alpha, Lapicque, RLeaky, RSynaptic)}


def from_snntorch(neuron, *, backend: Optional[str] = None):
    """The fused multi-step form of snnTorch `neuron` (see the module
    docstring). Its parameters and buffers are the neuron's own tensors
    (training one trains the other); its states start fresh. backend: None
    (compiled kernels on the input's device) or "torch" (the same step in a
    Python loop)."""
    if not isinstance(neuron, torch.nn.Module):
        raise TypeError(f"from_snntorch takes an snnTorch neuron, got "
                        f"{type(neuron).__name__}")
    if isinstance(neuron, _Fused):
        return neuron
    base = _spec_base(type(neuron))
    cls = _FUSED[base]
    fused = share_as(neuron, cls)
    for k in _SPECS[base].states:  # fresh states, where the neuron kept its own
        old = getattr(neuron, k, None)  # (snnTorch makes new states on that device)
        fused._buffers[k] = torch.zeros(0, device=old.device if isinstance(
            old, torch.Tensor) else None)
    fn = getattr(neuron, "state_function", None)
    if inspect.ismethod(fn) and fn.__self__ is neuron:
        fused.state_function = getattr(fused, fn.__name__)
    if getattr(neuron, "surrogate_disable", False):
        fused.spike_grad = fused._surrogate_bypass
    fused.__dict__["_flexsn_backend"] = backend
    _SpikingNeuron.instances.append(fused)  # snntorch.utils.reset finds it
    fused._flexsn_current_scan()  # refuse what cannot compile now, not at the first call
    return fused


# --------------------------------------------------------------------------
# snnTorch's own classes under flexsn.backend. Dynamo cannot trace their
# forward (it stops at ``mem == None``, and a break inside a loop over time
# makes it skip the whole loop), so while a flexsn.backend graph is traced
# their step is this one: snnTorch's arithmetic op for op, with the
# neuron's own spike_grad, which flexsn.backend then rolls as an inline
# neuron. Anything it does not cover runs snnTorch's forward as it is.
# --------------------------------------------------------------------------

@torch._dynamo.assume_constant_result
def _captured_base(cls) -> Optional[type]:
    """The class of _SPECS whose step `cls` keeps, or None (a subclass that
    changes the dynamics). A constant of the trace: Dynamo does not follow
    the class walk."""
    try:
        return _spec_base(cls)
    except (ValueError, TypeError):
        return None


def _captured_step(neuron, base: type, input_, states: tuple, named: dict):
    spec = _SPECS[base]
    _store_given(neuron, spec, states, named)
    current = []
    for k in spec.states:
        s = getattr(neuron, k)
        if s.shape != input_.shape:
            # snnTorch starts such a state from zeros_like(input_): zeros
            # made from the shape alone are the same values and read nothing
            # of the step, so flexsn.backend takes them for the initial state
            s = torch.zeros(input_.shape, dtype=input_.dtype, device=s.device)
        current.append(s)
    reset = _SpikingNeuron.reset_dict[neuron._reset_mechanism]
    delay = bool(neuron.reset_delay) if spec.has_delay else True
    out = spec.step((reset, delay, neuron.spike_grad), input_, *current,
                    *(getattr(neuron, p) for p in spec.params))
    for k, v in zip(spec.states, out[1:]):
        setattr(neuron, k, v)
    return _returns(neuron, spec, out[0], dict(zip(spec.states, out[1:])))


def captured_forward(original: Callable) -> Callable:
    """`original` (an snnTorch class's forward) with the traced step above
    while Dynamo traces; flexsn.backend installs it while it compiles."""
    @functools.wraps(original)
    def forward(self, input_, *states, **named):
        if torch.compiler.is_compiling() and traced_for_flexsn() and not (
                self.inhibition or self.state_quant or getattr(self, "all_to_all", False)):
            base = _captured_base(type(self))
            if base is not None:
                return _captured_step(self, base, input_, states, named)
        return original(self, input_, *states, **named)
    return forward
