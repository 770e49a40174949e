"""Chunked parallel scans of cores whose states update affinely.

A chunk of L steps of such a core maps its first states s to its last as
A s + b. The compiler's transfer kernel (flexsn-affine-transfer) gives
every chunk's (A, b) in one launch, the chunks side by side as extra
neurons: b the states reached from zeros, A the Jacobian carried from the
identity. A carry kernel then walks the chunks in order, s_c = A_c s_(c-1)
+ b_c, one step per chunk, and the core's own kernel runs every chunk from
its first state (the fix-up pass). Three launches, no host sync: a CUDA
graph can hold them. The carries compose in another order than the
sequential scan's steps, so they, and what follows from them, agree with
it to rounding, not bit for bit.

The backward of any core is affine in the adjoints, given what its
forward saved: a chunk of the reverse-time backward scan maps the adjoint
past its last step c to the adjoint of its first state as M c + b, reset
or not. The compiler's backward transfer kernel gives every chunk's (M, b)
in one launch; the carry kernel walks the chunks from the last, each
chunk's end adjoint the first-state adjoint of the chunk after; the
backward kernel then runs every chunk from its end adjoint
(AdjointChunks)."""
from __future__ import annotations

import torch

from . import _compiled, _program
from ._errors import FlexSNError

_NAMES = {torch.float32: "f32", torch.float64: "f64"}


def _carry_ir(k: int, ct: str) -> str:
    """A scan over chunks: inputs the k*k entries of A (row-major), then the
    k of b; states the k carries; each step s_i <- b_i + sum_j A_ij s_j."""
    seq, vec = f"tensor<?x?x{ct}>", f"tensor<?x{ct}>"
    a = [f"%a{i}_{j}" for i in range(k) for j in range(k)]
    b = [f"%b{i}" for i in range(k)]
    s = [f"%s{i}" for i in range(k)]
    args = ", ".join([f"{v}: {seq}" for v in a + b] + [f"{v}: {vec}" for v in s])
    body = []
    for i in range(k):
        acc = f"%b{i}t"
        for j in range(k):
            body.append(f"    %p{i}_{j} = arith.mulf %a{i}_{j}t, %s{j}t : {ct}")
            body.append(f"    %q{i}_{j} = arith.addf {acc}, %p{i}_{j} : {ct}")
            acc = f"%q{i}_{j}"
    news = [f"%q{i}_{k - 1}" for i in range(k)]
    block = ", ".join(f"{v}t: {ct}" for v in a + b + s)
    results = ", ".join([seq] * k)
    return "\n".join([
        f"func.func @carry({args}) -> ({results}) {{",
        f"  %r:{k} = flexsn.scan ins({', '.join(a + b)} : {', '.join([seq] * (k * k + k))}) "
        f"states({', '.join(s)} : {', '.join([vec] * k)}) -> ({results}) {{",
        f"  ^bb0({block}):",
        *body,
        f"    flexsn.yield {', '.join(news)} : {', '.join([ct] * k)}",
        "  }",
        f"  return {', '.join(f'%r#{i}' for i in range(k))} : {results}",
        "}", ""])


class _Carry:
    """The carry kernel of k states in `compute` (float32 or float64): a
    scan over chunks, s <- A s + b, A row-major."""

    def __init__(self, k: int, compute, device):
        target, chip, index = _compiled._where(device)
        carry = _program.get_program(_carry_ir(k, _NAMES[compute]), target, chip)
        self.binding = _program.KernelBinding(carry.entry("carry_inference", index),
                                              _compiled._leaf_positions(k * k + k, k, 0))
        self.seqs = [self.binding.index(("state_seq", s)) for s in range(k)]

    def __call__(self, a: list, b: list, s0: list) -> list:
        """The carries after each chunk, [chunks, *S] per state."""
        res = self.binding(a + b + s0)
        return [res[i] for i in self.seqs]


class AffineChunks:
    """The transfer and carry kernels of one inference configuration."""

    def __init__(self, compiled, dtype, device, p_dtypes, p_scalar, state_dtype, chunk_width):
        n_in, k, n_p = compiled.num_inputs, compiled.num_states, len(p_dtypes)
        target, chip, index = _compiled._where(device)
        ir = compiled.ir([dtype] * n_in + [state_dtype] * k, p_dtypes, p_scalar,
                         [False] * (n_in + k + n_p), chunk_width)
        program = _program.get_program(ir, target, chip, transfer=True)
        self.k, self.n_in = k, n_in
        self.compute = torch.float64 if dtype == torch.float64 else torch.float32
        self.transfer = _program.KernelBinding(
            program.entry("core_transfer_final_state", index),
            _compiled._leaf_positions(n_in, k + k * k, n_p))
        self.ends = [self.transfer.index(("final_state", s)) for s in range(k + k * k)]
        self.carry = _Carry(k, self.compute, device)

    def starts(self, inputs: list, first: list, params: list, chunks: int) -> list:
        """Each chunk's first states, [chunks, *S] per state: `inputs` and
        `params` laid out as chunks side by side, `first` the call's
        initial states."""
        k, like = self.k, first[0]
        shape = (chunks, *like.shape)
        # from zeros and the identity (an initial state not given reads as zeros)
        eye = [torch.ones(shape, dtype=self.compute, device=like.device) if i == j else None
               for i in range(k) for j in range(k)]
        res = self.transfer(inputs + [None] * k + eye + params)
        ends = [res[i] for i in self.ends]
        b = [e.to(self.compute) for e in ends[:k]]
        a = ends[k:]
        seqs = self.carry(a, b, [s.to(self.compute) for s in first])
        return [torch.cat([s.unsqueeze(0), q[:-1].to(s.dtype)])
                for s, q in zip(first, seqs)]


class NoAdjointChunks(Exception):
    """A training pair whose backward transfer kernel cannot serve the
    chunks, and why."""


class AdjointChunks:
    """The backward transfer and carry kernels of one training pair (see
    the module's docstring). The transfer function's reads are the
    backward's, by their place in the scan's operand groups (inputs, lagged
    sequences and their first rows, parameters); its states are the
    backward scan's (the adjoint carried for each forward state, then any
    parameter-gradient sums), then their Jacobian, row-major."""

    def __init__(self, program, pair, k: int, index: int):
        backward = pair._backward_entry.info
        name = backward["name"] + "_transfer_final_state"
        if name not in program.kernels:
            raise NoAdjointChunks(f"the compiler built no transfer function for "
                                  f"{backward['name']}")
        entry = program.entry(name, index)
        info = entry.info
        ptrs = [a for a in backward["args"] if a["kind"] == "ptr"]
        meaning = {(a["role"], a["index"]): (a["meaning"], a["meaning_index"]) for a in ptrs}
        # the backward scan state that carries each forward state's adjoint
        carried = {a["meaning_index"]: a["index"] for a in ptrs
                   if a["role"] == "final_state" and a["meaning"] == "grad_init_state"}
        if sorted(carried) != list(range(k)):
            raise NoAdjointChunks("the backward does not give every state's adjoint")
        n_states = info["num_states"]
        kb = next((j for j in range(1, n_states + 1) if j + j * j == n_states), 0)
        n = len(pair.positions)
        positions, self.fill = {}, []
        for a in info["args"]:
            if a["kind"] != "ptr" or a["role"] in ("output", "state_seq", "final_state"):
                continue
            key = (a["meaning"], a["meaning_index"])
            if a["role"] == "init_state":
                positions[key] = n + a["index"]
                continue
            mine = meaning.get((a["role"], a["index"]))
            if mine is None or mine not in pair.positions:
                raise NoAdjointChunks(f"the backward transfer reads {a['role']} #{a['index']}, "
                                      "which the backward does not")
            positions[key] = pair.positions[mine]
            if not a.get("optional", False):
                self.fill.append((pair.positions[mine], _program.DTYPES[a["dtype"]]))
        self.transfer = _program.KernelBinding(entry, positions)
        self.kb = kb
        self.carries = [carried[s] for s in range(k)]
        self.compute = _program.DTYPES[info["compute_type"]]
        self.b = [self.transfer.index(("final_state", carried[s])) for s in range(k)]
        self.m = [self.transfer.index(("final_state", kb + carried[i] * kb + carried[j]))
                  for i in range(k) for j in range(k)]
        self.carry = _Carry(k, self.compute,
                            _program._device_of(pair.forward.cuda, pair.forward.device))

    def ends(self, args: list, chunks: int, last: list) -> list:
        """Each chunk's end adjoint of the states, [chunks, *S] per state:
        `args` a backward call's tensors (the chunks side by side; a
        gradient the caller has not given None), `last` the last chunk's
        (the caller's gradient of the final states, or zeros)."""
        args = list(args)
        seq = args[0]
        for pos, dtype in self.fill:  # a gradient not given: zeros, read as such
            if args[pos] is None:
                args[pos] = torch.zeros(seq.shape, dtype=dtype, device=seq.device)
        shape, kb = (chunks, *seq.shape[2:]), self.kb
        extra = [None] * (kb + kb * kb)
        for s in self.carries:
            extra[kb + s * kb + s] = torch.ones(shape, dtype=self.compute, device=seq.device)
        res = self.transfer(args + extra)
        # the chunks from the last: chunk c's first-state adjoint M_c e_c + b_c
        # is chunk c-1's end adjoint e_(c-1)
        m = [res[i][1:].flip(0) for i in self.m]
        b = [res[i][1:].flip(0) for i in self.b]
        seqs = self.carry(m, b, [e.to(self.compute) for e in last])
        return [torch.cat([q.flip(0).to(e.dtype), e.unsqueeze(0)]) for q, e in zip(seqs, last)]


class _NotAffine:
    """A configuration without a transfer function, and why (the
    compiler's reason, or the dtype the carry lacks)."""

    def __init__(self, reason: str):
        self.reason = reason


def affine_chunks(compiled, dtype, device, p_dtypes, p_scalar, state_dtype,
                  chunk_width: int = 0) -> tuple:
    """(the configuration's AffineChunks, states stored as `state_dtype`,
    `chunk_width` as InferenceConfig's; or None and why not: the core's
    states do not all update affinely, as the compiler says, or it computes
    in a type the carry lacks)."""
    key = ("affine", dtype, device, tuple(p_dtypes), tuple(p_scalar), state_dtype,
           chunk_width)
    got = compiled.prepared.get(key)
    if got is None:
        got = _NotAffine(f"the carry computes in float32 or float64, not {dtype}")
        if dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
            try:
                got = AffineChunks(compiled, dtype, device, p_dtypes, p_scalar, state_dtype,
                                   chunk_width)
            except FlexSNError as e:
                text = str(e)
                _, found, why = text.partition("no chunked parallel scan can be built:")
                if not found:
                    raise
                got = _NotAffine(why.strip().replace("@core: ", "the core's "))
        compiled.prepared[key] = got
    return (None, got.reason) if isinstance(got, _NotAffine) else (got, "")
