//===- Passes.td - flexsn conversion passes ----------------*- tablegen -*-===//

#ifndef FLEXSN_CONVERSION_PASSES_TD
#define FLEXSN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertFlexSNToCPUKernels : Pass<"convert-flexsn-to-cpu-kernels", "ModuleOp"> {
  let summary = "Lower each scan kernel function to CPU loops";
  let description = [{
    Replaces every `func.func` that holds a `flexsn.scan` (kernel form: the
    scan's operands are the function's arguments) by one CPU kernel per
    variant, `@<func>_inference` (state sequences) and `@<func>_final_state`,
    with the flat ABI

        (ptr inputs..., ptr init_states..., ptr params..., ptr outputs...,
         ptr state results..., i64 T, i64 NCL, i64 begin, i64 end)

    The kernel scans the neurons `begin .. end` (callers split NCL across
    threads) in blocks of 256: per block, the initial states go into a
    stack buffer, then the time loop runs outside and the block's neurons
    inside, so that each step reads and writes runs of consecutive elements
    (LLVM's loop vectorizer turns them into SIMD), and the final states (or
    their f64 sums over neurons) come out of the buffer at the end. An
    optional pointer that is null reads a stack block of zeros. The body is
    copied with `flexsn.spike` lowered to a compare and select and
    `flexsn.detach` to its operand; loads and stores are
    `llvm.load`/`llvm.store` on the storage type with `arith.extf`/`truncf`
    to the compute type. A body op other than arith/math/flexsn is an error
    that names it. `prefetch` > 1 instead emits the GPU lowering's
    software-pipelined time loop, one neuron at a time (the option exists
    so that that transformation is tested on the CPU against the
    interpreter).
  }];
  let options = [
    Option<"prefetch", "prefetch", "unsigned", "1",
           "steps of loads in flight (1-32)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def ConvertFlexSNToGPU : Pass<"convert-flexsn-to-gpu", "ModuleOp"> {
  let summary = "Lower each scan kernel function to GPU kernels";
  let description = [{
    Replaces every kernel-form `func.func` holding a `flexsn.scan` by
    `gpu.func` kernels `@<func>_inference` and `@<func>_final_state`, each
    entry in a `gpu.module` of its own name (the rest of the pipeline
    handles the entries in parallel), with the flat ABI

        (ptr inputs..., ptr init_states..., ptr params..., ptr outputs...,
         ptr state results..., i64 T, i64 NCL)

    Each kernel is two entries when W = `neurons-per-thread` > 1. The vector
    entry `@<kernel>`: thread g handles neurons [g * W, g * W + W) with W-wide
    vector loads and stores (128-bit for f32 and W = 4); a launch may take
    it only when NCL is a multiple of W and every [T, NCL] and [NCL] pointer
    is aligned to W elements. The scalar entry `@<kernel>_scalar`: thread g
    handles neuron g, for every other launch and for a small NCL (more warps
    in flight). A kernel whose reads a step are few bytes has a third, the
    deep entry `@<kernel>_deep` (getDeepEntryPrefetch): one neuron per
    thread with about 64 bytes of reads in flight per thread, for launches
    with few threads per SM and a long T; with an explicit `prefetch` there
    is none. The runtime chooses the entry per launch on the host, and
    the driver compiles an entry the first time a launch takes it. Thread
    g = blockIdx.x * blockDim.x + threadIdx.x; each thread loops over time
    with its states in registers. T, NCL and the block size are run-time
    values: one PTX serves every shape. The time loop is software-pipelined
    (`prefetch` = P): P slots hold the reads of P steps (inputs, lagged
    operands; none depends on the states) as loaded, in the storage type;
    the loop steps by P with its body unrolled P times, copy j computing
    step t + j from slot j and then refilling it with step t + j + P, so P
    steps of loads are in flight per thread and no register is copied
    between slots. The one-neuron-per-thread entries (scalar and deep) also
    ask L2 for the reads of the steps `l2-prefetch` ahead of their slots
    (`prefetch.global.L2`, no register held) when the launch has at most
    128 threads per SM (NCL <= 128 x %nsmid, tested once per thread).
  }];
  let options = [
    Option<"neuronsPerThread", "neurons-per-thread", "unsigned", "4",
           "neurons each thread handles (1, 2, 4 or 8)">,
    Option<"prefetch", "prefetch", "unsigned", "0",
           "steps of loads in flight per thread, 1-32 (0: as many as fit "
           "about 32 registers of carried reads, 1 when a step reads 32 "
           "registers or more, and at most 1024 / (lanes x body ops))">,
    Option<"l2Prefetch", "l2-prefetch", "unsigned", "32",
           "one-neuron-per-thread entries: steps ahead of the slots whose "
           "reads are asked of L2 at launches of at most 128 threads per SM "
           "(default 32; 0: none; at most 256)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::cf::ControlFlowDialect"];
}

def FlexSNBoundedReciprocal : Pass<"flexsn-bounded-reciprocal"> {
  let summary = "Reciprocals of proven-normal f32 divisors to the IEEE fast "
                "path, without its range test";
  let description = [{
    Rewrites `arith.divf 1.0, %d` on f32 whose divisor %d its defining ops
    prove to lie within [2^-64, 2^64] in magnitude (or to be NaN) into
    `nvvm.rcp.approx.ftz.f` refined by one Newton step, r = fma(r0,
    -fma(d, r0, -1), r0). For such a divisor that is the sequence ptxas
    emits for `rcp.rn.f32` (correctly rounded), less the test and branch to
    its slow path for zero, subnormal, huge and non-finite divisors: a
    branch in every step splits the unrolled time loop into blocks that
    ptxas cannot schedule across. A NaN divisor gives NaN either way.

    The proof is an interval evaluation of the divisor's operand tree
    (at most 16 ops deep): float constants, `math.absf`, `arith.negf`,
    `addf`, `subf`, `mulf`, `math.exp`, `maximumf`/`maxnumf`,
    `minimumf`/`minnumf` (the latter two also span the other operand's
    range, which they return where one operand is NaN, unless that one is
    a constant) and `arith.select`, whose branches are evaluated
    under the select's condition when it compares a value with a constant:
    `select(x >= 0, -x, x)` (-|x|, as the Python tracer writes sigmoid)
    is at most 0. Each value's bounds are those of exact arithmetic,
    widened for its type's rounding (past the largest finite value:
    infinite; below the smallest normal one: 0). Anything else is
    unbounded. So the sigmoid surrogate's
    derivative (1 / (1 + exp(-alpha |x|)), divisor in [1, 2]) and a traced
    `torch.sigmoid` take the fast path; `1 / x` keeps `rcp.rn.f32`. The GPU
    pipeline runs it on each kernel entry before the NVVM lowering.

    Example:

        %a = math.absf %x : f32
        %m = arith.mulf %a, %c_minus4 : f32     // [-inf, 0]
        %e = math.exp %m : f32                  // [0, 1]
        %d = arith.addf %e, %c1 : f32           // [1, 2]
        %r = arith.divf %c1, %d : f32           // -> rcp.approx + 2 fma
  }];
  let dependentDialects = ["::mlir::NVVM::NVVMDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

#endif // FLEXSN_CONVERSION_PASSES_TD
