"""A FlexSN call under torch.compile: the operators eager calls use
(flexsn/_native.py), traced as graph nodes.

Dynamo traces :func:`run` (no graph break). The kernels a call needs are
bound while tracing, by :func:`_bindings`, which Dynamo runs as a constant
(its arguments are the call's configuration: the core's handle, dtype,
device, parameter kinds, requires-grad mask), so the graph holds the
bindings' ids as integers:

- inference: ``flexsn_native::launch(id, args, recipe)``;
- training: ``flexsn_native::train(id, leaves, recipe)``, whose autograd node (C++)
  calls ``flexsn_native::forward`` and, in the backward,
  ``flexsn_native::backward``: AOTAutograd traces those two into the
  forward and backward graphs.

The operators' fake implementations give the results' shapes and dtypes,
symbolic shapes included. A core is named by a handle (a string), so
compiled programs stay out of the graph.
"""

from __future__ import annotations

import threading

import torch

from . import _checks, _compiled, _runner

_lock = threading.Lock()
_CORES: list = []


def handle_of(compiled) -> str:
    """The name the compiled path gives `compiled` (registered once): a
    string, which Dynamo always takes as a constant (an int read from an
    object can become a symbolic input, as under DistributedDataParallel,
    and the bindings need constants)."""
    h = getattr(compiled, "_op_handle", None)
    if h is None:
        with _lock:
            h = getattr(compiled, "_op_handle", None)
            if h is None:
                h = str(len(_CORES))
                _CORES.append(compiled)
                compiled._op_handle = h
    # The constant-result wrapper is made now, outside any trace: made
    # while Dynamo traces a call, it is a graph break.
    _bindings_fn()
    return h


def _core(handle: str):
    index = int(handle) if isinstance(handle, str) and handle.isdigit() else -1
    if not 0 <= index < len(_CORES):
        raise ValueError(f"no flexsn core with handle {handle!r}")
    return _CORES[index]


def _binding_ids(handle: str, dtype, device, p_dtypes: tuple, p_scalar: tuple,
                 mask, want_seqs: bool, recompute: bool = False) -> tuple:
    """(id, training, order, last_steps, recipe) of the binding a call of this
    configuration runs: an inference kernel (mask None; `order`: where its
    outputs, then its state results, are among its results) or a training
    pair (whose node returns outputs, then state results); `last_steps`:
    the state results are sequences of which the call wants only the final
    states."""
    compiled = _core(handle)
    if mask is None:
        prep = _compiled.inference_config(compiled, dtype, device, want_seqs, list(p_dtypes),
                                     list(p_scalar))
        return (prep.kernel.native, False, tuple(prep.out_ix + prep.rest_ix), False,
                prep.kernel.recipe)
    prep = _compiled.training_config(compiled, dtype, device, list(p_dtypes), list(p_scalar),
                                 list(mask))
    pair = prep.pair(want_seqs, recompute)
    return pair.native, True, (), not pair.final and not want_seqs, pair.recipe


_bindings = None


def _bindings_fn():
    """_binding_ids as Dynamo's constant (made on first use: importing
    Dynamo takes a second)."""
    global _bindings
    if _bindings is None:
        import torch._dynamo
        _bindings = torch._dynamo.assume_constant_result(_binding_ids)
    return _bindings


def run(compiled, inputs, init_states, params, *, want_seqs: bool, grad_mask=None):
    """What _runner.run_compiled does, traceable by Dynamo: (outputs, state
    sequences or None, final states)."""
    num_states, num_outputs = compiled.num_states, compiled.num_outputs
    inputs, params = list(inputs), list(params)
    x = inputs[0]
    step = tuple(x.shape[1:])
    mask = None
    if torch.is_grad_enabled():
        mask = _checks.requires_grad_mask(inputs, init_states, num_states, params, grad_mask)
        if not any(mask):
            mask = None
    if x.shape[0] == 0:
        return _runner.run_empty(compiled, inputs, init_states, mask is not None, want_seqs)
    ps, p_dtypes, p_scalar = _checks.flat_params(params, step, x.device)
    s0 = [None] * num_states if init_states is None else _checks.as_contiguous(init_states)
    args = _checks.as_contiguous(inputs) + s0 + ps
    # read here, where Dynamo guards on it, not in the constant-result call
    recompute = _compiled.recompute_active()
    ident, training, order, last_steps, recipe = _bindings_fn()(
        compiled._op_handle, x.dtype, x.device, tuple(p_dtypes), tuple(p_scalar),
        None if mask is None else tuple(mask), want_seqs, recompute)
    # the graph carries the recipe: what binds `ident` in another process
    if training:
        res = torch.ops.flexsn_native.train(ident, args, recipe)
    else:
        res = torch.ops.flexsn_native.launch(ident, args, recipe)
        res = [res[i] for i in order]
    outs, rest = list(res[:num_outputs]), list(res[num_outputs:num_outputs + num_states])
    # The state results are final states when no sequences are wanted,
    # unless they are sequences of which the call takes the last steps.
    return _compiled.call_result(outs, rest, not want_seqs and not last_steps, want_seqs)
