//===- FlexSNDialect.td - FlexSN dialect definition --------*- tablegen -*-===//
//
// The `flexsn` dialect: multi-step spiking-neuron scans.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_TD
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_TD

include "mlir/IR/OpBase.td"

def FlexSN_Dialect : Dialect {
  let name = "flexsn";
  let cppNamespace = "::mlir::flexsn";
  let summary = "Multi-step spiking neuron scans with surrogate gradients";
  let description = [{
    The `flexsn` dialect describes a spiking neuron once, as a single-step
    function on scalars (`inputs..., states..., params...` to
    `outputs..., new states...`), and runs it over time with the `flexsn.scan`
    region op. Sequences are stored as `[T, NCL]` tensors (T time steps, NCL
    neurons flattened), states as `[NCL]`. The body computes in `f32` (or `f64`
    for gradient checks) whatever the storage type (`f16`, `bf16`, `f32`,
    `f64`).

    `flexsn.spike` is the Heaviside step in the forward direction and carries a
    surrogate-gradient attribute (`#flexsn.surrogate<...>`) that the
    differentiation pass uses for the backward direction. `flexsn.detach`
    stops gradients (SpikingJelly's `detach_reset`).
  }];
  let useDefaultAttributePrinterParser = 1;
  // The discardable attributes (FlexSNDialect.h) are verified where they
  // appear: on ops, on function arguments and on function results.
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasConstantMaterializer = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let extraClassDeclaration = [{
    /// Adds the dialect's attributes (defined in FlexSNAttrs.cpp).
    void registerAttributes();
  }];
}

class FlexSN_Op<string mnemonic, list<Trait> traits = []>
    : Op<FlexSN_Dialect, mnemonic, traits>;

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_TD
