//===- InitAll.cpp - Registration of dialects and passes ------------------===//

#include "flexsn/InitAllDialects.h"
#include "flexsn/InitAllPasses.h"

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNInterfaces.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/Pipelines/Pipelines.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

void mlir::flexsn::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::flexsn::FlexSNDialect, mlir::arith::ArithDialect,
                  mlir::cf::ControlFlowDialect, mlir::func::FuncDialect,
                  mlir::gpu::GPUDialect, mlir::LLVM::LLVMDialect,
                  mlir::math::MathDialect, mlir::memref::MemRefDialect,
                  mlir::NVVM::NVVMDialect,
                  mlir::scf::SCFDialect, mlir::tensor::TensorDialect,
                  mlir::ub::UBDialect, mlir::vector::VectorDialect>();
  // Reverse-mode rules of the arith and math ops (flexsn-differentiate).
  mlir::flexsn::registerAdjointExternalModels(registry);
  // Patterns convert-gpu-to-nvvm (and convert-to-llvm) pick up per dialect.
  mlir::arith::registerConvertArithToLLVMInterface(registry);
  mlir::cf::registerConvertControlFlowToLLVMInterface(registry);
  mlir::registerConvertFuncToLLVMInterface(registry);
  mlir::registerConvertMathToLLVMInterface(registry);
  mlir::registerConvertMemRefToLLVMInterface(registry);
  mlir::registerConvertNVVMToLLVMInterface(registry);
  mlir::ub::registerConvertUBToLLVMInterface(registry);
  // MLIR -> LLVM IR (CPU JIT, PTX) and the NVVM serializer.
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
}

void mlir::flexsn::registerAllPasses() {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::flexsn::registerFlexSNConversionPasses();
  mlir::flexsn::registerFlexSNTransformsPasses();
  mlir::flexsn::registerPipelines();
  // Upstream passes our pipelines use, for stepping through them by hand.
  mlir::registerSCFToControlFlowPass();
  mlir::arith::registerArithExpandOpsPass();
  mlir::registerConvertMathToLibmPass();
  mlir::registerConvertMathToLLVMPass();
  mlir::registerArithToLLVMConversionPass();
  mlir::registerConvertControlFlowToLLVMPass();
  mlir::registerConvertFuncToLLVMPass();
  mlir::registerReconcileUnrealizedCastsPass();
  mlir::registerGpuNVVMAttachTarget();
  mlir::registerConvertGpuOpsToNVVMOps();
  mlir::registerGpuModuleToBinaryPass();
}
