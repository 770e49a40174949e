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
it to rounding, not bit for bit."""
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
        carry = _program.get_program(_carry_ir(k, _NAMES[self.compute]), target, chip)
        self.carry = _program.KernelBinding(
            carry.entry("carry_inference", index),
            _compiled._leaf_positions(k * k + k, k, 0))
        self.seqs = [self.carry.index(("state_seq", s)) for s in range(k)]

    def starts(self, inputs: list, first: list, params: list, chunks: int) -> tuple:
        """(each chunk's first states, [chunks, *S] per state; each chunk's
        A, row-major, [chunks, *S] per entry): `inputs` and `params` laid
        out as chunks side by side, `first` the call's initial states."""
        k, like = self.k, first[0]
        shape = (chunks, *like.shape)
        zeros = [torch.zeros(shape, dtype=s.dtype, device=s.device) for s in first]
        eye = [torch.full(shape, float(i == j), dtype=self.compute, device=like.device)
               for i in range(k) for j in range(k)]
        res = self.transfer(inputs + zeros + eye + params)
        ends = [res[i] for i in self.ends]
        b = [e.to(self.compute) for e in ends[:k]]
        a = ends[k:]
        seqs = self.carry(a + b + [s.to(self.compute) for s in first])
        return [torch.cat([s.unsqueeze(0), seqs[i][:-1].to(s.dtype)])
                for s, i in zip(first, self.seqs)], a

    def adjoint_ends(self, a: list, firsts: list) -> list:
        """Each chunk's end adjoint of the states, [chunks, *S] per state
        (zeros past the last chunk), from `firsts`, each chunk's first-state
        adjoint with zeros at its end (the caller's gradient at the last
        chunk's): a chunk's first-state adjoint is A^T times its end
        adjoint plus that, and its end adjoint the first-state adjoint of
        the chunk after. The carry kernel walks the chunks backwards."""
        k = self.k
        flip = [f[:-1].flip(0).to(self.compute) for f in firsts]
        at = [a[j * k + i][:-1].flip(0) for i in range(k) for j in range(k)]  # A^T
        seqs = self.carry(at + flip + [f[-1].to(self.compute) for f in firsts])
        # seqs[t]: the first-state adjoint of chunk C-2-t; chunk c's end is chunk c+1's first
        return [torch.cat([seqs[i].flip(0).to(f.dtype), f[-1:], torch.zeros_like(f[:1])])[1:]
                for f, i in zip(firsts, self.seqs)]


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
