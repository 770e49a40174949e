// flexsn.chunk_width: a scan whose sequences hold chunks of steps side by
// side, rows of W neurons. A GPU kernel's neuron n reads and writes step t
// at (n / W) * T * W + t * W + n % W; per-neuron tensors stay indexed by n.
// A launch whose NCL is not a multiple of W reads rows of NCL (in bounds).
// RUN: flexsn-opt %s --convert-flexsn-to-gpu --split-input-file -verify-diagnostics | FileCheck %s
// RUN: flexsn-opt %s --flexsn-differentiate --split-input-file -verify-diagnostics | FileCheck %s --check-prefix=DIFF
// RUN: flexsn-opt %s --flexsn-affine-transfer --split-input-file -verify-diagnostics | FileCheck %s --check-prefix=TRANSFER
// RUN: not flexsn-opt %s --convert-flexsn-to-cpu-kernels --split-input-file 2>&1 | FileCheck %s --check-prefix=CPU

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
// CPU: error: 'flexsn.scan' op has 'flexsn.chunk_width': chunks side by side in a sequence's rows are read by GPU kernels only (CPU kernels read rows of NCL neurons)
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
