"""A call's arguments as the kernels take them: counts, types, dtypes,
devices and sizes checked (with errors that name what is wrong), which
tensors take a gradient, parameters broadcast to the per-step shape."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

FLOAT_TYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def validate_sequences(inputs, states, num_inputs, num_states, step_mode="m"):
    """Checks counts, types, dtypes, devices and per-step sizes; returns
    (T, per-step shape) (T is None in step mode "s")."""
    if len(inputs) == num_inputs and (states is None or len(states) == num_states) \
            and _plainly_valid(inputs, states, step_mode):
        first = inputs[0]
        return (first.shape[0], tuple(first.shape[1:])) if step_mode == "m" else \
            (None, tuple(first.shape))
    return _validate_slowly(inputs, states, num_inputs, num_states, step_mode)


def _plainly_valid(inputs, states, step_mode) -> bool:
    """The common case, checked cheaply: tensors of one float dtype on one
    device, inputs shaped like input #0, states one step of it. False: the
    full check decides (and names what is wrong)."""
    first = inputs[0]
    if not isinstance(first, torch.Tensor) or first.dtype not in FLOAT_TYPES:
        return False
    dtype, device, shape = first.dtype, first.device, first.shape
    if step_mode == "m" and len(shape) < 1:
        return False
    for t in inputs:
        if not isinstance(t, torch.Tensor) or t.dtype != dtype or t.shape != shape \
                or t.device != device:
            return False
    if states:
        numel = first.numel()
        T = shape[0] if step_mode == "m" else 1
        if T == 0:
            return False
        for t in states:
            if not isinstance(t, torch.Tensor) or t.dtype != dtype \
                    or t.numel() * T != numel or t.device != device:
                return False
    return True


def _validate_slowly(inputs, states, num_inputs, num_states, step_mode):
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


def flat_params(params, step: tuple, device: torch.device):
    """Parameters as the kernels take them: a one-element tensor as it is
    (a scalar), any other broadcast to the per-step shape and contiguous (no
    copy when it already is); moved to `device`. Returns (tensors, dtypes,
    scalar flags)."""
    flat, dtypes, scalar = [], [], []
    for p, t in enumerate(params):
        if not isinstance(t, torch.Tensor) or t.dtype not in FLOAT_TYPES:
            raise TypeError(f"parameter #{p} must be a floating-point tensor")
        if t.device != device:
            t = t.to(device)
        dtypes.append(t.dtype)
        if t.numel() == 1:
            flat.append(t)
            scalar.append(True)
            continue
        if t.shape != step:
            try:
                t = t.expand(step)
            except RuntimeError:
                raise ValueError(f"parameter #{p} has shape {tuple(t.shape)}, which does "
                                 f"not broadcast to the per-step shape {step}") from None
        flat.append(t if t.is_contiguous() else t.contiguous())
        scalar.append(False)
    return flat, dtypes, scalar


def as_contiguous(ts) -> list:
    """Each tensor as it is when contiguous, else a contiguous copy; None
    stays None (an absent gradient)."""
    return [t if t is None or t.is_contiguous() else t.contiguous() for t in ts]
