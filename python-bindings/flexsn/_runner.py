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

from . import _emit, _graph, _native, _program, _recorder
from ._errors import FallbackWarning, FlexSNError, UnsupportedOpError

FLOAT_TYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class CompiledCore:
    """A traced core and the IR of each configuration it ran with."""

    def __init__(self, core: Callable, num_inputs: int, num_states: int,
                 static_inputs: Sequence[torch.Tensor] = (),
                 example_inputs: Optional[Sequence[torch.Tensor]] = None):
        self.traced = _recorder.trace(core, num_inputs, num_states, static_inputs,
                                    example_inputs)
        self.num_inputs, self.num_states = num_inputs, num_states
        self.num_outputs = self.traced.num_outputs
        # outputs, then new states: those PyTorch gives no gradient path
        self.non_differentiable = [k for k, d in enumerate(
            _graph.differentiable_results(self.traced)) if not d]
        self._ir: dict[tuple, str] = {}
        # InferPrep / TrainPrep by configuration (see prepare_infer)
        self.prepared: dict[tuple, object] = {}
        # Emit once now: an op outside the table, or a bool output, is found
        # when the module is built, not at its first call.
        n = num_inputs + num_states + len(self.traced.params)
        self.ir([torch.float32] * (num_inputs + num_states),
                [torch.float32] * len(self.traced.params),
                [False] * len(self.traced.params), [False] * n)

    def ir(self, in_dtypes, param_dtypes, param_scalar, mask) -> str:
        key = (tuple(in_dtypes), tuple(param_dtypes), tuple(param_scalar), tuple(mask))
        text = self._ir.get(key)
        if text is None:
            text = _emit.emit(self.traced, in_dtypes, param_dtypes, param_scalar, mask)
            self._ir[key] = text
        return text

    def param_tensors(self, static_inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        out = []
        for src in self.traced.params:
            out.append(static_inputs[src.index] if src.kind == "static" else src.tensor)
        return out


_warned_unavailable = False


def try_compile(core, num_inputs, num_states, static_inputs, example_inputs,
                strict: bool) -> Optional[CompiledCore]:
    """The compiled core, or None (with a FallbackWarning) when it uses an op
    the compiler lacks or the package's operators cannot load (one warning
    per process for that); `strict` raises instead."""
    global _warned_unavailable
    if _native.ops() is None:
        message = _native.unavailable_message()
        if strict:
            raise FlexSNError(message)
        if not _warned_unavailable:
            _warned_unavailable = True
            warnings.warn(message, FallbackWarning, stacklevel=4)
        return None
    try:
        return CompiledCore(core, num_inputs, num_states, static_inputs, example_inputs)
    except UnsupportedOpError as e:
        if strict:
            raise
        warnings.warn(f"{e}; running the core as a Python loop (backend "
                      "'torch') instead", FallbackWarning, stacklevel=4)
        return None


def _where(device: torch.device):
    """(target, chip, device index) of kernels running on `device`."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return "cuda", _program.chip_of(device), index
    return "cpu", None, 0


def _leaf_positions(ni: int, ns: int, npar: int) -> dict:
    """Where each input, initial state and parameter is in a call's tensor
    list (inputs, then initial states, then parameters)."""
    positions = {("input", i): i for i in range(ni)}
    positions.update({("init_state", s): ni + s for s in range(ns)})
    positions.update({("param", p): ni + ns + p for p in range(npar)})
    return positions


def call_result(outs, rest, final: bool, want_seqs: bool):
    """A call's (outputs, state sequences or None, final states), as
    run_compiled returns it, from a kernel's outputs and its state results
    `rest` (final states when `final`, else state sequences, whose last
    steps are the final states)."""
    if final:
        return outs, None, rest
    return outs, (rest if want_seqs else None), [q[-1] for q in rest]


class InferPrep:
    """The inference kernel of one configuration (dtype, device, parameter
    kinds, state sequences or final states), its arguments bound: ``xs + s0
    + ps`` (inputs, initial states, parameters). An initial state may be
    None: the kernel reads a null pointer as zeros (nothing allocated)."""

    def __init__(self, cc: "CompiledCore", dtype, device: torch.device, want_seqs: bool,
                 p_dtypes, p_scalar):
        ni, ns, npar = cc.num_inputs, cc.num_states, len(p_dtypes)
        target, chip, index = _where(device)
        ir = cc.ir([dtype] * (ni + ns), p_dtypes, p_scalar, [False] * (ni + ns + npar))
        program = _program.get_program(ir, target, chip)
        launcher = program.launcher("core_inference" if want_seqs else "core_final_state",
                                    index)
        self.kernel = _program.Bound(launcher, _leaf_positions(ni, ns, npar))
        self.out_ix = [self.kernel.index(("output", k)) for k in range(cc.num_outputs)]
        rest = "state_seq" if want_seqs else "final_state"
        self.rest_ix = [self.kernel.index((rest, s)) for s in range(ns)]

    def __call__(self, args):
        """(outputs [T, *S], state sequences [T, *S] or final states [*S])."""
        res = self.kernel(args)
        return [res[i] for i in self.out_ix], [res[i] for i in self.rest_ix]

    def run(self, args, want_seqs: bool):
        """A call as run_compiled returns it: (outputs, state sequences or
        None, final states); `want_seqs` as this kernel was prepared."""
        outs, rest = self(args)
        return call_result(outs, rest, not want_seqs, want_seqs)


class TrainPair:
    """One training forward and its backward, bound. The forward takes the
    leaves (inputs, initial states, parameters; an initial state None:
    zeros) and gives outputs, then per state its sequence (``final`` False)
    or its final state (``final`` True), then what it saves for the
    backward. The backward takes ``leaves + kept + grads``: the leaves (None
    where it reads none), the kept forward results (state sequences and
    saved values), then the gradient or None of each output and state
    result; it gives each leaf's gradient (None where none is wanted) in the
    leaf's shape and dtype."""

    def __init__(self, program, fwd_name: str, bwd_name: str, final: bool, index: int,
                 ni: int, ns: int, no: int, npar: int, non_differentiable):
        n = ni + ns + npar
        leaves = _leaf_positions(ni, ns, npar)
        self.final = final
        self.forward = _program.Bound(program.launcher(fwd_name, index), leaves)
        self.out_ix = [self.forward.index(("output", k)) for k in range(no)]
        state_key = "final_state" if final else "state_seq"
        self.state_ix = [self.forward.index((state_key, s)) for s in range(ns)]
        # Kept for the backward: every state sequence (the caller may hold
        # them anyway), then the saved values.
        kept = [] if final else [("state_seq", s) for s in range(ns)]
        kept += [k for k in self.forward.result_keys if k[0] == "saved"]
        self.kept_ix = [self.forward.index(k) for k in kept]
        back = dict(leaves)
        back.update({k: n + j for j, k in enumerate(kept)})
        m = n + len(kept)
        grad_key = "grad_final_state" if final else "grad_state_seq"
        back.update({("grad_output", k): m + k for k in range(no)})
        back.update({(grad_key, s): m + no + s for s in range(ns)})
        self._backward_launcher = program.launcher(bwd_name, index)
        self.backward = _program.Bound(self._backward_launcher, back)
        # Leaves the backward reads; the others are not kept alive for it.
        read = {pos for _, pos in self.backward.reads}
        self.leaf_read = [j in read for j in range(n)]
        keys = self.backward.result_keys
        wanted = [("grad_input", i) for i in range(ni)] + \
            [("grad_init_state", s) for s in range(ns)] + \
            [("grad_param", p) for p in range(npar)]
        self.grad_ix = [keys.index(k) if k in keys else None for k in wanted]
        # the dtype of each saved value the forward returns (after its states)
        self.saved_dtypes = [dtype for (_, dtype, _), key in
                             zip(self.forward.allocs, self.forward.result_keys)
                             if key[0] == "saved"]
        self.num_leaves = n
        self.non_differentiable = non_differentiable
        self._preloaded = None
        # Forward and backward as one C++ autograd node.
        self.native = _native.ops().bind_train(
            self.forward.native, self.backward.native, self.out_ix, self.state_ix,
            self.kept_ix, [int(r) for r in self.leaf_read],
            [-1 if ix is None else ix for ix in self.grad_ix],
            list(non_differentiable))
        _native.note_training(self.native, self.forward.native, self.backward.native,
                              self.out_ix + self.state_ix)

    def __del__(self):
        _native.release(getattr(self, "native", None))

    def preload(self, NCL: int) -> None:
        """The backward's entry for NCL starts compiling in the background on
        its first use (the driver's compile then overlaps the forward's)."""
        if self._preloaded != NCL:
            self._backward_launcher.preload(NCL)
            self._preloaded = NCL

    def run(self, leaves):
        """(outputs, state results), through the operators' autograd node."""
        res = _native.train(self.native, leaves)
        no = len(self.out_ix)
        return list(res[:no]), list(res[no:])

    def run_forward(self, leaves):
        """(outputs, state results, kept)."""
        res = self.forward(leaves)
        return [res[i] for i in self.out_ix], [res[i] for i in self.state_ix], \
            [res[i] for i in self.kept_ix]

    def run_backward(self, leaves, kept, grads, defined=None) -> list:
        """Each leaf's gradient. `defined`: per leaf its (shape, dtype), or
        None where the call passed none (by default taken from `leaves`,
        which then must all be given where passed)."""
        if defined is None:
            defined = [None if t is None else (t.shape, t.dtype) for t in leaves]
        args = list(leaves) + list(kept)
        args += as_contiguous(grads)
        res = self.backward(args)
        out = []
        for passed, ix in zip(defined, self.grad_ix):
            if ix is None or passed is None:
                out.append(None)
                continue
            shape, dtype = passed
            g = res[ix]
            if g.dtype != dtype:
                g = g.to(dtype)
            if g.shape != shape:  # a state or scalar shaped otherwise
                g = g.view(shape)
            out.append(g)
        return out


class TrainPrep:
    """The training kernels of one configuration, compiled with the
    automatic saving policy (the compiler's minimum cut, save-ops=auto): a
    core whose backward reads no state sequence also has a final-state
    pair, which a call that wants no state sequences runs: its forward
    writes final states, not sequences, and nothing but the saved values
    stays alive for its backward. Each pair is bound on first use: on the
    CPU binding a kernel JIT-compiles it, so a configuration that only
    ever runs one pair compiles two kernels, not four."""

    def __init__(self, cc: "CompiledCore", dtype, device: torch.device, p_dtypes, p_scalar,
                 mask):
        ni, ns, no, npar = cc.num_inputs, cc.num_states, cc.num_outputs, len(p_dtypes)
        target, chip, index = _where(device)
        ir = cc.ir([dtype] * (ni + ns), p_dtypes, p_scalar, mask)
        self._program = _program.get_program(ir, target, chip, differentiate=True,
                                             save_ops="auto")
        self._index = index
        self._counts = (ni, ns, no, npar, cc.non_differentiable)
        self._has_final = "core_forward_final" in self._program.kernels
        self._pairs = {}

    def _bound(self, final: bool) -> TrainPair:
        pair = self._pairs.get(final)
        if pair is None:
            names = ("core_forward_final", "core_backward_final") if final else \
                ("core_forward", "core_backward")
            pair = self._pairs[final] = TrainPair(self._program, *names, final,
                                                  self._index, *self._counts)
        return pair

    @property
    def seqs(self) -> TrainPair:
        """The pair whose forward writes state sequences."""
        return self._bound(False)

    @property
    def final(self) -> Optional[TrainPair]:
        """The final-state pair, or None where the compiler built none."""
        return self._bound(True) if self._has_final else None

    def pair(self, want_seqs: bool) -> TrainPair:
        return self._bound(not want_seqs and self._has_final)

    def preload(self, NCL: int, want_seqs: bool = True) -> None:
        self.pair(want_seqs).preload(NCL)

    def run(self, leaves, want_seqs: bool):
        """A training call as run_compiled returns it: (outputs, state
        sequences or None, final states)."""
        pair = self.pair(want_seqs)
        outs, states = pair.run(leaves)
        return call_result(outs, states, pair.final, want_seqs)



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


def prepare_infer(cc: CompiledCore, dtype, device, want_seqs: bool, p_dtypes,
                  p_scalar) -> InferPrep:
    key = ("infer", dtype, device, want_seqs, tuple(p_dtypes), tuple(p_scalar))
    prep = cc.prepared.get(key)
    if prep is None:
        prep = cc.prepared[key] = InferPrep(cc, dtype, device, want_seqs, p_dtypes,
                                            p_scalar)
    return prep


def prepare_train(cc: CompiledCore, dtype, device, p_dtypes, p_scalar, mask) -> TrainPrep:
    key = ("train", dtype, device, tuple(p_dtypes), tuple(p_scalar), tuple(mask))
    prep = cc.prepared.get(key)
    if prep is None:
        prep = cc.prepared[key] = TrainPrep(cc, dtype, device, p_dtypes, p_scalar, mask)
    return prep


def geometry(first: torch.Tensor) -> tuple:
    """(T, NCL, [T, *S], [*S], device) of a call whose input #0 is `first`:
    what a bound kernel call takes besides its tensors."""
    seq_shape = tuple(first.shape)
    T = seq_shape[0]
    return (T, first.numel() // T if T else 0, seq_shape, seq_shape[1:], first.device)


def run_empty(cc: CompiledCore, inputs, init_states, training: bool, want_seqs: bool):
    """T == 0: no launch. Outputs are empty (in training, tied to the inputs
    so that a backward through them works); the states pass through."""
    first = inputs[0]
    step = tuple(first.shape[1:])
    no, ns = cc.num_outputs, cc.num_states
    outs = [first * 0 if training else first.new_empty((0, *step)) for _ in range(no)]
    seqs = [first.new_empty((0, *step)) for _ in range(ns)] if want_seqs else None
    finals = list(init_states) if init_states is not None else \
        [first.new_zeros(step) for _ in range(ns)]
    return outs, seqs, finals


class Plan:
    """How run_compiled ran one call, recorded in libFlexSNTorch.so to run
    the next call of the same configuration with none of the general
    path's checks, conversions and lookups (FlexSN.forward's fast path):
    the operator checks a call against the configuration (grad mode and
    which tensors require grad; per tensor whether it is passed, its dtype,
    device and sizes, contiguity) and launches the inference kernel or the
    training node in one call, or returns nothing for a call that differs,
    which then takes the general path."""

    __slots__ = ("native", "num_results", "num_outputs", "final", "want_seqs")

    def __init__(self, prep, want_seqs: bool, args: list):
        """`prep`: the InferPrep or TrainPrep the recorded call ran; `args`:
        its tensors as its kernels took them."""
        last_steps = False
        if isinstance(prep, InferPrep):
            target, train = prep.kernel.native, False
            order = prep.out_ix + prep.rest_ix
            self.num_outputs, self.final = len(prep.out_ix), not want_seqs
            self.num_results = len(order)
        else:
            pair = prep.pair(want_seqs)
            target, train = pair.native, True
            order = []
            # A pair that writes state sequences, for a call that wants only
            # the final states: the operator returns the sequences' last
            # steps.
            last_steps = not pair.final and not want_seqs
            self.num_outputs, self.final = len(pair.out_ix), pair.final or last_steps
            self.num_results = len(pair.out_ix) + len(pair.state_ix)
        self.want_seqs = want_seqs
        self.native = None
        if self.num_results:  # (an empty result would read as "no match")
            self.native = _native.ops().bind_plan(target, train, order, args,
                                                  torch.is_grad_enabled(), last_steps)

    def __del__(self):
        _native.release(getattr(self, "native", None))

    def call(self, args: list) -> Optional[tuple]:
        """The call's (outputs, state sequences or None, final states), or
        None when it does not have this plan's configuration. `args`: its
        tensors as the kernels take them (inputs, initial states or None
        each, parameters)."""
        try:
            res = _native.run_plan(self.native, args)
        except RuntimeError as e:
            message = str(e)
            if message.startswith("flexsn_native::run_plan()"):
                return None  # an argument not a tensor: the general path names it
            if message.startswith("flexsn: kernel launch failed"):
                raise FlexSNError(message[len("flexsn: "):]) from None
            raise
        if len(res) != self.num_results:
            return None
        no = self.num_outputs
        return call_result(res[:no], res[no:], self.final, self.want_seqs)


def _plan_for(prep, geom, want_seqs: bool, tensors, taken) -> Optional[Plan]:
    """The Plan of a call run_compiled ran with `prep`, or None when it took
    a tensor other than the one given (a contiguous copy, a move, a
    broadcast), which a plan does not repeat. `tensors`: (inputs, initial
    states or None, parameters) as given; `taken`: as the kernels took
    them."""
    inputs, init_states, params = tensors
    for given, took in zip(tensors, taken):
        if given is not None and any(a is not b for a, b in zip(given, took)):
            return None
    if init_states is not None and any(t.shape != geom[3] for t in init_states):
        return None
    xs, s0, ps = taken
    plan = Plan(prep, want_seqs, list(xs) + list(s0) + list(ps))
    return plan if plan.native is not None else None


def run_compiled(cc: CompiledCore, inputs, init_states, params, *, want_seqs: bool,
                 grad_mask: Optional[Sequence[bool]] = None, plan: Optional[list] = None):
    """Runs `cc` on `inputs` ([T, *S]) from `init_states` ([*S]; None: zeros)
    with `params`; returns (outputs [T, *S], state sequences [T, *S] or None,
    final states [*S]). The kernels and their bound arguments are looked up
    by the call's configuration, prepared on its first call. `plan`, a list:
    the call's Plan is appended to it (None appended when the call has
    none)."""
    first = inputs[0]
    geom = geometry(first)
    T, NCL, _, step, device = geom
    mask = None
    if torch.is_grad_enabled():
        mask = requires_grad_mask(inputs, init_states, cc.num_states, params, grad_mask)
        if not any(mask):
            mask = None
    if T == 0:
        if plan is not None:
            plan.append(None)
        return run_empty(cc, inputs, init_states, mask is not None, want_seqs)
    ps, p_dtypes, p_scalar = flat_params(params, step, device)
    xs = as_contiguous(inputs)
    # No initial states: null pointers, read as zeros by the kernels.
    s0 = [None] * cc.num_states if init_states is None else as_contiguous(init_states)
    if mask is None:
        prep = prepare_infer(cc, first.dtype, device, want_seqs, p_dtypes, p_scalar)
    else:
        prep = prepare_train(cc, first.dtype, device, p_dtypes, p_scalar, mask)
        prep.preload(NCL, want_seqs)
    if plan is not None:
        plan.append(_plan_for(prep, geom, want_seqs, (inputs, init_states, params),
                              (xs, s0, ps)))
    return prep.run(xs + s0 + ps, want_seqs)


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
