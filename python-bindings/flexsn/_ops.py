"""torch.library custom ops, so that a FlexSN stays inside torch.compile
graphs as opaque nodes (no graph break).

Three ops take the core as an integer handle (compiled programs stay out of
the graph) and tensors in the user's shapes (inputs [T, *S], states [*S],
parameters as given):

- ``flexsn::infer(core, inputs, states, params, want_seqs)``: outputs, then
  state sequences (``want_seqs``) or final states; ``states`` empty: zeros.
- ``flexsn::train_forward(core, inputs, states, params, mask, want_seqs)``:
  outputs, then per state its sequence or, where the compiler built the
  final-state pair (the automatic saving policy) and ``want_seqs`` is
  false, its final state, then the values the forward saves for the
  backward (``states`` empty: zeros); its autograd formula keeps only what
  the backward reads and calls
- ``flexsn::train_backward(core, like, inputs, states, params, kept,
  grads, mask, want_seqs)``: the gradient of each input, state (when states
  were passed) and parameter (an empty tensor where ``mask`` says none is
  wanted). ``like`` has the inputs' shape, dtype and device (a one-element
  tensor expanded); inputs and states the backward does not read are None;
  ``kept``: the forward's state sequences (sequence pair) and saved values.
  ``mask`` always covers every input, state and parameter.

Each has a fake (meta) implementation with exact shapes, T == 0 included.
Eager calls do not go through these ops: they take the direct path
(``_runner.run_compiled``), which saves the dispatcher's overhead.
"""

from __future__ import annotations

import threading
# typing.List, not list[...]: PyTorch 2.6's schema inference reads only the
# former.
from typing import List, Optional

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
def infer(core: int, inputs: List[Tensor], states: List[Tensor], params: List[Tensor],
          want_seqs: bool) -> List[Tensor]:
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
    outs, rest = prep(_runner.as_contiguous(inputs) + s0 + ps)
    return outs + rest


@infer.register_fake
def _infer_fake(core, inputs, states, params, want_seqs):
    cc = _core(core)
    x = inputs[0]
    outs = [x.new_empty(x.shape) for _ in range(cc.num_outputs)]
    if want_seqs:
        return outs + [x.new_empty(x.shape) for _ in range(cc.num_states)]
    return outs + [x.new_empty(x.shape[1:]) for _ in range(cc.num_states)]


def _pair_of(cc, x, params, mask, want_seqs):
    """The training pair a call runs (a lookup after the first call): the
    final-state pair when the compiler built one and no state sequences are
    wanted, else the sequence pair."""
    prep = _runner.prepare_train(cc, x.dtype, x.device, [p.dtype for p in params],
                                 [bool(p.numel() == 1) for p in params], mask)
    return prep.pair(want_seqs)


def _leaves(cc, inputs, states, params, step, device):
    """The leaves as the kernels take them (no states: None, null pointers;
    None stays None), and the parameters' scalar flags."""
    ps, _, p_scalar = _runner.flat_params(params, step, device)
    s0 = _runner.as_contiguous(states) if states else [None] * cc.num_states
    return _runner.as_contiguous(inputs) + s0 + ps, p_scalar


def _leaf_meta(like, inputs, states, params):
    """The shape and dtype of each leaf of train_backward's call, from
    `like` for the inputs and states (which may arrive as None)."""
    n = len(inputs) + len(states)
    shapes = [like.shape] * len(inputs) + [like.shape[1:]] * len(states) + \
        [p.shape for p in params]
    return shapes, [like.dtype] * n + [p.dtype for p in params]


def _passed(cc, states, per_leaf: list) -> list:
    """A list over every leaf (inputs, initial states, parameters), less
    the initial states when the call passed none (`states` empty)."""
    if states or not cc.num_states:
        return list(per_leaf)
    ni = cc.num_inputs
    return list(per_leaf[:ni]) + list(per_leaf[ni + cc.num_states:])


def _forward_fake(cc, pair, x):
    """Empty results shaped as train_forward returns them."""
    outs = [x.new_empty(x.shape) for _ in range(cc.num_outputs)]
    step = x.shape[1:] if pair.final else x.shape
    states = [x.new_empty(step) for _ in range(cc.num_states)]
    return outs + states + [x.new_empty(x.shape, dtype=d) for d in pair.saved_dtypes]


@torch.library.custom_op("flexsn::train_forward", mutates_args=())
def train_forward(core: int, inputs: List[Tensor], states: List[Tensor],
                  params: List[Tensor], mask: List[bool], want_seqs: bool) -> List[Tensor]:
    cc = _core(core)
    x = inputs[0]
    geom = _runner.geometry(x)
    pair = _pair_of(cc, x, params, mask, want_seqs)
    if geom[0] == 0:
        res = _forward_fake(cc, pair, x)
        if pair.final:  # the final states of no step: the initial ones
            no = cc.num_outputs
            res[no:no + cc.num_states] = [t.clone() for t in states] if states else \
                [x.new_zeros(x.shape[1:]) for _ in range(cc.num_states)]
        return res
    pair.preload(geom[1])
    leaves, _ = _leaves(cc, inputs, states, params, geom[3], x.device)
    outs, rest, kept = pair.run_forward(leaves)
    return outs + rest + (kept if pair.final else kept[cc.num_states:])


@train_forward.register_fake
def _train_forward_fake(core, inputs, states, params, mask, want_seqs):
    cc = _core(core)
    return _forward_fake(cc, _pair_of(cc, inputs[0], params, mask, want_seqs), inputs[0])


@torch.library.custom_op("flexsn::train_backward", mutates_args=())
def train_backward(core: int, like: Tensor, inputs: List[Optional[Tensor]],
                   states: List[Optional[Tensor]], params: List[Tensor], kept: List[Tensor],
                   grads: List[Optional[Tensor]], mask: List[bool],
                   want_seqs: bool) -> List[Tensor]:
    cc = _core(core)
    # Shapes and dtypes from `like` ([T, *S], the inputs' dtype and device):
    # inputs and states the backward does not read arrive as None.
    seq, step = like.shape, like.shape[1:]
    shapes, dtypes = _leaf_meta(like, inputs, states, params)
    passed_mask = _passed(cc, states, mask)
    geom = _runner.geometry(like)
    if geom[0] == 0:
        return [torch.zeros(sh, dtype=d, device=like.device) if m else like.new_empty(0)
                for sh, d, m in zip(shapes, dtypes, passed_mask)]
    pair = _pair_of(cc, like, params, mask, want_seqs)
    leaves, p_scalar = _leaves(cc, inputs, states, params, step, like.device)
    if leaves[0] is None:
        # A native launch takes T, the shape and the device from argument
        # #0, which the backward does not read: `like` stands in.
        leaves[0] = like
    defined = [(seq, like.dtype)] * cc.num_inputs + \
        ([(step, like.dtype)] * cc.num_states if states else [None] * cc.num_states) + \
        [(p.shape if sc else step, p.dtype) for p, sc in zip(params, p_scalar)]
    got = _passed(cc, states, pair.run_backward(leaves, list(kept), list(grads),
                                                defined))
    out = []
    first_param = len(shapes) - len(params)
    for k, (sh, d, g, m) in enumerate(zip(shapes, dtypes, got, passed_mask)):
        if not m:
            out.append(like.new_empty(0))
        elif g is None:
            out.append(torch.zeros(sh, dtype=d, device=like.device))
        elif k >= first_param and not p_scalar[k - first_param]:
            out.append(g.sum_to_size(sh))  # a broadcast parameter
        else:
            out.append(g.view(sh))
    return out


@train_backward.register_fake
def _train_backward_fake(core, like, inputs, states, params, kept, grads, mask, want_seqs):
    cc = _core(core)
    shapes, dtypes = _leaf_meta(like, inputs, states, params)
    return [like.new_empty(sh, dtype=d) if m else like.new_empty(0)
            for sh, d, m in zip(shapes, dtypes, _passed(cc, states, mask))]


def _setup(ctx, inputs, output):
    core, inputs, states, params, mask, want_seqs = inputs
    cc = _core(core)
    ni, ns, no = cc.num_inputs, cc.num_states, cc.num_outputs
    x = inputs[0]
    pair = _pair_of(cc, x, params, mask, want_seqs)
    read = pair.leaf_read
    ctx.core, ctx.mask, ctx.want_seqs = core, list(mask), want_seqs
    ctx.counts = (ni, len(states), len(params), no + ns)
    # What the backward reads; in place of the inputs, a one-element tensor
    # expanded to their shape (their shape, dtype and device).
    kept = list(output[no:]) if not pair.final else list(output[no + ns:])
    ctx.save_for_backward(
        *[t if read[i] else None for i, t in enumerate(inputs)],
        *[t if read[ni + s] else None for s, t in enumerate(states)],
        *params, *kept, x.new_empty(()).expand(x.shape))


def _backward(ctx, grads):
    ni, nst, npar, ngrads = ctx.counts
    saved = ctx.saved_tensors
    inputs, states = list(saved[:ni]), list(saved[ni:ni + nst])
    params = list(saved[ni + nst:ni + nst + npar])
    kept, like = list(saved[ni + nst + npar:-1]), saved[-1]
    got = torch.ops.flexsn.train_backward(ctx.core, like, inputs, states, params, kept,
                                          list(grads[:ngrads]), ctx.mask, ctx.want_seqs)
    got = [g if m else None for g, m in zip(got, _passed(_core(ctx.core), states, ctx.mask))]
    return None, got[:ni], got[ni:ni + nst], got[ni + nst:], None, None


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
        res = torch.ops.flexsn.train_forward(h, inputs, states or [], params, mask,
                                             want_seqs)
        outs, rest = res[:no], res[no:no + ns]
        if _pair_of(cc, x, params, mask, want_seqs).final:
            return list(outs), None, list(rest)
        if x.shape[0] == 0:
            finals = states if states is not None else [x.new_zeros(step) for _ in range(ns)]
        else:
            finals = [q[-1] for q in rest]
        return list(outs), (list(rest) if want_seqs else None), list(finals)
    res = torch.ops.flexsn.infer(h, inputs, states or [], params, want_seqs)
    outs, rest = res[:no], res[no:]
    if want_seqs:
        finals = (states or [x.new_zeros(step) for _ in range(ns)]) if x.shape[0] == 0 \
            else [q[-1] for q in rest]
        return list(outs), list(rest), list(finals)
    return list(outs), None, list(rest)
