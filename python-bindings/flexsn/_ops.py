"""torch.library custom ops, so that a FlexSN stays inside torch.compile
graphs as opaque nodes (no graph break).

Three ops take the core as an integer handle (compiled programs stay out of
the graph) and tensors in the user's shapes (inputs [T, *S], states [*S],
parameters as given):

- ``flexsn::infer(core, inputs, states, params, want_seqs)``: outputs, then
  state sequences (``want_seqs``) or final states; ``states`` empty: zeros.
- ``flexsn::train_forward(core, inputs, states, params, mask)``: outputs and
  state sequences (``states`` empty: zeros); its autograd formula calls
- ``flexsn::train_backward(core, inputs, states, params, seqs, grads, mask)``:
  the gradient of each input, state (when states were passed) and
  parameter (an empty tensor where ``mask`` says none is wanted).
  ``mask`` always covers every input, state and parameter.

Each has a fake (meta) implementation with exact shapes, T == 0 included.
Eager calls do not go through these ops: they take the direct path
(``_runner.run_compiled``), which saves the dispatcher's overhead.
"""

from __future__ import annotations

import threading
from typing import Optional

import torch
from torch import Tensor

from . import _runner

_lock = threading.Lock()
_CORES: list = []


def handle_of(cc) -> int:
    """The integer the ops name `cc` by (registered once)."""
    h = getattr(cc, "_op_handle", None)
    if h is None:
        with _lock:
            h = getattr(cc, "_op_handle", None)
            if h is None:
                h = len(_CORES)
                _CORES.append(cc)
                cc._op_handle = h
    return h


def _core(handle: int):
    if not 0 <= handle < len(_CORES):
        raise ValueError(f"no flexsn core with handle {handle}")
    return _CORES[handle]


@torch.library.custom_op("flexsn::infer", mutates_args=())
def infer(core: int, inputs: list[Tensor], states: list[Tensor], params: list[Tensor],
          want_seqs: bool) -> list[Tensor]:
    cc = _core(core)
    x = inputs[0]
    geom = _runner.geometry(x)
    if geom[0] == 0:
        outs, seqs, finals = _runner.run_empty(cc, inputs, states or None, False, want_seqs)
        # Outputs must not alias the op's inputs: the states pass through.
        return list(outs) + [t.clone() for t in (seqs if want_seqs else finals)]
    ps, p_dtypes, p_scalar = _runner.flat_params(params, geom[3], x.device)
    prep = _runner.prepare_infer(cc, x.dtype, x.device, want_seqs, p_dtypes, p_scalar)
    s0 = _runner.as_contiguous(states) if states else [None] * cc.num_states
    outs, rest = prep(_runner.as_contiguous(inputs) + s0 + ps, *geom)
    return outs + rest


@infer.register_fake
def _infer_fake(core, inputs, states, params, want_seqs):
    cc = _core(core)
    x = inputs[0]
    outs = [x.new_empty(x.shape) for _ in range(cc.num_outputs)]
    if want_seqs:
        return outs + [x.new_empty(x.shape) for _ in range(cc.num_states)]
    return outs + [x.new_empty(x.shape[1:]) for _ in range(cc.num_states)]


def _train_prep(cc, inputs, states, params, mask, geom):
    """The training kernels of the call, and its leaves as they take them
    (no states: None, which the kernels read as zeros)."""
    x = inputs[0]
    ps, p_dtypes, p_scalar = _runner.flat_params(params, geom[3], x.device)
    # The rematerializing policy: the ops' schema keeps exactly the state
    # sequences between forward and backward (the fake kernels' shapes).
    prep = _runner.prepare_train(cc, x.dtype, x.device, p_dtypes, p_scalar, mask,
                                 auto_save=False)
    s0 = _runner.as_contiguous(states) if states else [None] * cc.num_states
    leaves = _runner.as_contiguous(inputs) + s0 + ps
    return prep, leaves, p_scalar


def _passed(cc, states, per_leaf: list) -> list:
    """A list over every leaf (inputs, initial states, parameters), less
    the initial states when the call passed none (`states` empty)."""
    if states or not cc.num_states:
        return list(per_leaf)
    ni = cc.num_inputs
    return list(per_leaf[:ni]) + list(per_leaf[ni + cc.num_states:])


@torch.library.custom_op("flexsn::train_forward", mutates_args=())
def train_forward(core: int, inputs: list[Tensor], states: list[Tensor],
                  params: list[Tensor], mask: list[bool]) -> list[Tensor]:
    cc = _core(core)
    x = inputs[0]
    geom = _runner.geometry(x)
    if geom[0] == 0:
        return [x.new_empty(x.shape) for _ in range(cc.num_outputs + cc.num_states)]
    prep, leaves, _ = _train_prep(cc, inputs, states, params, mask, geom)
    prep.preload(geom[1])
    outs, seqs = prep.run_forward(leaves, geom)
    return outs + seqs


@train_forward.register_fake
def _train_forward_fake(core, inputs, states, params, mask):
    cc = _core(core)
    x = inputs[0]
    return [x.new_empty(x.shape) for _ in range(cc.num_outputs + cc.num_states)]


@torch.library.custom_op("flexsn::train_backward", mutates_args=())
def train_backward(core: int, inputs: list[Tensor], states: list[Tensor],
                   params: list[Tensor], seqs: list[Tensor], grads: list[Optional[Tensor]],
                   mask: list[bool]) -> list[Tensor]:
    cc = _core(core)
    leaves = list(inputs) + list(states) + list(params)
    passed_mask = _passed(cc, states, mask)
    geom = _runner.geometry(inputs[0])
    if geom[0] == 0:
        return [torch.zeros_like(t) if m else t.new_empty(0)
                for t, m in zip(leaves, passed_mask)]
    prep, flat, p_scalar = _train_prep(cc, inputs, states, params, mask, geom)
    got = _passed(cc, states, prep.run_backward(flat, _runner.as_contiguous(seqs),
                                                list(grads), geom))
    out = []
    first_param = len(leaves) - len(params)
    for k, (t, g, m) in enumerate(zip(leaves, got, passed_mask)):
        if not m or g is None:
            out.append(t.new_empty(0) if not m else torch.zeros_like(t))
        elif k >= first_param and not p_scalar[k - first_param]:
            out.append(g.sum_to_size(t.shape))  # a broadcast parameter
        else:
            out.append(g.view(t.shape))
    return out


@train_backward.register_fake
def _train_backward_fake(core, inputs, states, params, seqs, grads, mask):
    leaves = list(inputs) + list(states) + list(params)
    return [t.new_empty(t.shape) if m else t.new_empty(0)
            for t, m in zip(leaves, _passed(_core(core), states, mask))]


def _setup(ctx, inputs, output):
    core, inputs, states, params, mask = inputs
    cc = _core(core)
    no = cc.num_outputs
    ctx.core, ctx.mask = core, list(mask)
    ctx.counts = (len(inputs), len(states), len(params))
    ctx.save_for_backward(*inputs, *states, *params, *output[no:])


def _backward(ctx, grads):
    ni, ns, npar = ctx.counts
    saved = ctx.saved_tensors
    inputs, states = list(saved[:ni]), list(saved[ni:ni + ns])
    params, seqs = list(saved[ni + ns:ni + ns + npar]), list(saved[ni + ns + npar:])
    got = torch.ops.flexsn.train_backward(ctx.core, inputs, states, params, seqs,
                                          list(grads), ctx.mask)
    got = [g if m else None for g, m in zip(got, _passed(_core(ctx.core), states, ctx.mask))]
    return None, got[:ni], got[ni:ni + ns], got[ni + ns:], None


train_forward.register_autograd(_backward, setup_context=_setup)


def run(cc, inputs, init_states, params, *, want_seqs: bool, grad_mask=None):
    """What run_compiled does, through the custom ops (for torch.compile)."""
    h = handle_of(cc)
    no, ns = cc.num_outputs, cc.num_states
    inputs, params = list(inputs), list(params)
    x = inputs[0]
    step = x.shape[1:]
    states = None if init_states is None else list(init_states)
    mask = _runner.requires_grad_mask(inputs, states, ns, params, grad_mask)
    if torch.is_grad_enabled() and any(mask):
        # No initial states: an empty list, which the kernels read as zeros
        # (null pointers), as on the eager path; nothing allocated or filled.
        res = torch.ops.flexsn.train_forward(h, inputs, states or [], params, mask)
        outs, seqs = res[:no], res[no:]
        if x.shape[0] == 0:
            finals = states if states is not None else [x.new_zeros(step) for _ in range(ns)]
        else:
            finals = [q[-1] for q in seqs]
        return list(outs), (list(seqs) if want_seqs else None), list(finals)
    res = torch.ops.flexsn.infer(h, inputs, states or [], params, want_seqs)
    outs, rest = res[:no], res[no:]
    if want_seqs:
        finals = (states or [x.new_zeros(step) for _ in range(ns)]) if x.shape[0] == 0 \
            else [q[-1] for q in rest]
        return list(outs), list(rest), list(finals)
    return list(outs), None, list(rest)
