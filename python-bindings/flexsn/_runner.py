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
    """What one compiled call needs inside autograd."""
    __slots__ = ("forward", "backward", "T", "NCL", "device", "counts", "mask",
                 "param_shapes", "param_dtypes", "grad_reads", "non_differentiable")


class ScanFunction(torch.autograd.Function):
    """Training forward kernel, and the backward kernel for BPTT."""

    @staticmethod
    def forward(ctx, plan: _Plan, *tensors):
        ni, ns, npar, no = plan.counts
        feed = {}
        for i in range(ni):
            feed[("input", i)] = tensors[i]
        for s in range(ns):
            feed[("init_state", s)] = tensors[ni + s]
        for p in range(npar):
            feed[("param", p)] = tensors[ni + ns + p]
        res = plan.forward(feed, plan.T, plan.NCL, plan.device)
        outs = [res[("output", k)] for k in range(no)]
        seqs = [res[("state_seq", s)] for s in range(ns)]
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
        ni, ns, npar, no = plan.counts
        saved = ctx.saved_tensors
        tensors, seqs = saved[:ni + ns + npar], saved[ni + ns + npar:]
        T, NCL, device = plan.T, plan.NCL, plan.device
        feed = {}
        for i in range(ni):
            feed[("input", i)] = tensors[i]
        for s in range(ns):
            feed[("init_state", s)] = tensors[ni + s]
            feed[("state_seq", s)] = seqs[s]
        for p in range(npar):
            feed[("param", p)] = tensors[ni + ns + p]
        for meaning, index in plan.grad_reads:
            g = grads[index] if meaning == "grad_output" else grads[no + index]
            if g is None:
                g = torch.zeros((T, NCL), dtype=(seqs[index].dtype if meaning ==
                                "grad_state_seq" else tensors[0].dtype), device=device)
            feed[(meaning, index)] = _program.flat(g, (T, NCL))
        res = plan.backward(feed, T, NCL, device)
        out = [None]
        for i in range(ni):
            out.append(res.get(("grad_input", i)))
        for s in range(ns):
            out.append(res.get(("grad_init_state", s)))
        for p in range(npar):
            g = res.get(("grad_param", p))
            if g is not None:
                g = g.to(plan.param_dtypes[p]).view(plan.param_shapes[p])
            out.append(g)
        return tuple(out)


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


def _param_views(params, step, device, dtype_of_inputs):
    flat, shapes, dtypes, scalar = [], [], [], []
    numel = math.prod(step)
    for p, t in enumerate(params):
        if not isinstance(t, torch.Tensor) or t.dtype not in FLOAT_TYPES:
            raise TypeError(f"parameter #{p} must be a floating-point tensor")
        if t.device != device:
            t = t.to(device)
        shapes.append(t.shape)
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
    return flat, shapes, dtypes, scalar


def run_compiled(cc: CompiledCore, inputs, init_states, params, *, want_seqs: bool,
                 grad_mask: Optional[Sequence[bool]] = None):
    """Runs `cc` on `inputs` ([T, *S]) from `init_states` ([*S]; None: zeros)
    with `params`; returns (outputs [T, *S], state sequences [T, *S] or None,
    final states [*S])."""
    ni, ns, no = cc.num_inputs, cc.num_states, cc.num_outputs
    first = inputs[0]
    device = first.device
    T, step = first.shape[0], tuple(first.shape[1:])
    NCL = math.prod(step)
    zero_states = init_states is None
    if zero_states and (T == 0 or (torch.is_grad_enabled() and any(
            t.requires_grad for t in list(inputs) + list(params)))):
        # The training forward takes its initial states: zeros it is.
        init_states = [first.new_zeros(step) for _ in range(ns)]
        zero_states = False
    elif zero_states:
        init_states = []
    xs = [_program.flat(x, (T, NCL)) for x in inputs]
    s0 = [_program.flat(s, (NCL,)) for s in init_states]
    ps, p_shapes, p_dtypes, p_scalar = _param_views(params, step, device, first.dtype)
    in_dtypes = [first.dtype] * (ni + ns)
    mask = [t.requires_grad for t in inputs]
    mask += [False] * ns if zero_states else [t.requires_grad for t in init_states]
    mask += [t.requires_grad for t in params]
    if grad_mask is not None:
        mask = [m and g for m, g in zip(mask, grad_mask)]
    training = torch.is_grad_enabled() and any(mask)
    target = "cuda" if device.type == "cuda" else "cpu"
    chip = _program.chip_of(device) if target == "cuda" else None
    dev_index = (device.index if device.index is not None else torch.cuda.current_device()) \
        if target == "cuda" else 0

    if T == 0:
        outs = [first.new_empty((0, *step)) for _ in range(no)]
        if training:
            outs = [first * 0 for _ in range(no)]
        seqs = [first.new_empty((0, *step)) for _ in range(ns)] if want_seqs else None
        return outs, seqs, list(init_states)

    if training:
        ir = cc.ir(in_dtypes, p_dtypes, p_scalar, mask)
        program = _program.get_program(ir, target, chip, differentiate=True)
        plan = _Plan()
        plan.forward = program.launcher("core_forward", dev_index)
        plan.backward = program.launcher("core_backward", dev_index)
        plan.T, plan.NCL, plan.device = T, NCL, device
        plan.counts = (ni, ns, len(ps), no)
        plan.param_shapes = [(1,) if sc else (NCL,) for sc in p_scalar]
        plan.param_dtypes = p_dtypes
        plan.non_differentiable = cc.non_differentiable
        plan.grad_reads = [key for _, key in plan.backward.reads
                           if key[0] in ("grad_output", "grad_state_seq")]
        res = ScanFunction.apply(plan, *xs, *s0, *ps)
        outs, seqs = list(res[:no]), list(res[no:])
        finals = [q[-1].view(step) for q in seqs]
        outs = [o.view(T, *step) for o in outs]
        seqs = [q.view(T, *step) for q in seqs]
        return outs, (seqs if want_seqs else None), finals

    ir = cc.ir(in_dtypes, p_dtypes, p_scalar, [False] * len(mask), zero_states)
    program = _program.get_program(ir, target, chip)
    name = "core_inference" if want_seqs else "core_final_state"
    launcher = program.launcher(name, dev_index)
    feed = {("input", i): x for i, x in enumerate(xs)}
    feed.update({("init_state", s): v for s, v in enumerate(s0)})
    feed.update({("param", p): v for p, v in enumerate(ps)})
    res = launcher(feed, T, NCL, device)
    outs = [res[("output", k)].view(T, *step) for k in range(no)]
    if want_seqs:
        seqs = [res[("state_seq", s)].view(T, *step) for s in range(ns)]
        return outs, seqs, [q[-1] for q in seqs]
    return outs, None, [res[("final_state", s)].view(step) for s in range(ns)]


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
