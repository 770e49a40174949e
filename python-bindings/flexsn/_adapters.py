"""What the library adapters (snnTorch, Norse, NIR) share: the spike of
those libraries (a strict ``x > 0`` Heaviside forward with a chosen
surrogate gradient, written with our spike op so that it compiles into the
kernel) and the scan that runs one of their step functions over ``[T, ...]``
with parameters read at each call.

A step function here is a module-level function ``step(config, x, *states,
*params) -> (output, *new_states)``; :class:`StepCore` binds it to a
hashable configuration, so that the core pickles and compares by value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from . import _layout
from . import surrogate as _sg

# Families of the dialect (surrogate.FAMILIES) used below, by name.
_KIND = {cls: i for i, (cls, _, _) in enumerate(_sg.FAMILIES)}
# Families whose derivative is even in x, so that 1 - spike(-x) (forward
# x > 0) has the same gradient as spike(x).
_EVEN = {_KIND[n] for n in ("Sigmoid", "ATan", "PiecewiseQuadratic", "PiecewiseExp",
                            "SoftSign", "SuperSpike", "Erf", "Rect")}


@dataclass(frozen=True)
class Surrogate:
    """A spike ``(x > 0)`` whose gradient is ``scale_out * scale_in *
    f'(scale_in * x + shift)``, f' the derivative of dialect family `kind`
    with `params`. kind None: no gradient (a plain step); kind "circ": the
    gradient of ``alpha * x / sqrt(x^2 + alpha^2)`` (no family has it)."""
    kind: object
    params: tuple = ()
    scale_in: float = 1.0
    shift: float = 0.0
    scale_out: float = 1.0
    name: str = ""

    def __post_init__(self):
        for field in ("scale_in", "shift", "scale_out"):
            v = getattr(self, field)
            if not math.isfinite(v):
                raise ValueError(f"surrogate {self.name or self.kind}: {field} is {v}")


def fire(x: torch.Tensor, sg: Surrogate) -> torch.Tensor:
    """The spike of `x` with surrogate `sg`: 1 where x > 0, else 0, in x's
    dtype (as snnTorch's and Norse's Heaviside)."""
    if sg.kind is None:
        return (x > 0).to(x.dtype)
    if (sg.kind in _EVEN or (sg.kind == _KIND["LeakyKReLU"] and sg.params[0] == sg.params[1])) \
            and sg.shift == 0.0 and sg.scale_out == 1.0 and sg.scale_in > 0:
        # One op: spike(y) is (y >= 0), so 1 - spike(-x) is (x > 0), and an
        # even derivative reads the same at -x.
        y = x if sg.scale_in == 1.0 else x * sg.scale_in
        return 1.0 - _sg.spike(-y, sg.kind, sg.params)
    step = (x > 0).to(x.dtype)
    if sg.kind == "circ":
        a = sg.params[0]
        g = a * x / torch.sqrt(x * x + a * a)
    else:
        y = x
        if sg.scale_in != 1.0:
            y = y * sg.scale_in
        if sg.shift != 0.0:
            y = y + sg.shift
        g = _sg.spike(y, sg.kind, sg.params)
    # g - detach(g) is exactly zero forward and carries g's gradient back.
    d = g - g.detach()
    return step + (d if sg.scale_out == 1.0 else sg.scale_out * d)


class StepCore:
    """A picklable core: `step` (a module-level function) bound to `config`
    (a hashable tuple of Python values)."""

    def __init__(self, step: Callable, config: tuple):
        self.step, self.config = step, config

    def __call__(self, *args):
        return self.step(self.config, *args)

    def __eq__(self, other):
        return isinstance(other, StepCore) and (self.step, self.config) == \
            (other.step, other.config)

    def __hash__(self):
        return hash((self.step, self.config))

    def __repr__(self):
        return f"StepCore({self.step.__name__}, {self.config!r})"


class Scan:
    """One compiled multi-step kernel of a step function: one input, ``n``
    states and ``m`` parameters (scalars or tensors that broadcast to a
    step's shape), built once per configuration. A call that wants no state
    sequences runs the final-state kernels (nothing per step is written but
    the output)."""

    def __init__(self, core: Callable, num_states: int, num_params: int,
                 backend: Optional[str] = None, strict: bool = False):
        from ._module import FlexSNKernel
        examples = tuple(torch.zeros(()) for _ in range(num_params))
        self.seqs = FlexSNKernel(core, 1, num_states, static_inputs=examples,
                                 backend=backend, strict=strict)
        # the same compiled core, final states only (pickling a kernel would
        # drop its compiled program, so no copy.copy here)
        self.finals = FlexSNKernel.__new__(FlexSNKernel)
        self.finals.__dict__.update(self.seqs.__dict__)
        self.finals.final_state = True
        self.num_states = num_states

    def __call__(self, x: torch.Tensor, states: Optional[Sequence[torch.Tensor]],
                 params: Sequence[torch.Tensor], want_seqs: bool = True):
        """(output sequence ``[T, ...]``, state sequences (None unless
        `want_seqs`), final states). `states` None: zeros."""
        outs, seqs, finals = self.run(x, states, params, want_seqs)
        return outs[0], seqs, finals

    def run(self, x: torch.Tensor, states: Optional[Sequence[torch.Tensor]],
            params: Sequence[torch.Tensor], want_seqs: bool = True):
        """(every output sequence, state sequences or None, final states),
        in x's layout when that is a permuted dense one (see _layout)."""
        kernel = self.seqs if want_seqs else self.finals
        kernel.static_inputs = params = tuple(params)
        states = None if states is None else list(states)
        every = kernel.kernel_params(params) \
            if isinstance(x, torch.Tensor) and not x.is_contiguous() else None
        layout = None if every is None else _layout.plan(x, every)
        if layout is not None and states is not None:
            if all(isinstance(s, torch.Tensor) and s.shape == x.shape[1:] for s in states):
                states = [s.permute(layout[1]) for s in states]
            else:
                layout = None  # malformed states: the checks name them in x's order
        if layout is not None:
            perm, step, back, step_back = layout
            outs, seqs, finals = self._run(kernel, [x.permute(perm)], states, params,
                                           want_seqs, step if _layout.needs_param_views(every)
                                           else None)
            return ([o.permute(back) for o in outs],
                    None if seqs is None else [q.permute(back) for q in seqs],
                    [f.permute(step_back) for f in finals])
        return self._run(kernel, [x], states, params, want_seqs)

    def _run(self, kernel, inputs, states, params, want_seqs: bool, param_perm=None):
        from ._module import _keep_plan, _run_planned
        from ._checks import validate_sequences
        compiling = torch.compiler.is_compiling()
        # a plan takes the parameters laid out by their own shape
        r = None if compiling or param_perm is not None else \
            _run_planned(kernel, kernel.compiled, inputs, states)
        if r is None:
            validate_sequences(inputs, states, 1, self.num_states)
            record = None if compiling else []
            r = kernel.run(inputs, states, want_seqs=want_seqs, static_inputs=params,
                           plan=record, param_perm=param_perm)
            if record is not None and param_perm is None:
                _keep_plan(kernel, states, record)
        outs, seqs, finals = r
        return list(outs), (list(seqs) if want_seqs else None), list(finals)


def read_back(store: dict, key, tensor: torch.Tensor, convert: Callable):
    """convert(tensor) kept in store[key] and redone only when the tensor
    object or its version changed. For what reads a value back to the host
    or copies it between devices: once per value instead of at every call
    (a device sync per call costs time, and a CUDA graph capture refuses
    it)."""
    if torch.compiler.is_compiling():
        # traced (torch.compile, torch.export): the value may be fake or
        # symbolic, and must not outlive the trace in the store
        return convert(tensor)
    hit = store.get(key)
    if hit is None or hit[0] is not tensor or hit[1] != tensor._version:
        hit = store[key] = (tensor, tensor._version, convert(tensor))
    return hit[2]


def share_as(module: torch.nn.Module, cls: type) -> torch.nn.Module:
    """An instance of `cls` (a subclass of `module`'s class, whose
    constructor is not run) holding `module`'s own parameters, buffers and
    submodules in containers of its own: training one trains the other,
    and registering on one leaves the other alone."""
    obj = cls.__new__(cls)
    state = dict(module.__dict__)
    for key, value in state.items():
        if isinstance(value, (dict, set)) and key.startswith("_"):
            state[key] = type(value)(value)
    obj.__dict__.update(state)
    return obj


def as_param(value, like: torch.Tensor, name: str) -> torch.Tensor:
    """A parameter as the kernels take it: tensors keep their identity (so
    gradients reach them) unless they are not floating point; numbers become
    0-d tensors of `like`'s dtype."""
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point():
            value = value.to(like.dtype)
        if value.device != like.device:
            value = value.to(like.device)
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return torch.tensor(float(value), dtype=like.dtype, device=like.device)
    raise TypeError(f"parameter {name} must be a number or a tensor, "
                    f"got {type(value).__name__}")


def check_sequence(x, who: str) -> torch.Tensor:
    """`x` must be a floating-point ``[T, ...]`` tensor."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{who} takes a [T, ...] tensor, got {type(x).__name__}")
    if x.dim() < 1:
        raise ValueError(f"{who} takes a [T, ...] tensor with a time dimension first, "
                         f"got a 0-d tensor")
    if not x.is_floating_point():
        raise TypeError(f"{who} takes a floating-point tensor, got {x.dtype}")
    return x


@torch._dynamo.assume_constant_result
def traced_for_flexsn() -> bool:
    """Whether the graph Dynamo is tracing goes to a flexsn.Backend (a
    constant of the trace: a graph goes to one backend). torch.compile wraps
    the backend it is given; its wrappers keep it in these fields."""
    from torch._dynamo.symbolic_convert import InstructionTranslator
    tx = InstructionTranslator.current_tx()
    fn = getattr(getattr(tx, "output", None), "compiler_fn", None)
    for _ in range(4):
        if getattr(fn, "rolls_time_loops", False):
            return True
        fn = getattr(fn, "_torchdynamo_orig_backend", None) or getattr(fn, "compiler_fn", None)
    return False
