"""Running a core over T steps: compiled (our kernels, through autograd) or
as the reference Python loop ("torch" backend).

Shapes: input sequences ``[T, *S]``, initial states ``[*S]`` (``S`` the
per-step shape, ``NCL = prod(S)`` neurons); the kernels see ``[T, NCL]`` and
``[NCL]`` views. Parameters (static inputs and tensors the core captures)
are scalars when they hold one element, otherwise they are broadcast to
``S`` and flattened (autograd reduces their gradients back).
"""

from __future__ import annotations

import math
import warnings
from typing import Callable, Optional, Sequence

import torch

from . import _program, _tracer
from ._errors import FallbackWarning, UnsupportedOpError

FLOAT_TYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class CompiledCore:
    """A traced core and the IR of each configuration it ran with."""

    def __init__(self, core: Callable, num_inputs: int, num_states: int,
                 static_inputs: Sequence[torch.Tensor] = (),
                 example_inputs: Optional[Sequence[torch.Tensor]] = None):
        self.traced = _tracer.trace(core, num_inputs, num_states, static_inputs,
                                    example_inputs)
        self.num_inputs, self.num_states = num_inputs, num_states
        self.num_outputs = self.traced.num_outputs
        # outputs, then new states: those PyTorch gives no gradient path
        self.non_differentiable = [k for k, d in enumerate(
            _tracer.differentiable_results(self.traced)) if not d]
        self._ir: dict[tuple, str] = {}
        # Emit once now: an op outside the table, or a bool output, is found
        # when the module is built, not at its first call.
        n = num_inputs + num_states + len(self.traced.params)
        self.ir([torch.float32] * (num_inputs + num_states),
                [torch.float32] * len(self.traced.params),
                [False] * len(self.traced.params), [False] * n)

    def ir(self, in_dtypes, param_dtypes, param_scalar, mask, zero_states=False) -> str:
        key = (tuple(in_dtypes), tuple(param_dtypes), tuple(param_scalar), tuple(mask),
               zero_states)
        text = self._ir.get(key)
        if text is None:
            text = _tracer.emit(self.traced, in_dtypes, param_dtypes, param_scalar, mask,
                                zero_states=zero_states)
            self._ir[key] = text
        return text

    def param_tensors(self, static_inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        out = []
        for src in self.traced.params:
            out.append(static_inputs[src.index] if src.kind == "static" else src.tensor)
        return out


def try_compile(core, num_inputs, num_states, static_inputs, example_inputs,
                strict: bool) -> Optional[CompiledCore]:
    """The compiled core, or None (with a FallbackWarning) when it uses an op
    the compiler lacks; `strict` raises UnsupportedOpError instead."""
    try:
        return CompiledCore(core, num_inputs, num_states, static_inputs, example_inputs)
    except UnsupportedOpError as e:
        if strict:
            raise
        warnings.warn(f"{e}; running the core as a Python loop (backend "
                      "'torch') instead", FallbackWarning, stacklevel=4)
        return None


class _Plan:
    """The training kernels of one call (the forward and the backward)."""
    __slots__ = ("forward", "backward", "T", "NCL", "device", "counts",
                 "param_shapes", "param_dtypes", "grad_reads", "non_differentiable")


def _feed(xs, s0, ps) -> dict:
    """The kernel arguments by meaning: inputs, initial states, params."""
    feed = {("input", i): x for i, x in enumerate(xs)}
    feed.update({("init_state", s): v for s, v in enumerate(s0)})
    feed.update({("param", p): v for p, v in enumerate(ps)})
    return feed


def _split(plan: _Plan, tensors):
    ni, ns, npar, _ = plan.counts
    return tensors[:ni], tensors[ni:ni + ns], tensors[ni + ns:ni + ns + npar]


def launch_forward(plan: _Plan, tensors):
    """Training forward on flat tensors (inputs [T, NCL], initial states
    [NCL], params): outputs and state sequences, [T, NCL] each."""
    no, ns = plan.counts[3], plan.counts[1]
    res = plan.forward(_feed(*_split(plan, tensors)), plan.T, plan.NCL, plan.device)
    return ([res[("output", k)] for k in range(no)],
            [res[("state_seq", s)] for s in range(ns)])


def launch_backward(plan: _Plan, tensors, seqs, grads):
    """Backward kernel: `grads` holds the gradient (or None) of each output
    and state sequence; returns the gradient (or None) of each flat input,
    initial state and parameter."""
    ni, ns, npar, no = plan.counts
    T, NCL, device = plan.T, plan.NCL, plan.device
    feed = _feed(*_split(plan, tensors))
    feed.update({("state_seq", s): q for s, q in enumerate(seqs)})
    for meaning, index in plan.grad_reads:
        g = grads[index] if meaning == "grad_output" else grads[no + index]
        # No gradient: no buffer (the kernel reads a null gradient as zeros).
        if g is not None:
            feed[(meaning, index)] = _program.flat(g, (T, NCL))
    res = plan.backward(feed, T, NCL, device)
    out = [res.get(("grad_input", i)) for i in range(ni)]
    out += [res.get(("grad_init_state", s)) for s in range(ns)]
    for p in range(npar):
        g = res.get(("grad_param", p))
        if g is not None:
            g = g.to(plan.param_dtypes[p]).view(plan.param_shapes[p])
        out.append(g)
    return out


class ScanFunction(torch.autograd.Function):
    """Training forward kernel, and the backward kernel for BPTT."""

    @staticmethod
    def forward(ctx, plan: _Plan, *tensors):
        outs, seqs = launch_forward(plan, tensors)
        # A result without a gradient reaches backward as None, not as a
        # tensor of zeros that autograd would allocate and fill.
        ctx.set_materialize_grads(False)
        ctx.plan = plan
        ctx.save_for_backward(*tensors, *seqs)
        result = (*outs, *seqs)
        if plan.non_differentiable:
            ctx.mark_non_differentiable(*[result[k] for k in plan.non_differentiable])
        return result

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        plan: _Plan = ctx.plan
        n = sum(plan.counts[:3])
        saved = ctx.saved_tensors
        return (None, *launch_backward(plan, saved[:n], saved[n:], grads))


def validate_sequences(inputs, states, num_inputs, num_states, step_mode="m"):
    """Checks counts, types, dtypes, devices and per-step sizes; returns
    (T, per-step shape) (T is None in step mode "s")."""
    if len(inputs) != num_inputs:
        raise TypeError(f"expected {num_inputs} input tensor(s), got {len(inputs)}")
    if states is not None and len(states) != num_states:
        raise TypeError(f"expected {num_states} state tensor(s), got {len(states)}")
    all_t = list(inputs) + list(states or [])
    for k, t in enumerate(all_t):
        what = f"input #{k}" if k < num_inputs else f"state #{k - num_inputs}"
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in FLOAT_TYPES:
            raise TypeError(f"{what} has dtype {t.dtype}; FlexSN takes float32, "
                            "float16, bfloat16 or float64 tensors")
    first = inputs[0]
    if step_mode == "m":
        if first.dim() < 1:
            raise ValueError("input #0 must have a time dimension first: [T, N, ...]")
        T, step = first.shape[0], tuple(first.shape[1:])
    else:
        T, step = None, tuple(first.shape)
    numel = math.prod(step)
    for k, t in enumerate(all_t):
        what = f"input #{k}" if k < num_inputs else f"state #{k - num_inputs}"
        if t.dtype != first.dtype:
            raise TypeError(f"{what} has dtype {t.dtype} but input #0 has {first.dtype}; "
                            "every input and state shares one dtype")
        if t.device != first.device:
            raise ValueError(f"{what} is on {t.device} but input #0 is on {first.device}")
        if k < num_inputs and step_mode == "m":
            if t.dim() < 1 or t.shape[0] != T:
                raise ValueError(f"{what} has shape {tuple(t.shape)}; every input "
                                 f"sequence has T={T} steps first")
            n = math.prod(t.shape[1:])
        else:
            n = t.numel()
        if n != numel:
            raise ValueError(f"{what} has {n} elements per step but input #0 has "
                             f"{numel} (shape {step}); they must match")
    return T, step


def requires_grad_mask(inputs, init_states, num_states, params,
                       grad_mask: Optional[Sequence[bool]] = None) -> list[bool]:
    """Which inputs, initial states (None: zeros, no gradient) and params
    take a gradient: they require grad and `grad_mask` (the tutorial API's
    requires_grad, extended over params) allows it."""
    mask = [t.requires_grad for t in inputs]
    mask += [False] * num_states if init_states is None else \
        [t.requires_grad for t in init_states]
    mask += [t.requires_grad for t in params]
    if grad_mask is not None:
        mask = [m and g for m, g in zip(mask, grad_mask)]
    return mask


def _param_views(params, step, device):
    flat, dtypes, scalar = [], [], []
    numel = math.prod(step)
    for p, t in enumerate(params):
        if not isinstance(t, torch.Tensor) or t.dtype not in FLOAT_TYPES:
            raise TypeError(f"parameter #{p} must be a floating-point tensor")
        if t.device != device:
            t = t.to(device)
        dtypes.append(t.dtype)
        if t.numel() == 1:
            flat.append(t.reshape(1))
            scalar.append(True)
            continue
        try:
            full = t.expand(step) if tuple(t.shape) != step else t
        except RuntimeError:
            raise ValueError(f"parameter #{p} has shape {tuple(t.shape)}, which does "
                             f"not broadcast to the per-step shape {step}") from None
        flat.append(_program.flat(full, (numel,)))
        scalar.append(False)
    return flat, dtypes, scalar


class Call:
    """One compiled call, prepared: flat views of the tensors, the kernel
    configuration (dtypes, parameter kinds, requires-grad mask) and where
    it runs."""

    def __init__(self, cc: CompiledCore, inputs, init_states, params,
                 grad_mask: Optional[Sequence[bool]] = None, training=None,
                 explicit_mask: Optional[Sequence[bool]] = None):
        ni, ns = cc.num_inputs, cc.num_states
        self.cc = cc
        first = inputs[0]
        self.first, self.device = first, first.device
        self.T, self.step = first.shape[0], tuple(first.shape[1:])
        self.NCL = NCL = math.prod(self.step)
        self.zero_states = init_states is None
        if training is None:
            training = torch.is_grad_enabled() and any(
                t.requires_grad for t in list(inputs) + list(params) + list(init_states or []))
        if self.zero_states and (self.T == 0 or training):
            # The training forward takes its initial states: zeros it is.
            init_states = [first.new_zeros(self.step) for _ in range(ns)]
            self.zero_states = False
        elif self.zero_states:
            init_states = []
        self.init_states = list(init_states)
        self.xs = [_program.flat(x, (self.T, NCL)) for x in inputs]
        self.s0 = [_program.flat(s, (NCL,)) for s in init_states]
        self.ps, self.p_dtypes, self.p_scalar = _param_views(params, self.step,
                                                             self.device)
        self.in_dtypes = [first.dtype] * (ni + ns)
        if explicit_mask is not None:  # the custom ops: tensors below autograd
            self.mask = [bool(m) for m in explicit_mask]
        else:
            self.mask = requires_grad_mask(
                inputs, None if self.zero_states else init_states, ns, params, grad_mask)
        self.training = bool(training) and any(self.mask)
        self.target = "cuda" if self.device.type == "cuda" else "cpu"
        if self.target == "cuda":
            self.chip = _program.chip_of(self.device)
            index = self.device.index
            self.dev_index = index if index is not None else torch.cuda.current_device()
        else:
            self.chip, self.dev_index = None, 0

    def plan(self) -> _Plan:
        cc = self.cc
        ir = cc.ir(self.in_dtypes, self.p_dtypes, self.p_scalar, self.mask)
        program = _program.get_program(ir, self.target, self.chip, differentiate=True)
        plan = _Plan()
        plan.forward = program.launcher("core_forward", self.dev_index)
        plan.backward = program.launcher("core_backward", self.dev_index)
        # The backward follows: on its first use its driver compile runs
        # while the forward's does (a no-op once loaded).
        plan.backward.preload(self.NCL)
        plan.T, plan.NCL, plan.device = self.T, self.NCL, self.device
        plan.counts = (cc.num_inputs, cc.num_states, len(self.ps), cc.num_outputs)
        plan.param_shapes = [(1,) if sc else (self.NCL,) for sc in self.p_scalar]
        plan.param_dtypes = self.p_dtypes
        plan.non_differentiable = cc.non_differentiable
        plan.grad_reads = [key for _, key, _ in plan.backward.reads
                           if key[0] in ("grad_output", "grad_state_seq")]
        return plan

    def infer(self, want_seqs: bool):
        """The inference kernel: (outputs, state sequences or None, final
        states), shaped [T, *S] / [*S]."""
        cc, T, step = self.cc, self.T, self.step
        ir = cc.ir(self.in_dtypes, self.p_dtypes, self.p_scalar, [False] * len(self.mask),
                   self.zero_states)
        program = _program.get_program(ir, self.target, self.chip)
        name = "core_inference" if want_seqs else "core_final_state"
        launcher = program.launcher(name, self.dev_index)
        res = launcher(_feed(self.xs, self.s0, self.ps), T, self.NCL, self.device)
        outs = [res[("output", k)].view(T, *step) for k in range(cc.num_outputs)]
        if want_seqs:
            seqs = [res[("state_seq", s)].view(T, *step) for s in range(cc.num_states)]
            return outs, seqs, [q[-1] for q in seqs]
        return outs, None, [res[("final_state", s)].view(step) for s in range(cc.num_states)]

    def empty(self, want_seqs: bool):
        """T == 0: no launch."""
        first, step, no, ns = self.first, self.step, self.cc.num_outputs, self.cc.num_states
        outs = [first.new_empty((0, *step)) for _ in range(no)]
        if self.training:
            outs = [first * 0 for _ in range(no)]
        seqs = [first.new_empty((0, *step)) for _ in range(ns)] if want_seqs else None
        return outs, seqs, list(self.init_states)


def run_compiled(cc: CompiledCore, inputs, init_states, params, *, want_seqs: bool,
                 grad_mask: Optional[Sequence[bool]] = None):
    """Runs `cc` on `inputs` ([T, *S]) from `init_states` ([*S]; None: zeros)
    with `params`; returns (outputs [T, *S], state sequences [T, *S] or None,
    final states [*S])."""
    call = Call(cc, inputs, init_states, params, grad_mask)
    if call.T == 0:
        return call.empty(want_seqs)
    if not call.training:
        return call.infer(want_seqs)
    T, step, no = call.T, call.step, cc.num_outputs
    res = ScanFunction.apply(call.plan(), *call.xs, *call.s0, *call.ps)
    outs, seqs = list(res[:no]), list(res[no:])
    finals = [q[-1].view(step) for q in seqs]
    outs = [o.view(T, *step) for o in outs]
    seqs = [q.view(T, *step) for q in seqs]
    return outs, (seqs if want_seqs else None), finals


def as_tuple(r, num_outputs_and_states: int):
    if isinstance(r, torch.Tensor):
        r = (r,)
    if not isinstance(r, (tuple, list)):
        raise TypeError(f"the core must return a tuple of tensors, got {type(r).__name__}")
    if len(r) != num_outputs_and_states:
        raise ValueError(f"the core returned {len(r)} values; expected "
                         f"{num_outputs_and_states} (outputs, then new states)")
    for k, v in enumerate(r):
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"the core's return value #{k} is {type(v).__name__}; "
                            "it must return tensors")
    return tuple(r)


def run_torch(core, num_outputs, inputs, init_states, statics, *, want_seqs: bool,
              out_dtypes=None):
    """The reference: `core` called once per step in Python."""
    ns = len(init_states)
    T, step = inputs[0].shape[0], tuple(inputs[0].shape[1:])
    states = list(init_states)
    outs_t, seqs_t = [[] for _ in range(num_outputs)], [[] for _ in range(ns)]
    for t in range(T):
        r = as_tuple(core(*[x[t] for x in inputs], *states, *statics), num_outputs + ns)
        for k in range(num_outputs):
            outs_t[k].append(r[k])
        states = list(r[num_outputs:])
        for s in range(ns):
            seqs_t[s].append(states[s])
    first = inputs[0]
    outs = [torch.stack(o) if o else first.new_empty(
        (0, *step), dtype=(out_dtypes[k] if out_dtypes else first.dtype))
        for k, o in enumerate(outs_t)]
    seqs = [torch.stack(q) if q else first.new_empty((0, *step)) for q in seqs_t] \
        if want_seqs else None
    return outs, seqs, states
