"""Running a core over T steps: compiled (our kernels, with the plans that
repeat a call's configuration in one operator call) or as the reference
Python loop ("torch" backend)."""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from . import _affine, _native
from ._checks import as_contiguous, flat_params, requires_grad_mask
from ._compiled import (CompiledCore, InferenceConfig, call_result, chunking, inference_config,
                        recompute_active, training_config)
from ._errors import FlexSNError

def run_empty(compiled: CompiledCore, inputs, init_states, training: bool, want_seqs: bool):
    """T == 0: no launch. Outputs are empty (in training, tied to the inputs
    so that a backward through them works); the states pass through."""
    first = inputs[0]
    step = tuple(first.shape[1:])
    num_outputs, num_states = compiled.num_outputs, compiled.num_states
    outs = [first * 0 if training else first.new_empty((0, *step)) for _ in range(num_outputs)]
    seqs = [first.new_empty((0, *step)) for _ in range(num_states)] if want_seqs else None
    finals = list(init_states) if init_states is not None else \
        [first.new_zeros(step) for _ in range(num_states)]
    return outs, seqs, finals


class FastPathPlan:
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
        """`prep`: the InferenceConfig or TrainingConfig the recorded call ran; `args`:
        its tensors as its kernels took them."""
        last_steps = False
        if isinstance(prep, InferenceConfig):
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
        num_outputs = self.num_outputs
        return call_result(res[:num_outputs], res[num_outputs:], self.final, self.want_seqs)


def _plan_for(prep, step: tuple, want_seqs: bool, tensors, taken) -> Optional[FastPathPlan]:
    """The FastPathPlan of a call run_compiled ran with `prep`, or None when it took
    a tensor other than the one given (a contiguous copy, a move, a
    broadcast), which a plan does not repeat. `tensors`: (inputs, initial
    states or None, parameters) as given; `taken`: as the kernels took
    them."""
    inputs, init_states, params = tensors
    for given, took in zip(tensors, taken):
        if given is not None and any(a is not b for a, b in zip(given, took)):
            return None
    if init_states is not None and any(t.shape != step for t in init_states):
        return None
    xs, s0, ps = taken
    plan = FastPathPlan(prep, want_seqs, list(xs) + list(s0) + list(ps))
    return plan if plan.native is not None else None


def run_compiled(compiled: CompiledCore, inputs, init_states, params, *, want_seqs: bool,
                 grad_mask: Optional[Sequence[bool]] = None, plan: Optional[list] = None):
    """Runs `compiled` on `inputs` ([T, *S]) from `init_states` ([*S]; None: zeros)
    with `params`; returns (outputs [T, *S], state sequences [T, *S] or None,
    final states [*S]). The kernels and their bound arguments are looked up
    by the call's configuration, prepared on its first call. `plan`, a list:
    the call's FastPathPlan is appended to it (None appended when the call has
    none)."""
    first = inputs[0]
    T, step, device = first.shape[0], tuple(first.shape[1:]), first.device
    NCL = first.numel() // T if T else 0
    mask = None
    if torch.is_grad_enabled():
        mask = requires_grad_mask(inputs, init_states, compiled.num_states, params, grad_mask)
        if not any(mask):
            mask = None
    if T == 0:
        if plan is not None:
            plan.append(None)
        return run_empty(compiled, inputs, init_states, mask is not None, want_seqs)
    ps, p_dtypes, p_scalar = flat_params(params, step, device)
    xs = as_contiguous(inputs)
    # No initial states: null pointers, read as zeros by the kernels.
    s0 = [None] * compiled.num_states if init_states is None else as_contiguous(init_states)
    chunked = _chunked(compiled, T, mask is not None, first, p_dtypes, p_scalar)
    if chunked is not None and plan is not None:
        plan.append(None)  # a plan would run the sequential scan
        plan = None
    if mask is None:
        prep = inference_config(compiled, first.dtype, device, want_seqs, p_dtypes, p_scalar)
        if chunked is not None:
            border = _border(first.dtype)
            r = run_chunks(inference_config(compiled, first.dtype, device, want_seqs, p_dtypes,
                                            p_scalar, border, chunked[-1]),
                           xs, s0, ps, want_seqs, *chunked[:4], chunked[-1], border,
                           _guess(compiled, chunked, first, p_dtypes, p_scalar))
            if r is not None:
                return r
    else:
        prep = training_config(compiled, first.dtype, device, p_dtypes, p_scalar, mask)
        if chunked is not None:
            # the chunks' backward needs each chunk's first-state adjoint
            n = len(inputs)
            states_too = list(mask[:n]) + [True] * compiled.num_states + \
                list(mask[n + compiled.num_states:])
            r = run_chunks_training(
                training_config(compiled, first.dtype, device, p_dtypes, p_scalar, states_too,
                                chunked[-1], _border(first.dtype)),
                xs, s0, ps, want_seqs, *chunked,
                _guess(compiled, chunked, first, p_dtypes, p_scalar))
            if r is not None:
                return r
        prep.preload(NCL, want_seqs)
    if plan is not None:
        plan.append(_plan_for(prep, step, want_seqs, (inputs, init_states, params),
                              (xs, s0, ps)))
    return prep.run(xs + s0 + ps, want_seqs)


def _guess(compiled: CompiledCore, chunked: tuple, first: torch.Tensor, p_dtypes, p_scalar):
    """The final-state kernel (writing no outputs) whose chunk ends are
    the guessed first states of a call that settles on the device (chunks
    read in place, neither composed nor settled on the host), else None."""
    _, _, _, affine, exact, width = chunked
    if affine is not None or exact or not width:
        return None
    return inference_config(compiled, first.dtype, first.device, False, p_dtypes, p_scalar,
                            _border(first.dtype), width, states_only=True)


def _chunked(compiled: CompiledCore, T: int, training: bool, first: torch.Tensor,
             p_dtypes, p_scalar) -> Optional[tuple]:
    """chunked_time's (chunks, rounds, record, affine, exact, width) where this
    call runs as chunks: T a multiple of at least two steps each, a core with states,
    not traced by torch.compile; a training call not recomputing. `affine`:
    the core's AffineChunks where the scheme takes them, else None (the
    chunks settle). `exact`:
    scheme="settle", whose backward settles too (bit for bit, with host
    syncs) where the others compose adjoint carries. `width`:
    the row width of the kernels that read the chunks in place (GPU, NCL
    a multiple of 8 lanes), else 0 (the steps are transposed into chunk
    rows and back). A call being captured into a CUDA graph runs as chunks
    only where nothing needs the host: a call of an affine core, or one
    that settles on the device (chunks read in place, not
    scheme="settle"; without a repair kernel it runs sequentially)."""
    chunked = chunking()
    dtype = first.dtype
    if chunked is None or not compiled.num_states or torch.compiler.is_compiling() or \
            training and recompute_active():
        return None
    chunks, rounds, record, scheme = chunked
    if chunks != "auto" and (T % chunks or T // chunks < 2):
        return None
    NCL = first[0].numel()
    width = NCL if first.is_cuda and NCL and NCL % 8 == 0 else 0
    if chunks == "auto" and auto_chunks(T, NCL, first, training, True, width > 0) is None:
        return None  # not even the cheaper scheme would pay: nothing compiled
    affine = None
    if scheme != "settle":
        affine, why = _affine.affine_chunks(compiled, dtype, first.device, p_dtypes,
                                            p_scalar, _border(dtype), width)
        if affine is None and scheme == "affine":
            raise FlexSNError("chunked_time(scheme='affine') needs a core whose states all "
                              "update affinely: " + why)
    if affine is None and first.is_cuda and torch.cuda.is_current_stream_capturing() and \
            (scheme == "settle" or not width):
        return None  # settling on the host, or without a repair kernel
    if chunks == "auto":
        chunks = auto_chunks(T, NCL, first, training, affine is not None, width > 0)
        if chunks is None:
            return None
    return chunks, rounds, record, affine, scheme == "settle", width


# What a chunked call costs on an H200 (ms; bench/chunked_time.py, LIF and
# LI, f32, T x NCL = 16M): eager (host-bound: launches and small ops) and
# replayed from a CUDA graph, with the kernels reading the chunks in place
# and with the steps transposed, per (training, affine); and a step of the
# sequential scan where few neurons make it latency-bound (ns: LI's, the
# fastest core measured).
_OVERHEAD_MS = {"eager": {(False, True): 0.35, (False, False): 0.35,
                          (True, True): 1.1, (True, False): 0.6},
                "graph": {(False, True): 0.08, (True, True): 0.2,
                          (False, False): 0.08, (True, False): 0.2},
                "graph, transposed": {(False, True): 0.18, (True, True): 0.45}}
_STEP_NS = {False: 25.0, True: 50.0}


def auto_chunks(T: int, NCL: int, first: torch.Tensor, training: bool,
                affine: bool, in_place: bool = True) -> Optional[int]:
    """chunked_time("auto")'s choice for one call: a chunk count, or None
    for the sequential scan. On a GPU, chunks pay where the sequential
    scan's T step latencies exceed what a chunked call adds (its extra
    launches: more eager than replayed from a CUDA graph) and few neurons
    leave the sequential scan latency-bound rather than bandwidth-bound
    (NCL times the element size at most 16 KiB). The count fills about
    64K threads (chunks x NCL), keeps 16 steps or more a chunk and divides
    T. On the CPU the sequential scan runs (chunks not measured to pay).
    `in_place`: the kernels read the chunks where they are (else the steps
    are transposed, which a replay pays for)."""
    if not first.is_cuda or NCL * first.element_size() > 16384:
        return None
    mode = "eager"
    if torch.cuda.is_current_stream_capturing():
        mode = "graph" if in_place else "graph, transposed"
    overhead = _OVERHEAD_MS[mode].get((training, affine))
    if overhead is None or T * _STEP_NS[training] * 1e-6 <= overhead:
        return None
    chunks = 2
    while chunks * 2 * NCL <= 65536 and T // (chunks * 2) >= 16 and T % (chunks * 2) == 0:
        chunks *= 2
    return chunks if T % chunks == 0 and T // chunks >= 16 else None


def _border(dtype):
    """The storage of the states at chunk borders: a half-precision call's
    kernels carry states in float32 from step to step, so its chunks start
    and end in float32 too (stored in half precision, a chunk's first state
    would be rounded where the sequential scan's is not)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _settle(launch, first: list, lay: "_Chunks", rounds: int, record):
    """Launches `launch(starts)` (its result and each state's chunk ends)
    from guessed first states, then from the ends of the launch before,
    until the first states repeat bit for bit: (the settled launch's
    result, its first states), or None after `rounds` launches."""
    starts = [lay.guess(f) for f in first]
    record.calls += 1
    for _ in range(rounds):
        record.launches += 1
        res, ends = launch(starts)
        after = [lay.after(f, e) for f, e in zip(first, ends)]
        settled = all(_same_bits(a, b) for a, b in zip(after, starts))
        starts = after
        if settled:
            return res, starts
    record.sequential += 1
    return None


def _settle_on_device(run, guess, first: list, lay: "_Chunks", rounds: int, record):
    """The chunks settled without the host: from guessed first states (the
    call's initial state; with rounds > 1, the chunk ends of `guess`, a
    final-state launch, from that), `run(starts)` launches the kernel and
    its chunk repair kernel, which reruns in place each chunk whose start
    was not what the chunk before ends with, and stores the true start:
    the launch's results, the sequential scan's bit for bit."""
    starts = [lay.guess(f) for f in first]
    record.calls += 1
    record.repaired += 1
    record.launches += 2
    if rounds > 1:
        ends = guess(starts)
        starts = [lay.after(f, e) for f, e in zip(first, ends)]
        record.launches += 1
    return run(starts), starts


def run_chunks(prep: InferenceConfig, xs: list, s0: list, ps: list, want_seqs: bool,
               chunks: int, rounds: int, record, affine, width, border, guess=None):
    """An inference call's T steps as `chunks` chunks side by side
    (flexsn.chunked_time): (outputs, state sequences or None, final
    states). From `affine`'s carries: the sequential scan's to rounding;
    else settled: the sequential scan's bit for bit (on the device with
    `guess`, the chunked final-state configuration, where the kernel has a
    repair kernel; else on the host), or None where `rounds` launches did
    not settle every chunk's first state."""
    lay = _Chunks(xs[0], chunks, width > 0)
    inputs = [lay.side_by_side(x) for x in xs]
    params = [lay.param(p) for p in ps]
    first = [s.to(border) for s in lay.initial(s0)]

    def split(res):
        outs, rest = [res[i] for i in prep.out_ix], [res[i] for i in prep.rest_ix]
        # each chunk's last step (not the rows' last)
        return (outs, rest, [lay.last_steps(q) for q in rest]) if want_seqs else \
            (outs, None, rest)

    def launch(starts):
        res = split(prep.kernel(inputs + starts + params))
        return res, res[2]

    def repaired(starts):
        args = inputs + starts + params
        res = prep.kernel(args)
        prep.repair(args, res)
        return split(res)
    if affine is not None:
        record.from_carries()
        outs, seqs, finals = launch(affine.starts(inputs, first, params, chunks))[0]
    elif guess is not None and prep.has_repair:
        outs, seqs, finals = _settle_on_device(
            repaired, lambda starts: guess(inputs + starts + params)[1], first, lay, rounds,
            record)[0]
    elif first[0].is_cuda and torch.cuda.is_current_stream_capturing():
        return None  # settling needs the host
    else:
        settled = _settle(launch, first, lay, rounds, record)
        if settled is None:
            return None
        outs, seqs, finals = settled[0]
    dtype = xs[0].dtype  # the states' storage outside the chunks
    return ([lay.in_order(o) for o in outs],
            None if seqs is None else [lay.in_order(q).to(dtype) for q in seqs],
            [f[-1].to(dtype) for f in finals])


class _Chunks:
    """[T, *S] sequences as `chunks` chunks side by side, [T/chunks, chunks,
    *S] (chunk c: neurons [c] of each step), and back. `in_place`: the
    kernels read and write the chunks where they are (flexsn.chunk_width),
    so a sequence in chunk rows is a view of its memory in step order;
    else the steps are copied into chunk rows and back."""

    def __init__(self, x: torch.Tensor, chunks: int, in_place: bool = False):
        """`x`: an input of the call, [T, *S]."""
        self.T, self.step, self.chunks = x.shape[0], tuple(x.shape[1:]), chunks
        self.L, self.like, self.in_place = self.T // chunks, x, in_place

    def initial(self, s0: list) -> list:
        """The call's initial states, zeros where it passes None."""
        x = self.like
        return [torch.zeros(self.step, dtype=x.dtype, device=x.device) if s is None else s
                for s in s0]

    def side_by_side(self, x):
        if self.in_place:
            return x.view(self.L, self.chunks, *self.step)
        return x.reshape(self.chunks, self.L, *self.step).transpose(0, 1).contiguous()

    def in_order(self, x):
        if self.in_place:
            return x.reshape(self.T, *self.step)
        return x.transpose(0, 1).reshape(self.T, *self.step)

    def last_steps(self, q):
        """A sequence in chunk rows: each chunk's last step, [chunks, *S]
        (a view)."""
        if self.in_place:
            return q.view(self.chunks, self.L, *self.step)[:, -1]
        return q[-1]

    def param(self, p):
        """A per-neuron parameter once per chunk (a scalar as it is)."""
        return p if p.numel() == 1 else p.expand(self.chunks, *self.step).contiguous()

    def guess(self, first):
        """Every chunk's first state: the call's initial state."""
        return first.expand(self.chunks, *self.step).contiguous()

    @staticmethod
    def after(first, ends):
        """Each chunk's first state: the end of the chunk before."""
        return torch.cat([first.unsqueeze(0), ends[:-1]])


def run_chunks_training(prep, xs: list, s0: list, ps: list, want_seqs: bool,
                        chunks: int, rounds: int, record, affine, exact, width, guess=None):
    """A training call's T steps as `chunks` chunks side by side
    (flexsn.chunked_time): (outputs, state sequences or None, final
    states), tied to the leaves by one autograd node; None where `rounds`
    launches did not settle every chunk's first state. Settled, the
    outputs and states are the sequential scan's bit for bit; from
    `affine`'s carries, to rounding. The backward composes adjoint
    carries (the compiler's backward transfer kernel): the gradients are
    those of this forward to rounding. `exact` (or a backward without a
    transfer kernel): the backward settles as the forward does, or runs as
    the sequential one, and the gradients of the inputs and initial states
    are the sequential scan's bit for bit; a gradient summed over steps (a
    parameter's) sums in another order either way."""
    pair = prep.pair(want_seqs)
    adjoint = None
    if not exact:
        adjoint = prep.adjoint_chunks(pair.final)[0]
    capturing = xs[0].is_cuda and torch.cuda.is_current_stream_capturing()
    on_device = guess is not None and pair.has_repair
    if capturing and (adjoint is None or affine is None and not on_device):
        return None  # settling needs the host
    lay = _Chunks(xs[0], chunks, width > 0)
    dtype = xs[0].dtype  # the states' storage outside the chunks
    # The chunks' states in the border dtype (float32 for half precision),
    # their adjoints too: the backward carries adjoints in float32 from step
    # to step, which a chunk's first-state adjoint in half precision would
    # round.
    leaves = [lay.side_by_side(x) for x in xs] + \
        [s.to(_border(dtype)) for s in lay.initial(s0)] + [lay.param(p) for p in ps]
    n_in, n_st = len(xs), len(s0)
    with torch.no_grad():
        plain = [t.detach() for t in leaves]

        def launch(starts):
            res = pair.forward(plain[:n_in] + starts + plain[n_in + n_st:])
            states = [res[i] for i in pair.state_ix]
            return res, (states if pair.final else [lay.last_steps(q) for q in states])
        def repaired(starts):
            args = plain[:n_in] + starts + plain[n_in + n_st:]
            res = pair.forward(args)
            pair.repair(args, res)
            return res
        if affine is not None:
            record.from_carries()
            starts = affine.starts(plain[:n_in], plain[n_in:n_in + n_st],
                                   plain[n_in + n_st:], chunks)
            settled = launch(starts)[0], starts
        elif on_device:
            settled = _settle_on_device(
                repaired, lambda starts: guess(plain[:n_in] + starts + plain[n_in + n_st:])[1],
                plain[n_in:n_in + n_st], lay, rounds, record)
        else:
            settled = _settle(launch, plain[n_in:n_in + n_st], lay, rounds, record)
    if settled is None:
        return None
    res, starts = settled
    run = _ChunkedRun(pair, lay, res, starts, n_in, n_st, rounds, record, adjoint,
                      dtype if _border(dtype) != dtype else None)
    results = _ChunkedTraining.apply(run, *leaves)
    outs = [lay.in_order(o) for o in results[:len(pair.out_ix)]]
    states = results[len(pair.out_ix):]
    if pair.final:
        return outs, None, [q[-1].to(dtype) for q in states]
    seqs = [lay.in_order(q).to(dtype) for q in states]
    return outs, (seqs if want_seqs else None), [q[-1] for q in seqs]


class _ChunkedRun:
    """The settled forward launch of run_chunks_training and what its
    backward needs."""

    def __init__(self, pair, lay, res, starts, n_in, n_st, rounds, record, adjoint=None,
                 stored=None):
        self.pair, self.lay, self.res, self.starts = pair, lay, res, starts
        self.n_in, self.n_st, self.rounds, self.record = n_in, n_st, rounds, record
        self.adjoint = adjoint  # the pair's AdjointChunks, where the backward composes carries
        # A half-precision call's dtype: its chunks keep states in float32,
        # which the sequential scan stores rounded to it
        self.stored = stored

    def as_stored(self, state: torch.Tensor) -> torch.Tensor:
        """A state (a float32 chunk border or state sequence) as the
        sequential scan stores it and its backward reads it: rounded to a
        half-precision call's dtype (else as it is). With the kernels
        saving what the sequential scan's save (flexsn.state_storage), the
        backward reads the sequential backward's numbers."""
        return state if self.stored is None else state.to(self.stored).to(state.dtype)

    def kept(self, res: list) -> list:
        """The forward results the backward reads, state sequences as
        stored (as_stored)."""
        keys = self.pair.forward.result_keys
        return [self.as_stored(res[i]) if keys[i][0] == "state_seq" else res[i]
                for i in self.pair.kept_ix]

    def backward(self, leaves: list, kept: list, grads: tuple) -> list:
        """Each leaf's gradient (None where none is wanted), `kept` the
        forward results the backward reads: the backward kernel over the
        chunks, each chunk's end adjoint the first-state adjoint of the
        chunk after. Those come from composed carries (`adjoint`), or
        settle: the backward again until they repeat bit for bit, else the
        sequential forward and backward."""
        pair, lay, n_in, n_st = self.pair, self.lay, self.n_in, self.n_st
        n_out = len(pair.out_ix)
        grads = [None if g is None else g.contiguous() for g in grads]
        g_out, g_state = grads[:n_out], grads[n_out:]
        args = leaves[:n_in] + [self.as_stored(s) for s in self.starts] + \
            leaves[n_in + n_st:]
        ix = [pair.backward.index(("grad_init_state", s)) for s in range(n_st)]

        def launch(shift):
            """The backward over the chunks, each chunk's end adjoint `shift`."""
            given = []
            for g, d in zip(g_state, shift):
                # the caller's gradient of the last chunk's end as it is: no
                # adjoint comes past it (an added zero would turn a -0.0)
                if pair.final:
                    g_end = d.clone()
                    if g is not None:
                        g_end[-1] = g[-1]
                    given.append(g_end)
                else:
                    g = torch.zeros((lay.L, *d.shape), dtype=d.dtype, device=d.device) \
                        if g is None else g.clone()
                    lay.last_steps(g)[:-1] += d[:-1]
                    given.append(g)
            return pair.backward(args + kept + g_out + given)
        if self.adjoint is not None:
            last = [torch.zeros_like(s[0]) if g is None or not pair.final else g[-1]
                    for s, g in zip(self.starts, g_state)]
            seq_grads = g_state if not pair.final else [None] * n_st
            ends = self.adjoint.ends(args + kept + g_out + seq_grads, lay.chunks, last)
            self.record.launches += 3
            return self._gradients(launch(ends), leaves, chunked=True)
        shift = [torch.zeros_like(s) for s in self.starts]  # no adjoint past a chunk
        for turn in range(self.rounds + 1):
            if turn == self.rounds:
                self.record.sequential += 1
                return self._sequential(leaves, g_out, g_state)
            out = launch(shift)
            later = [torch.cat([out[i][1:], torch.zeros_like(out[i][:1])]) for i in ix]
            settled = all(_same_bits(a, b) for a, b in zip(later, shift))
            shift = later
            if settled:
                break
        self.record.launches += turn + 1
        return self._gradients(out, leaves, chunked=True)

    def _gradients(self, out: list, leaves: list, chunked: bool) -> list:
        """Each leaf's gradient from a backward launch's results `out`, of
        the chunks (`chunked`) or of the sequential scan, in the chunks'
        layout (a per-neuron parameter's of the sequential scan in the
        first chunk's row: autograd sums the rows)."""
        n_in, n_st, lay = self.n_in, self.n_st, self.lay
        grads_out = []
        for k, gi in enumerate(self.pair.grad_ix):
            g = None if gi is None else out[gi]
            if g is None:
                pass
            elif k < n_in:
                g = g if chunked else lay.side_by_side(g)
            elif k < n_in + n_st:
                g = g[0] if chunked else g  # the call's initial state: the first chunk's
            elif chunked or leaves[k].numel() == 1:
                g = g.reshape(leaves[k].shape)
            else:
                whole = torch.zeros_like(leaves[k])
                whole[0] = g
                g = whole
            grads_out.append(g)
        return grads_out

    def _sequential(self, leaves: list, g_out: list, g_state: list) -> list:
        """The gradients as the sequential scan gives them: its forward
        again (for what its backward reads) and its backward."""
        pair, lay, n_in, n_st = self.pair, self.lay, self.n_in, self.n_st
        params = [p if p.numel() == 1 else p[0] for p in leaves[n_in + n_st:]]
        args = [lay.in_order(x) for x in leaves[:n_in]] + \
            [s[0] for s in self.starts] + params
        res = pair.forward(args)
        kept = self.kept(res)
        order = [None if g is None else lay.in_order(g).contiguous() for g in g_out]
        if pair.final:
            state = [None if g is None else g[-1] for g in g_state]
        else:
            state = [None if g is None else lay.in_order(g).contiguous() for g in g_state]
        return self._gradients(pair.backward(args + kept + order + state), leaves,
                               chunked=False)


class _ChunkedTraining(torch.autograd.Function):
    """One autograd node for run_chunks_training: forward returns the
    settled launch's outputs and state results (chunks side by side);
    backward runs _ChunkedRun.backward. What the backward reads is saved
    through the node, not held by the run: an output the run held would
    hold the node that holds the run, a cycle that kept every call's
    results alive until Python's garbage collector ran."""

    @staticmethod
    def forward(ctx, run, *leaves):
        pair = run.pair
        ctx.run, ctx.num_leaves = run, len(leaves)
        ctx.save_for_backward(*leaves, *run.kept(run.res))
        outs = tuple(run.res[i] for i in pair.out_ix + pair.state_ix)
        run.res = None
        return outs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        saved, n = list(ctx.saved_tensors), ctx.num_leaves
        return (None, *ctx.run.backward(saved[:n], saved[n:], grads))


_BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit for bit (-0.0 is not 0.0; a NaN equals the same NaN)."""
    bits = _BITS[a.element_size()]
    return torch.equal(a.view(bits), b.view(bits))


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
    num_states = len(init_states)
    T, step = inputs[0].shape[0], tuple(inputs[0].shape[1:])
    states = list(init_states)
    outs_t, seqs_t = [[] for _ in range(num_outputs)], [[] for _ in range(num_states)]
    for t in range(T):
        r = as_tuple(core(*[x[t] for x in inputs], *states, *statics), num_outputs + num_states)
        for k in range(num_outputs):
            outs_t[k].append(r[k])
        states = list(r[num_outputs:])
        for s in range(num_states):
            seqs_t[s].append(states[s])
    first = inputs[0]
    outs = [torch.stack(o) if o else first.new_empty(
        (0, *step), dtype=(out_dtypes[k] if out_dtypes else first.dtype))
        for k, o in enumerate(outs_t)]
    seqs = [torch.stack(q) if q else first.new_empty((0, *step)) for q in seqs_t] \
        if want_seqs else None
    return outs, seqs, states
