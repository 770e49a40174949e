"""Sequences in a permuted dense layout (channels-last, say).

A neuron acts on each element of a step alone, so a kernel may visit a
step's elements in any order, as long as every tensor of the call uses the
same one. An input sequence ``[T, *S]`` whose strides are a permutation of
contiguous ones, with T outermost (what a channels-last convolution gives
per step), runs on the permuted contiguous view instead of a contiguous
copy; its outputs, state sequences and final states come back as views in
the input's layout. A convolution after the neuron then reads the layout
it wrote, with no conversion either way, and neither does its backward.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch


# (shape, strides) -> plan; eager calls only (shapes are symbolic in a trace)
_PLANS: dict = {}


def plan(x: torch.Tensor, params: Sequence = ()) -> Optional[tuple]:
    """(permutation, step permutation, their inverses), the permutation (T
    first) being the one under which `x` is contiguous; None when x is
    contiguous already, not dense, T is not its outermost dimension, or a
    parameter does not broadcast to a step. `params`: every tensor the
    kernels take besides the sequences, closed-over ones included; a call
    on the permuted view takes each through param_view."""
    if x.dim() < 3 or x.is_contiguous():
        return None
    step_shape = tuple(x.shape[1:])
    if any(_not_scalar(p) and not _broadcasts(tuple(p.shape), step_shape)
           for p in params):
        return None  # the general path names the shape, in x's own order
    if torch.compiler.is_compiling():
        return _make_plan(x)
    key = (x.shape, x.stride())
    hit = _PLANS.get(key, False)
    if hit is False:
        hit = _make_plan(x)
        if len(_PLANS) < 1024:
            _PLANS[key] = hit
    return hit


def _make_plan(x: torch.Tensor) -> Optional[tuple]:
    perm = dense_order(x.shape, x.stride(), time_first=True)
    if perm is None or perm == tuple(range(x.dim())):
        return None
    step = step_perm(perm)
    return perm, step, inverse(perm), inverse(step)


def dense_order(shape, stride, time_first: bool = False) -> Optional[tuple]:
    """The permutation of the dimensions (outermost first, dimension 0
    kept first with `time_first`) under which a tensor of these sizes and
    strides is contiguous, or None when there is none (not dense). From
    the strides alone: no tensor op, which a traced caller would record."""
    rest = range(1, len(shape)) if time_first else range(len(shape))
    # equal strides (dimensions of one element) keep their order
    perm = sorted(rest, key=lambda d: -stride[d])
    perm = (0, *perm) if time_first else tuple(perm)
    expected = 1
    for d in reversed(perm):
        if shape[d] != 1 and stride[d] != expected:
            return None
        expected *= shape[d]
    return perm


def _not_scalar(p) -> bool:
    return isinstance(p, torch.Tensor) and p.numel() != 1


def _broadcasts(shape: tuple, step: tuple) -> bool:
    if len(shape) > len(step):
        return False
    return all(a in (1, b) for a, b in zip(reversed(shape), reversed(step)))


def needs_param_views(params: Sequence) -> bool:
    """Whether a permuted call must lay out a parameter too: one that is
    not a scalar (a scalar reads the same in any order)."""
    return any(_not_scalar(p) for p in params)


def param_view(p, step: tuple):
    """Parameter `p` (broadcast to a step, right-aligned) as the permuted
    step's kernels take it: the view that broadcasts to the step's
    dimensions in the order `step`. A scalar as it is."""
    if not _not_scalar(p):
        return p
    full = p.reshape((1,) * (len(step) - p.dim()) + tuple(p.shape))
    return full.permute(step)


def inverse(perm: tuple) -> tuple:
    inv = [0] * len(perm)
    for i, d in enumerate(perm):
        inv[d] = i
    return tuple(inv)


def step_perm(perm: tuple) -> tuple:
    """The permutation of one step's dimensions (T dropped)."""
    return tuple(d - 1 for d in perm[1:])
