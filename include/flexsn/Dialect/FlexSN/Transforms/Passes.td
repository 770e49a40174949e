//===- Passes.td - flexsn dialect transforms ---------------*- tablegen -*-===//

#ifndef FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_TD
#define FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FlexSNDifferentiate : Pass<"flexsn-differentiate", "ModuleOp"> {
  let summary = "Build the BPTT training forward and reverse-time backward "
                "scans of every scan kernel function";
  let description = [{
    For every kernel function `@f` (a `func.func` whose only `flexsn.scan`
    takes the function's arguments), adds:

    - `@f_forward`: the training forward. It takes `@f`'s arguments and
      returns the outputs, the state sequences (also when `@f` returns final
      states: the backward reads them) and one sequence per saved
      intermediate, in that order.
    - `@f_backward`: a `reverse final_states` scan that recomputes the body
      at each step from `x_t` and the state before the step (read from the
      state sequence through `lagged`/`lagged_init`), then runs the body's
      adjoint. It returns the gradients of every input sequence, initial
      state and parameter that requires one. Parameter gradients are summed
      over time in registers; a scalar parameter's gradient is also summed
      over neurons (`sum_states`), inside the kernel. When no argument of
      `@f` requires a gradient (all carry `flexsn.no_grad`) there is nothing
      to compute and no `@f_backward` is added.

    Each argument and result of the generated functions carries
    `flexsn.role` (`input`, `state_seq`, `init_state`, `param`, `saved`,
    `grad_output`, `grad_state_seq`, `grad_final_state`, `output`,
    `grad_input`, `grad_init_state`, `grad_param`) and `flexsn.index` (which
    one of the primal's), which the kernel manifest reports.

    Requires-grad: a `flexsn.no_grad` unit attribute on an argument of `@f`
    drops its gradient (no result, no work); on a result of `@f`, that result
    takes no gradient input. Outputs that do not depend differentiably on
    anything (through `flexsn.detach`, comparisons, rounding) take no
    gradient input either; the backward's unused arguments are removed.

    Saving policy: by default nothing beyond the inference results is saved
    and the backward recomputes the body (rematerialization). An op of the
    body with the `flexsn.save` unit attribute, or whose name is listed in
    `save-ops`, has its result written by the training forward (one
    compute-type sequence each) and read by the backward instead of
    recomputed.

    `save-ops=auto` (alone or beside op names) chooses the saved values: a
    minimum cut of the step's dataflow between the leaves (an input costs
    its bytes, read by the backward; a state its sequence, written and
    read) and what the adjoint reads (a saved value costs a compute-type
    sequence written and read; recomputation is free). For a scan with
    states, `@f_forward_final` (final states, and only the state sequences
    the backward reads) and `@f_backward_final` (the final states'
    gradients, not sequences of zeros but the last step) are added beside
    `@f_forward` and `@f_backward`.

    Adjoint rules come from `AdjointOpInterface`; a body op without one is
    an error that names it. The primal must be a forward-time scan without
    lagged operands or `sum_states`.
  }];
  let options = [
    ListOption<"saveOps", "save-ops", "std::string",
               "Names of body ops (e.g. flexsn.spike,math.exp) whose results "
               "the training forward saves for the backward; auto: a minimum "
               "cut chooses them">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FlexSNAffineStates : Pass<"flexsn-affine-states", "ModuleOp"> {
  let summary = "Mark every scan whose state update is affine in its states";
  let description = [{
    Proves, per state of every `flexsn.scan`, whether its new value is
    affine in the states: `s'_i = sum_j A_ij(x_t) s_j + b_i(x_t)`, with `A`
    and `b` computed from the step's inputs, lagged values and parameters
    only. Such steps compose associatively (a step after a step is again
    `(A, b)`), which a parallel-in-time scan needs. The proof follows the
    body's dataflow: sums, differences, negations, products and quotients
    by state-free values, `arith.select` on a state-free condition,
    `math.fma`, `arith.extf`, `arith.truncf` and `flexsn.detach` keep a
    value affine (in exact arithmetic: every float op rounds); any other op
    of a state-dependent value (`flexsn.spike`, a comparison, `math.exp`,
    `math.absf`, a product of two state-dependent values) does not.

    Each scan gets `flexsn.affine_states`, one boolean per state, and
    `flexsn.state_reads`, per state the indices of the states its update
    reads (the nonzero pattern of `A`'s row; empty where it is not affine).
    A leaky integrator, synaptic currents and neurons without reset are
    affine; a reset through a spike of the state is not. The reverse-time
    backward scan that `flexsn-differentiate` builds is affine for any core
    (its adjoint is linear in the state gradients, and it reads the
    forward's states as lagged values).

    With `explain`, a remark at each update that is not affine names the op
    where it stops being so, and why.

    Example: `flexsn-opt --flexsn-affine-states` on a leaky integrator

    ```mlir
    %r = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>)
           -> (tensor<?x?xf32>) {
    ^bb0(%xt: f32, %vt: f32):
      %c = arith.constant 0.9 : f32
      %d = arith.mulf %vt, %c : f32
      %v = arith.addf %d, %xt : f32
      flexsn.yield %v : f32
    }
    ```

    gives the scan `{flexsn.affine_states = array<i1: true>,
    flexsn.state_reads = [array<i64: 0>]}`.
  }];
  let options = [
    Option<"explain", "explain", "bool", /*default=*/"false",
           "Remark at each state update that is not affine, naming the op">,
  ];
}

def FlexSNAffineTransfer : Pass<"flexsn-affine-transfer", "ModuleOp"> {
  let summary = "Build the transfer function of every scan whose states "
                "update affinely (the first pass of a chunked parallel scan)";
  let description = [{
    For a kernel function `@f` whose scan's states are all affine in the
    states (as `flexsn-affine-states` proves), adds `@f_transfer`: a scan
    over the same steps that returns, per neuron, where the states end from
    given initial states `s0` and the Jacobian of those ends with respect to
    `s0`. With `s0 = 0` and the Jacobian started at the identity, a chunk of
    steps composes to `s_end = A s_start + b` (`b` the ends, `A` the
    Jacobian): chunks run side by side, a short scan over chunks combines
    their `(A, b)` into each chunk's first state, and the original scan runs
    each chunk from it (the fix-up pass). Forward and reverse-time scans
    alike: the backward scan of any core is affine.

    The Jacobian comes from forward-mode differentiation of the body's
    state-dependent dataflow, which the proof restricts to sums,
    differences, negations, products and quotients by state-free values,
    `math.fma`, `arith.select` on a state-free condition, float conversions
    and `flexsn.detach` (identity here: the Jacobian is of values, not of
    gradients). `@f_transfer` takes, in order: the scan's inputs, lagged
    sequences and their initial values, its `k` initial states, the `k*k`
    Jacobian entries `d s_i / d s0_j` (row-major, in the compute type), its
    parameters; it returns the final states and the final Jacobian. Its
    scan has no outputs and carries no `sum_states` (every state per
    neuron).

    Scans with a state that is not affine get no transfer function; with
    `explain` a remark names the op that prevents it. With `replace`, the
    module keeps only the transfer functions (what a chunked call compiles),
    and a module with none is an error naming, per scan, the state and op
    that are not affine.
  }];
  let options = [
    Option<"explain", "explain", "bool", /*default=*/"false",
           "Remark at each scan that gets no transfer function, and why">,
    Option<"replace", "replace", "bool", /*default=*/"false",
           "Keep only the transfer functions (an error where there is none)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_TD
