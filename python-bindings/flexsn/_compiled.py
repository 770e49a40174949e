"""A core compiled for our kernels: the traced core and its IR per
configuration (CompiledCore), and per configuration its bound kernels:
inference (InferenceConfig) and the training pairs (TrainingConfig,
TrainingBinding), whose forward and backward run as one autograd node of
the package's operators.

Shapes: input sequences ``[T, *S]``, initial states ``[*S]`` (``S`` the
per-step shape, ``NCL = prod(S)`` neurons); the kernels see ``[T, NCL]`` and
``[NCL]``. Parameters are scalars when they hold one element, otherwise
per-step tensors.
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from typing import Callable, Optional, Sequence

import torch

from . import _backend, _emit, _fakes, _graph, _native, _program, _recipes, _recorder, _spikes
from ._errors import FallbackWarning, FlexSNError, UnsupportedOpError

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
        # outputs whose values are exactly 0 or 1 (see _spikes)
        self.spike_outputs = _graph.spike_outputs(self.traced)
        self._ir: dict[tuple, str] = {}
        # InferenceConfig / TrainingConfig by configuration (see inference_config)
        self.prepared: dict[tuple, object] = {}
        # Emit once now: an op outside the table, or a bool output, is found
        # when the module is built, not at its first call.
        n = num_inputs + num_states + len(self.traced.params)
        self.ir([torch.float32] * (num_inputs + num_states),
                [torch.float32] * len(self.traced.params),
                [False] * len(self.traced.params), [False] * n)

    def ir(self, in_dtypes, param_dtypes, param_scalar, mask, chunk_width: int = 0,
           states_only: bool = False, state_storage=None) -> str:
        key = (tuple(in_dtypes), tuple(param_dtypes), tuple(param_scalar), tuple(mask),
               chunk_width, states_only, state_storage)
        text = self._ir.get(key)
        if text is None:
            text = _emit.emit(self.traced, in_dtypes, param_dtypes, param_scalar, mask,
                              chunk_width=chunk_width, states_only=states_only,
                              state_storage=state_storage)
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


def _leaf_positions(num_inputs: int, num_states: int, num_params: int) -> dict:
    """Where each input, initial state and parameter is in a call's tensor
    list (inputs, then initial states, then parameters)."""
    positions = {("input", i): i for i in range(num_inputs)}
    positions.update({("init_state", s): num_inputs + s for s in range(num_states)})
    positions.update({("param", p): num_inputs + num_states + p for p in range(num_params)})
    return positions


def call_result(outs, rest, final: bool, want_seqs: bool):
    """A call's (outputs, state sequences or None, final states), as
    run_compiled returns it, from a kernel's outputs and its state results
    `rest` (final states when `final`, else state sequences, whose last
    steps are the final states)."""
    if final:
        return outs, None, rest
    return outs, (rest if want_seqs else None), [q[-1] for q in rest]


def repair_of(program, kernel: "_program.KernelBinding", index: int):
    """The chunk repair kernel of `kernel` (a kernel of a scan with
    flexsn.chunk_width), bound to a call's tensors followed by the
    kernel's results, which it rewrites in place; else None."""
    name = kernel.name + "_repair"
    if name not in program.kernels:
        return None
    positions = dict(kernel.positions)
    n = kernel.num_args
    positions.update({key: n + j for j, key in enumerate(kernel.result_keys)})
    return _program.KernelBinding(program.entry(name, index), positions, in_place=True)


class _Repairable:
    """A configuration whose kernel may have a chunk repair kernel
    (`_repair`, from repair_of)."""

    _repair = None

    @property
    def has_repair(self) -> bool:
        return self._repair is not None

    def repair(self, args: list, results: list) -> bool:
        """Runs the chunk repair kernel on a call's `args` and `results`
        (chunked_time; False where there is none)."""
        if self._repair is None:
            return False
        self._repair(list(args) + list(results))
        return True


class InferenceConfig(_Repairable):
    """The inference kernel of one configuration (dtype, device, parameter
    kinds, state sequences or final states), its arguments bound: ``xs + s0
    + ps`` (inputs, initial states, parameters). An initial state may be
    None: the kernel reads a null pointer as zeros (nothing allocated).
    `state_dtype`: the states' storage when not the inputs' (chunked_time's
    float32 chunk borders of a half-precision call); `chunk_width`: the
    GPU kernel reads chunks side by side in rows of that many neurons."""

    def __init__(self, compiled: "CompiledCore", dtype, device: torch.device, want_seqs: bool,
                 p_dtypes, p_scalar, state_dtype=None, chunk_width: int = 0,
                 states_only: bool = False):
        num_inputs, num_states = compiled.num_inputs, compiled.num_states
        num_params = len(p_dtypes)
        target, chip, index = _where(device)
        ir = compiled.ir([dtype] * num_inputs + [state_dtype or dtype] * num_states, p_dtypes,
                         p_scalar, [False] * (num_inputs + num_states + num_params),
                         chunk_width, states_only)
        program = _program.get_program(ir, target, chip)
        entry = program.entry("core_inference" if want_seqs else "core_final_state", index)
        self.kernel = _program.KernelBinding(entry, _leaf_positions(num_inputs, num_states,
                                                                    num_params))
        self._repair = repair_of(program, self.kernel, index)
        self.out_ix = [] if states_only else \
            [self.kernel.index(("output", k)) for k in range(compiled.num_outputs)]
        rest = "state_seq" if want_seqs else "final_state"
        self.rest_ix = [self.kernel.index((rest, s)) for s in range(num_states)]
        _backend.note_layout(self.kernel.native, num_inputs, num_states, self.out_ix,
                             self.rest_ix, not want_seqs)

    def __call__(self, args):
        """(outputs [T, *S], state sequences [T, *S] or final states [*S])."""
        res = self.kernel(args)
        return [res[i] for i in self.out_ix], [res[i] for i in self.rest_ix]

    def run(self, args, want_seqs: bool):
        """A call as run_compiled returns it: (outputs, state sequences or
        None, final states); `want_seqs` as this kernel was prepared."""
        outs, rest = self(args)
        return call_result(outs, rest, not want_seqs, want_seqs)


_recompute_depth = 0


def recompute_active() -> bool:
    return _recompute_depth > 0


@contextlib.contextmanager
def recompute_states():
    """Training calls made inside keep for their backward only what the
    forward read (inputs, initial states, parameters), not the state
    sequences and saved values the forward wrote: the backward runs the
    forward kernel again to get those back (the same kernel on the same
    tensors: the same values, bit for bit). Fewer bytes live between the
    forward and the backward where a neuron keeps more than its input (a
    bf16 LIF keeps its input and its state sequence), for one more
    forward scan per backward. Exact; under torch.compile too."""
    global _recompute_depth
    _recompute_depth += 1
    try:
        yield
    finally:
        _recompute_depth -= 1


_chunking: Optional[tuple] = None  # (chunks, rounds, ChunkedCalls) while chunked_time is open


def chunking() -> Optional[tuple]:
    return _chunking


class ChunkedCalls:
    """What the calls inside a chunked_time did: `calls` ran as chunks,
    `affine` of them from composed carries, `repaired` settled on the
    device (by the chunk repair kernel), `launches` in all (a settled
    call's rounds; three for a call from carries; a repaired call's
    guess launch, kernel and repair kernel), `sequential` of them ran as
    the sequential scan after `rounds` launches did not settle. A call
    from carries or repaired needs no host sync."""

    def __init__(self):
        self.calls = self.affine = self.repaired = self.launches = self.sequential = 0

    def from_carries(self) -> None:
        """Counts a call from composed carries: the transfer, carry and
        core launches."""
        self.calls += 1
        self.affine += 1
        self.launches += 3

    def __repr__(self):
        return (f"ChunkedCalls(calls={self.calls}, affine={self.affine}, "
                f"repaired={self.repaired}, launches={self.launches}, "
                f"sequential={self.sequential})")


@contextlib.contextmanager
def chunked_time(chunks="auto", rounds: int = 4, scheme: str = "auto"):
    """Calls made inside run their T steps as `chunks` chunks of T / chunks
    steps side by side, the chunks as extra neurons of one launch (on a
    GPU with NCL a multiple of 8 the kernels read each chunk where it
    lies; else the steps are copied into chunk rows and back).

    ``chunks="auto"`` chooses per call, from T, NCL, the device and whether
    a CUDA graph is being captured: on a GPU, chunks where the sequential
    scan's T step latencies outweigh what chunks add and NCL is small
    enough (times the element size, 16 KiB or less) for the sequential
    scan to be latency-bound, about 64K threads' worth (16 steps or more
    a chunk); else, and on the CPU, the sequential scan. An int forces
    that many chunks; outside chunked_time every call is sequential.

    ``scheme="affine"`` (what ``"auto"`` picks for a core whose states all
    update affinely: leaky integrators, synaptic currents, neurons without
    reset, as the compiler proves): the compiler's transfer kernel gives
    each chunk's map from its first to its last states, s -> A s + b, a
    carry kernel composes those over the chunks in order into each chunk's
    first states, and the core's kernel runs every chunk from them. Three
    launches, no host sync (a CUDA graph can hold them), for any leak, a
    pure integrator included. The carries compose in another order than the
    steps do, so results agree with the sequential scan to rounding (a
    spike can differ only where the membrane lies within rounding of the
    threshold). Forcing "affine" on a core that is not raises the
    compiler's reason.

    A training call's backward (either scheme but "settle") composes too,
    for any core: given what its forward saved, the reverse-time backward
    scan is affine in the adjoints, reset or not. The compiler's backward
    transfer kernel gives each chunk's map from the adjoint past its last
    step to its first state's, the carry kernel composes those from the
    last chunk, and the backward kernel runs every chunk from its end
    adjoint: three launches, no host sync, the gradients of this forward
    to rounding.

    Other cores (a reset through a spike) settle. ``"auto"`` on a GPU
    whose kernels read the chunks in place: a final-state kernel of the
    core from the call's initial state guesses every chunk's end, the
    kernel runs each chunk from the end before it, and the compiler's
    chunk repair kernel reruns, in place, each chunk whose start was not
    bit for bit what the chunk before ends with: three launches, no host
    sync (a CUDA graph can hold them), the sequential scan at worst
    (``rounds=1``: no guess, every chunk from the call's initial state).
    ``scheme="settle"`` (and ``"auto"`` elsewhere): each chunk runs from a
    guess of its first state (the call's initial state), then again from
    the states the chunk before ended with, until no chunk's first state
    changes. Settled either way, each chunk starts from the sequential
    scan's state and computes what it computes: outputs, state sequences
    and final states are the sequential scan's bit for bit. With
    ``scheme="settle"`` a training call's backward runs the same way from
    the last chunk (each chunk's end adjoint the first-state adjoint of the
    chunk after): the gradients of the inputs and initial states are the
    sequential scan's too, a parameter's sums its steps in another order.
    At most `rounds` launches each way; a forward not settled by then runs
    as the sequential scan, a backward as the sequential forward and
    backward. A launch costs a pass
    over all T steps, so this pays where a step's latency, not bandwidth,
    bounds the scan (few neurons, many steps) and a neuron forgets where it
    started (a leak, a reset) within a chunk. A half-precision call's
    chunks start and end in float32, as its kernels carry states from step
    to step; in training its backward reads the states rounded as the
    sequential scan stores them. A call whose T the chunks do not divide,
    a call inside recompute_states() and a call under torch.compile run as
    before. Each
    round settling on the host compares states there: a device sync, so
    such a call being captured into a CUDA graph runs as before. Yields a
    :class:`ChunkedCalls` that counts what the calls did.
    On the CPU, "bit for bit" needs every neuron computed alike: a
    core with a function of glibc's vector math library (exp, log, ...)
    rounds it there in the vectorized loop and as libm does in its scalar
    remainder (a few ulps apart), so the chunks, placed otherwise, may
    differ by those ulps, as two calls of different NCL do."""
    if chunks != "auto" and (not isinstance(chunks, int) or isinstance(chunks, bool)
                             or chunks < 2):
        raise ValueError(f"chunked_time: chunks must be 'auto' or an int >= 2, got {chunks!r}")
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise ValueError(f"chunked_time: rounds must be an int >= 1, got {rounds!r}")
    if scheme not in ("auto", "affine", "settle"):
        raise ValueError(f"chunked_time: scheme must be 'auto', 'affine' or 'settle', "
                         f"got {scheme!r}")
    global _chunking
    record = ChunkedCalls()
    before, _chunking = _chunking, (chunks, rounds, record, scheme)
    try:
        yield record
    finally:
        _chunking = before


class TrainingBinding(_Repairable):
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
                 num_inputs: int, num_states: int, num_outputs: int, num_params: int,
                 non_differentiable, recompute: bool = False):
        n = num_inputs + num_states + num_params
        leaves = _leaf_positions(num_inputs, num_states, num_params)
        self.final = final
        self.forward = _program.KernelBinding(program.entry(fwd_name, index), leaves)
        self._repair = repair_of(program, self.forward, index)
        self.out_ix = [self.forward.index(("output", k)) for k in range(num_outputs)]
        state_key = "final_state" if final else "state_seq"
        self.state_ix = [self.forward.index((state_key, s)) for s in range(num_states)]
        # Kept for the backward: every state sequence (the caller may hold
        # them anyway), or, of a final-state pair, the sequences it writes
        # because the backward reads them; then the saved values.
        kept = [k for k in self.forward.result_keys if k[0] == "state_seq"] if final \
            else [("state_seq", s) for s in range(num_states)]
        kept += [k for k in self.forward.result_keys if k[0] == "saved"]
        self.kept_ix = [self.forward.index(k) for k in kept]
        back = dict(leaves)
        back.update({k: n + j for j, k in enumerate(kept)})
        m = n + len(kept)
        grad_key = "grad_final_state" if final else "grad_state_seq"
        back.update({("grad_output", k): m + k for k in range(num_outputs)})
        back.update({(grad_key, s): m + num_outputs + s for s in range(num_states)})
        self._backward_entry = program.entry(bwd_name, index)
        self.backward = _program.KernelBinding(self._backward_entry, back)
        self.positions = back  # of a backward call's tensors, by meaning
        # Leaves the backward reads; the others are not kept alive for it.
        read = {pos for _, pos in self.backward.reads}
        self.leaf_read = [j in read for j in range(n)]
        keys = self.backward.result_keys
        wanted = [("grad_input", i) for i in range(num_inputs)] + \
            [("grad_init_state", s) for s in range(num_states)] + \
            [("grad_param", p) for p in range(num_params)]
        self.grad_ix = [keys.index(k) if k in keys else None for k in wanted]
        self._preloaded = None
        # Forward and backward as one C++ autograd node.
        layout = (self.out_ix, self.state_ix, self.kept_ix, [int(r) for r in self.leaf_read],
                  [-1 if ix is None else ix for ix in self.grad_ix], list(non_differentiable),
                  recompute)
        key = _native.content_key("train", self.forward.native, self.backward.native, *layout)
        # what binds it in another process (csrc/FlexSNTorch.cpp, Recipes)
        self.recipe = _recipes.recipe(_recipes.training_section(
            key, recompute, self.forward.section, self.backward.section,
            dict(zip(("out", "state", "kept", "read", "grad", "nondiff"), layout[:6])))) \
            if self.forward.section and self.backward.section else ""
        self.native = _native.bind_shared(key, lambda key: _native.bind_train(
            self.forward.native, self.backward.native, *layout, key, self.recipe))
        _fakes.note_training(self.native, self.forward.native, self.backward.native,
                              self.out_ix + self.state_ix)
        # the train operator returns the outputs, then the state results
        _backend.note_layout(self.native, num_inputs, num_states, list(range(num_outputs)),
                             list(range(num_outputs, num_outputs + num_states)), final,
                             [ix is not None for ix in self.grad_ix])

    def __del__(self):
        native = getattr(self, "native", None)
        if _native is None:  # the interpreter is shutting down: nothing to release
            return
        if _native.release(native):
            _spikes.forget_spike_results(native)

    def preload(self, NCL: int) -> None:
        """The backward's entry for NCL starts compiling in the background on
        its first use (the driver's compile then overlaps the forward's)."""
        if self._preloaded != NCL:
            self._backward_entry.preload(NCL)
            self._preloaded = NCL

    def run(self, leaves):
        """(outputs, state results), through the operators' autograd node."""
        res = _native.train(self.native, leaves)
        num_outputs = len(self.out_ix)
        return list(res[:num_outputs]), list(res[num_outputs:])


class TrainingConfig:
    """The training kernels of one configuration, compiled with the
    automatic saving policy (the compiler's minimum cut, save-ops=auto): a
    core with states also has a final-state pair, which a call that wants
    no state sequences runs: its forward writes final states, and state
    sequences only where the backward reads them, and nothing else but the
    saved values stays alive for its backward. Each pair is bound on first
    use: on the CPU binding a kernel JIT-compiles it, so a configuration
    that only ever runs one pair compiles two kernels, not four."""

    def __init__(self, compiled: "CompiledCore", dtype, device: torch.device, p_dtypes, p_scalar,
                 mask, chunk_width: int = 0, state_dtype=None):
        num_inputs, num_states = compiled.num_inputs, compiled.num_states
        num_outputs, num_params = compiled.num_outputs, len(p_dtypes)
        target, chip, index = _where(device)
        # States in `state_dtype` (chunk borders) save what states in
        # `dtype` would: the sequential scan's choice.
        ir = compiled.ir([dtype] * num_inputs + [state_dtype or dtype] * num_states, p_dtypes,
                         p_scalar, mask, chunk_width,
                         state_storage=dtype if state_dtype is not None else None)
        self._program = _program.get_program(ir, target, chip, differentiate=True,
                                             save_ops="auto")
        self._source = (ir, target, chip)
        self._adjoints = {}
        self._index = index
        self._counts = (num_inputs, num_states, num_outputs, num_params,
                        compiled.non_differentiable)
        self._has_final = "core_forward_final" in self._program.kernels
        self._spike_outputs = compiled.spike_outputs
        self._pairs = {}

    def _bound(self, final: bool, recompute: bool = False) -> TrainingBinding:
        pair = self._pairs.get((final, recompute))
        if pair is None:
            names = ("core_forward_final", "core_backward_final") if final else \
                ("core_forward", "core_backward")
            pair = self._pairs[final, recompute] = TrainingBinding(
                self._program, *names, final, self._index, *self._counts, recompute)
            # where its operators return spike outputs, for compact_spikes()
            # inside compiled graphs (the train operator returns outputs first)
            _spikes.note_spike_results(pair.native,
                                       [pair.out_ix[k] for k in self._spike_outputs],
                                       list(self._spike_outputs))
            if final:
                # the pair that writes state sequences, for flexsn.backend
                # (a loop that reads every step's state)
                owner = weakref.ref(self)

                def sequences(owner=owner, recompute=recompute):
                    config = owner()
                    seqs = config._bound(False, recompute) if config is not None else None
                    return None if seqs is None else (seqs.native, seqs.recipe)
                _backend.note_sequences(pair.native, sequences)
        return pair

    def adjoint_chunks(self, final: bool):
        """(the backward transfer kernel of the pair `final`, an
        _affine.AdjointChunks; or None and why not), built on first use."""
        from . import _affine  # which imports this module
        got = self._adjoints.get(final)
        if got is None:
            ir, target, chip = self._source
            pair = self._bound(final)
            try:
                program = _program.get_program(ir, target, chip, differentiate=True,
                                               save_ops="auto", transfer=True)
                got = (_affine.AdjointChunks(program, pair, self._counts[1], self._index), "")
            except (FlexSNError, _affine.NoAdjointChunks) as e:
                got = (None, str(e))
            self._adjoints[final] = got
        return got

    @property
    def seqs(self) -> TrainingBinding:
        """The pair whose forward writes state sequences."""
        return self._bound(False)

    @property
    def final(self) -> Optional[TrainingBinding]:
        """The final-state pair, or None where the compiler built none."""
        return self._bound(True) if self._has_final else None

    def pair(self, want_seqs: bool, recompute: Optional[bool] = None) -> TrainingBinding:
        """The pair a call runs; `recompute` None: as recompute_states() says."""
        if recompute is None:
            recompute = recompute_active()
        return self._bound(not want_seqs and self._has_final, recompute)

    def preload(self, NCL: int, want_seqs: bool = True) -> None:
        self.pair(want_seqs).preload(NCL)

    def run(self, leaves, want_seqs: bool):
        """A training call as run_compiled returns it: (outputs, state
        sequences or None, final states)."""
        pair = self.pair(want_seqs)
        outs, states = pair.run(leaves)
        return call_result(outs, states, pair.final, want_seqs)


def inference_config(compiled: CompiledCore, dtype, device, want_seqs: bool, p_dtypes,
                  p_scalar, state_dtype=None, chunk_width: int = 0,
                  states_only: bool = False) -> InferenceConfig:
    key = ("infer", dtype, device, want_seqs, tuple(p_dtypes), tuple(p_scalar))
    if state_dtype == dtype:
        state_dtype = None
    # chunked_time's own kernels
    chunked = state_dtype is not None or chunk_width > 0 or states_only
    if chunked:
        key += (state_dtype, chunk_width, states_only)
    prep = compiled.prepared.get(key)
    if prep is None:
        prep = compiled.prepared[key] = InferenceConfig(compiled, dtype, device, want_seqs,
                                                        p_dtypes, p_scalar, state_dtype,
                                                        chunk_width, states_only)
        if not want_seqs and not chunked:
            # the kernel that writes state sequences, for flexsn.backend
            owner = weakref.ref(compiled)

            def sequences(owner=owner):
                core = owner()
                if core is None:
                    return None
                seqs = inference_config(core, dtype, device, True, p_dtypes, p_scalar).kernel
                return seqs.native, seqs.recipe
            _backend.note_sequences(prep.kernel.native, sequences)
    return prep


def training_config(compiled: CompiledCore, dtype, device, p_dtypes, p_scalar,
                    mask, chunk_width: int = 0, state_dtype=None) -> TrainingConfig:
    """The training kernels of a configuration; `state_dtype`: the states'
    storage when not the inputs' (chunked_time's float32 chunk borders of a
    half-precision call: initial and final states, state sequences and
    their adjoints)."""
    if state_dtype == dtype:
        state_dtype = None
    key = ("train", dtype, device, tuple(p_dtypes), tuple(p_scalar), tuple(mask))
    if chunk_width or state_dtype is not None:
        key += (chunk_width, state_dtype)
    prep = compiled.prepared.get(key)
    if prep is None:
        prep = compiled.prepared[key] = TrainingConfig(compiled, dtype, device, p_dtypes,
                                                       p_scalar, mask, chunk_width, state_dtype)
    return prep
