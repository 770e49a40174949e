//===- FlexSNInterfaces.td - FlexSN op interfaces ----------*- tablegen -*-===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNINTERFACES_TD
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNINTERFACES_TD

include "mlir/IR/OpBase.td"

def FlexSN_AdjointOpInterface : OpInterface<"AdjointOpInterface"> {
  let cppNamespace = "::mlir::flexsn";
  let description = [{
    The reverse-mode derivative rule of a scalar op that may appear in a
    `flexsn.scan` body. `flexsn-differentiate` calls it on the op as
    recomputed in the backward body, with the gradient of each result, and
    inserts the ops the rule builds at the builder's insertion point.

    The `flexsn` ops implement it directly; upstream `arith` and `math` ops
    get it as external models (`registerAdjointExternalModels`). An op of a
    body without this interface is rejected by the pass with its name.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the gradients of the op's operands from `resultGrads` (one per
        result; a null value is a zero gradient). Fills `operandGrads` with
        one value per operand, null where the operand receives no gradient
        (integers, conditions, stop-gradients, zero derivatives).
      }],
      "::llvm::LogicalResult", "buildAdjoint",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNINTERFACES_TD
