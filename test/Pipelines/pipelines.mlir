// The CPU pipeline ends in the LLVM dialect; the GPU pipeline in a
// gpu.binary holding PTX.
// RUN: flexsn-opt %flexsn_src_root/examples/plif.mlir -flexsn-cpu-pipeline | FileCheck %s --check-prefix=CPU --implicit-check-not=scf. --implicit-check-not=arith. --implicit-check-not=flexsn.scan --implicit-check-not=flexsn.spike
// RUN: flexsn-opt %flexsn_src_root/examples/plif.mlir -flexsn-gpu-pipeline="chip=sm_80" | FileCheck %s --check-prefix=GPU
// CPU: llvm.func @plif_inference
// CPU: llvm.intr.exp
// CPU: llvm.func @plif_final_state
// GPU: gpu.binary @flexsn_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80">
// GPU-SAME: .target sm_80
// GPU-SAME: .visible .entry plif_inference(
// GPU-SAME: .visible .entry plif_final_state(
// This file holds no test input itself.
