// flexsn.chunk_width: a scan whose sequences hold chunks of steps side by
// side, rows of W neurons. A GPU kernel's neuron n reads and writes step t
// at (n / W) * T * W + t * W + n % W; per-neuron tensors stay indexed by n.
// A launch whose NCL is not a multiple of W reads rows of NCL (in bounds).
// RUN: flexsn-opt %s --convert-flexsn-to-gpu --split-input-file -verify-diagnostics | FileCheck %s
// RUN: flexsn-opt %s --flexsn-differentiate --split-input-file -verify-diagnostics | FileCheck %s --check-prefix=DIFF
// RUN: flexsn-opt %s --flexsn-affine-transfer --split-input-file -verify-diagnostics | FileCheck %s --check-prefix=TRANSFER
// The CPU kernels scan such a sequence one neuron at a time; flexsn-run
// checks the layout against the reference interpreter (at NCL = 96, not a
// multiple of 64: rows of NCL) and the training kernels against the
// reference adjoint, which the harness gives the chunks in rows.
// RUN: flexsn-run %s --backend=cpu --T=5 --ncl=128 --check | FileCheck %s --check-prefix=RAN
// RUN: flexsn-run %s --backend=cpu --variant=final_state --T=5 --ncl=128 --check | FileCheck %s --check-prefix=RAN
// RUN: flexsn-run %s --backend=cpu --T=5 --ncl=128 --prefetch=3 --check | FileCheck %s --check-prefix=RAN
// RUN: flexsn-run %s --backend=cpu --T=5 --ncl=96 --check | FileCheck %s --check-prefix=RAN
// Training kernels too (the reference adjoint reads the chunks in rows):
// RUN: flexsn-run %s --backend=cpu --variant=backward --T=5 --ncl=128 --check | FileCheck %s --check-prefix=TRAIN
// RUN: flexsn-run %s --backend=cpu --variant=backward_final --save-ops=auto --T=5 --ncl=128 --check | FileCheck %s --check-prefix=TRAIN
// TRAIN: grad_input #0 vs reference adjoint
// TRAIN: check: ok
// flexsn-run --chunk-width sets the attribute (the fuzzer's reproducer):
// RUN: flexsn-run %s --backend=cpu --chunk-width=32 --T=5 --ncl=128 --check | FileCheck %s --check-prefix=RAN
// RUN: not flexsn-run %s --backend=cpu --chunk-width=-1 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: --chunk-width must be >= 0 (0: rows of NCL)
// RUN: flexsn-opt %s --convert-flexsn-to-cpu-kernels | FileCheck %s --check-prefix=CPU

// CHECK-LABEL: gpu.func @li_inference(
// CHECK: %[[W:.*]] = arith.constant 64 : i64
// CHECK: %[[R:.*]] = arith.remui %[[NCL:.*]], %[[W]] : i64
// CHECK: %[[WHOLE:.*]] = arith.cmpi eq, %[[R]], %{{.*}} : i64
// CHECK: %[[STRIDE:.*]] = arith.select %[[WHOLE]], %[[W]], %[[NCL]] : i64
// CHECK: %[[CHUNK:.*]] = arith.divui %[[N:.*]], %[[W]] : i64
// CHECK: %[[TW:.*]] = arith.muli %[[T:.*]], %[[W]] : i64
// CHECK: %[[START:.*]] = arith.muli %[[CHUNK]], %[[TW]] : i64
// CHECK: %[[IN:.*]] = arith.remui %[[N]], %[[W]] : i64
// CHECK: %[[AT:.*]] = arith.addi %[[START]], %[[IN]] : i64
// CHECK: arith.select %[[WHOLE]], %[[AT]], %[[N]] : i64
// The row of step t is t * stride:
// CHECK: arith.muli %{{.*}}, %[[STRIDE]] : i64
// DIFF-LABEL: func.func @li_forward(
// DIFF: flexsn.scan ins(
// DIFF-SAME: flexsn.chunk_width = 64 : i64
// DIFF-LABEL: func.func @li_backward(
// DIFF: flexsn.scan reverse
// DIFF-SAME: flexsn.chunk_width = 64 : i64
// TRANSFER-LABEL: func.func @li_transfer(
// TRANSFER: flexsn.scan ins(
// TRANSFER-SAME: flexsn.chunk_width = 64 : i64
// RAN: check: ok (max relative error 0.000000e+00)
// CPU-LABEL: func.func @li_inference(
// CPU: arith.divui %{{.*}}, %c64_i64 : i64
// CPU: arith.remui %{{.*}}, %c64_i64 : i64
func.func @li(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {flexsn.chunk_width = 64 : i64} -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c = arith.constant 0.5 : f32
    %d = arith.mulf %vt, %c : f32
    %n = arith.addf %d, %xt : f32
    flexsn.yield %n, %n : f32, f32
  }
  return %o, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
