// The CPU pipeline ends in the LLVM dialect; the GPU pipeline in one
// gpu.binary holding PTX per kernel entry (the vector and the scalar entry
// of each kernel).
// RUN: flexsn-opt %flexsn_src_root/examples/plif.mlir -flexsn-cpu-pipeline | FileCheck %s --check-prefix=CPU --implicit-check-not=scf. --implicit-check-not=arith. --implicit-check-not=flexsn.scan --implicit-check-not=flexsn.spike
// RUN: flexsn-opt %flexsn_src_root/examples/plif.mlir -flexsn-gpu-pipeline="chip=sm_80" | FileCheck %s --check-prefix=GPU
// CPU: llvm.func @plif_inference
// CPU: llvm.intr.exp
// CPU: llvm.func @plif_final_state
// GPU: gpu.binary @plif_inference [#gpu.object<#nvvm.target<chip = "sm_80">
// GPU-SAME: .target sm_80
// GPU-SAME: .visible .entry plif_inference(
// GPU: gpu.binary @plif_inference_scalar
// GPU-SAME: .visible .entry plif_inference_scalar(
// GPU: gpu.binary @plif_final_state
// GPU-SAME: .visible .entry plif_final_state(
// GPU: gpu.binary @plif_final_state_scalar

// Both pipelines take the options flexsn-translate and the C API take
// (PipelineOptions): `differentiate` runs flexsn-differentiate first.
// RUN: flexsn-opt %flexsn_src_root/examples/plif.mlir -flexsn-cpu-pipeline="differentiate save-ops=flexsn.spike" | FileCheck %s --check-prefix=CPUD
// RUN: flexsn-opt %flexsn_src_root/examples/plif.mlir -flexsn-gpu-pipeline="chip=sm_80 differentiate neurons-per-thread=2" | FileCheck %s --check-prefix=GPUD
// CPUD: llvm.func @plif_inference
// CPUD: llvm.func @plif_forward
// CPUD: llvm.func @plif_backward
// GPUD: .visible .entry plif_forward(
// GPUD: .visible .entry plif_backward(

// An unknown option is refused by name.
// RUN: not flexsn-opt %flexsn_src_root/examples/plif.mlir -flexsn-gpu-pipeline="frobnicate=1" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: frobnicate

// This file holds no test input itself.
