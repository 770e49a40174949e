//===- KernelABIEnums.td - Enums of the kernel contract ---*- tablegen -*-===//
//
// The kernel variants and argument roles of KernelABI.h, with generated
// stringify/symbolize (the names the manifest and the tools print).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_UTILS_KERNELABIENUMS_TD
#define FLEXSN_DIALECT_FLEXSN_UTILS_KERNELABIENUMS_TD

include "mlir/IR/EnumAttr.td"

// Kernel variants generated from one scan.
def FlexSN_KernelVariant : I32EnumAttr<"KernelVariant", "kernel variant", [
      // Outputs and state sequences (what flexsn.scan returns without
      // final_states).
      I32EnumAttrCase<"Inference", 0, "inference">,
      // Outputs and final states only.
      I32EnumAttrCase<"FinalState", 1, "final_state">
    ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
}

// The role of one kernel argument.
def FlexSN_KernelArgRole : I32EnumAttr<"KernelArgRole", "kernel argument role", [
      I32EnumAttrCase<"Input", 0, "input">,             // [T, NCL] pointer
      I32EnumAttrCase<"Lagged", 1, "lagged">,           // [T, NCL], read one step late
      I32EnumAttrCase<"LaggedInit", 2, "lagged_init">,  // [NCL], a lagged read at t = 0
      I32EnumAttrCase<"InitState", 3, "init_state">,    // [NCL]
      I32EnumAttrCase<"Param", 4, "param">,             // [NCL] (per-neuron param)
      I32EnumAttrCase<"ParamScalar", 5, "param_scalar">,// one element (shared param)
      I32EnumAttrCase<"Output", 6, "output">,           // [T, NCL]
      I32EnumAttrCase<"StateSeq", 7, "state_seq">,      // [T, NCL]
      I32EnumAttrCase<"FinalState", 8, "final_state">,  // [NCL]
      // One f64 element the kernel atomically adds its final states to (the
      // caller zeroes it first); f64 so that the error does not grow with NCL.
      I32EnumAttrCase<"SumState", 9, "sum_state">,
      I32EnumAttrCase<"T", 10, "T">,                    // i64
      I32EnumAttrCase<"NCL", 11, "NCL">,                // i64
      I32EnumAttrCase<"Begin", 12, "begin">,            // i64, CPU: first neuron
      I32EnumAttrCase<"End", 13, "end">                 // i64, CPU: one past the last
    ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
}

#endif // FLEXSN_DIALECT_FLEXSN_UTILS_KERNELABIENUMS_TD
