//===- FlexSNOps.td - FlexSN operations --------------------*- tablegen -*-===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNOPS_TD
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNOPS_TD

include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.td"
include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.td"
include "flexsn/Dialect/FlexSN/IR/FlexSNInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/OpAsmInterface.td"

//===----------------------------------------------------------------------===//
// ScanOp
//===----------------------------------------------------------------------===//

def FlexSN_ScanOp : FlexSN_Op<"scan", [
    AttrSizedOperandSegments, IsolatedFromAbove, Pure,
    SingleBlock]> {
  let summary = "Runs a single-step neuron core over T time steps";
  let description = [{
    `flexsn.scan` applies its body, a single time step of a spiking neuron on
    scalars, to every neuron and every time step. Operands, in order:

    - `ins`: input sequences, each a `tensor<T x NCL x E>`;
    - `lagged` / `lagged_init`: pairs of a sequence `tensor<T x NCL x E>`
      and a `tensor<NCL x E>`, read one step late: at step t the body sees
      `lagged[t-1]`, and at t = 0 `lagged_init`. The backward scan of BPTT
      reads the forward's state sequence this way (the state before each
      step);
    - `states`: initial states, each a `tensor<NCL x E>`;
    - `params`: parameters, constant over time: a float scalar (shared by all
      neurons) or a `tensor<NCL x E>` (one value per neuron).

    The body's block takes one scalar per operand (one per lagged pair), in
    the order ins, lagged, states, params, all of
    the compute type `C` (`f32`; `f64` only when every operand is stored as
    `f64`), and ends in `flexsn.yield outputs..., new_states...`. It may
    contain only scalar, side-effect-free ops without regions (`arith`,
    `math`, `flexsn.spike`, `flexsn.detach`, ...).

    Results: one `tensor<T x NCL x E>` per output, then per state either the
    state sequence `tensor<T x NCL x E>` (state after each step) or, with
    `final_states`, the final state `tensor<NCL x E>`. Each result's storage
    type `E` may be `f16`, `bf16`, `f32` or `f64`; a state result keeps its
    initial state's type. With `reverse` the steps run t = T-1 down to 0 (the
    backward scan of BPTT). With T = 0 no step runs: output sequences are
    empty and final states equal initial states.

    `sum_states` (with `final_states`) lists states whose result is the sum
    of their final value over all neurons, a rank-0 tensor of the compute
    type: the gradient of a parameter shared by all neurons. Kernels reduce
    it in place (per thread, per block, then one atomic add per block).

    `flexsn.chunk_width = W : i64`: the sequences hold chunks of steps
    side by side (CPU kernels scan them one neuron at a time). A kernel launched at
    T steps and NCL neurons reads and writes neuron n's step t at element
    (n / W) * T * W + t * W + n % W, so that a `[C * T, W]` sequence in
    step order holds its NCL / W chunks of T steps where they are
    (`flexsn.chunked_time`). Per-neuron tensors stay indexed by n. W must
    be a multiple of the kernels' neurons per thread; a launch whose NCL is
    not a multiple of W reads rows of NCL, as without the attribute.

    `flexsn.state_storage = T` (a float type): outside chunk borders the
    caller stores the states as T, narrower than the state types (a
    half-precision call whose chunks start and end in f32). The training
    forward's choice of what to save (flexsn-differentiate, save-ops=auto)
    weighs a state sequence at T's width, so that it saves and reads what a
    scan with T states would; the kernels' types are unchanged.

    Example (LIF, hard reset, sigmoid surrogate):

    ```mlir
    %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>)
                         states(%v0 : tensor<?xf32>)
                         -> (tensor<?x?xf32>, tensor<?x?xf32>) {
    ^bb0(%xt: f32, %vt: f32):
      %c2 = arith.constant 2.0 : f32
      %c1 = arith.constant 1.0 : f32
      %d = arith.subf %xt, %vt : f32
      %q = arith.divf %d, %c2 : f32
      %h = arith.addf %vt, %q : f32
      %hm = arith.subf %h, %c1 : f32
      %st = flexsn.spike %hm surrogate <sigmoid, alpha = 4.0> : f32
      %ns = arith.subf %c1, %st : f32
      %vn = arith.mulf %h, %ns : f32
      flexsn.yield %st, %vn : f32, f32
    }
    ```
  }];

  let arguments = (ins Variadic<AnyRankedTensor>:$inputs,
                       Variadic<AnyRankedTensor>:$lagged,
                       Variadic<AnyRankedTensor>:$lagged_init,
                       Variadic<AnyRankedTensor>:$init_states,
                       Variadic<AnyType>:$params,
                       UnitAttr:$reverse,
                       UnitAttr:$final_states,
                       OptionalAttr<DenseI64ArrayAttr>:$sum_states);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);

  let assemblyFormat = [{
    (`reverse` $reverse^)? (`final_states` $final_states^)?
    (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    (`lagged` `(` $lagged^ `:` type($lagged) `)`)?
    (`lagged_init` `(` $lagged_init^ `:` type($lagged_init) `)`)?
    (`states` `(` $init_states^ `:` type($init_states) `)`)?
    (`params` `(` $params^ `:` type($params) `)`)?
    attr-dict-with-keyword `->` `(` type($results) `)` $body
  }];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let hasCanonicalizer = 1;

  let extraClassDeclaration = [{
    unsigned getNumInputs() { return getInputs().size(); }
    unsigned getNumLagged() { return getLagged().size(); }
    unsigned getNumStates() { return getInitStates().size(); }
    unsigned getNumParams() { return getParams().size(); }
    unsigned getNumOutputs() { return getResults().size() - getNumStates(); }

    /// Output-sequence results, then state results.
    ::mlir::ResultRange getOutputResults() {
      return getResults().take_front(getNumOutputs());
    }
    ::mlir::ResultRange getStateResults() {
      return getResults().drop_front(getNumOutputs());
    }

    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    ::mlir::Block::BlockArgListType getInputArgs() {
      return getBodyBlock().getArguments().take_front(getNumInputs());
    }
    ::mlir::Block::BlockArgListType getLaggedArgs() {
      return getBodyBlock().getArguments().slice(getNumInputs(),
                                                 getNumLagged());
    }
    ::mlir::Block::BlockArgListType getStateArgs() {
      return getBodyBlock().getArguments().slice(
          getNumInputs() + getNumLagged(), getNumStates());
    }
    ::mlir::Block::BlockArgListType getParamArgs() {
      return getBodyBlock().getArguments().take_back(getNumParams());
    }
    YieldOp getYield();

    /// The scalar type the body computes in (its block arguments' type).
    ::mlir::Type getComputeType();

    /// True when parameter `i` is one value per neuron (a tensor), false
    /// when it is a scalar shared by all neurons.
    bool isPerNeuronParam(unsigned i) {
      return ::llvm::isa<::mlir::RankedTensorType>(getParams()[i].getType());
    }

    /// True when state `i`'s result is its final value summed over neurons.
    bool isSumState(unsigned i) {
      auto sums = getSumStates();
      return sums && ::llvm::is_contained(*sums, static_cast<int64_t>(i));
    }

    /// The neurons of a chunk's row (flexsn.chunk_width), 0 without one.
    int64_t getChunkWidth();
  }];
}

//===----------------------------------------------------------------------===//
// YieldOp
//===----------------------------------------------------------------------===//

def FlexSN_YieldOp : FlexSN_Op<"yield", [
    Pure, ReturnLike, Terminator, HasParent<"ScanOp">]> {
  let summary = "Ends a scan body: outputs, then new states";
  let description = [{
    Terminates the body of `flexsn.scan`. Its operands are the step's outputs
    followed by the new value of every state, all of the compute type.

    ```mlir
    flexsn.yield %spike, %v_next : f32, f32
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let builders = [OpBuilder<(ins), [{ /* nothing to yield */ }]>];
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

//===----------------------------------------------------------------------===//
// SpikeOp
//===----------------------------------------------------------------------===//

def FlexSN_SpikeOp : FlexSN_Op<"spike", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<FlexSN_AdjointOpInterface>]> {
  let summary = "Heaviside step with a surrogate gradient";
  let description = [{
    Forward: `1.0` where `input >= 0`, else `0.0` (NaN gives `0.0`). Backward
    (`flexsn-differentiate`): the derivative of the surrogate function named
    by the `surrogate` attribute.

    ```mlir
    %s = flexsn.spike %h surrogate <atan, alpha = 2.0> : f32
    ```
  }];
  let arguments = (ins AnyFloat:$input, FlexSN_SurrogateAttr:$surrogate);
  let results = (outs AnyFloat:$result);
  let assemblyFormat =
      "$input `surrogate` $surrogate attr-dict `:` type($input)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// DetachOp
//===----------------------------------------------------------------------===//

def FlexSN_DetachOp : FlexSN_Op<"detach", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<FlexSN_AdjointOpInterface>]> {
  let summary = "Identity whose gradient is zero (stop-gradient)";
  let description = [{
    Returns its operand unchanged; the differentiation pass propagates no
    gradient through it. SpikingJelly's `detach_reset` is a `flexsn.detach`
    on the spike used by the reset.

    ```mlir
    %sd = flexsn.detach %s : f32
    ```
  }];
  let arguments = (ins AnyFloat:$input);
  let results = (outs AnyFloat:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNOPS_TD
