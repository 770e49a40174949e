// RUN: not flexsn-opt %s -convert-flexsn-to-gpu="neurons-per-thread=3" 2>&1 | FileCheck %s --check-prefix=WIDTH
// RUN: not flexsn-opt %s -convert-flexsn-to-gpu="prefetch=33" 2>&1 | FileCheck %s --check-prefix=PREFETCH
// WIDTH: error: neurons-per-thread must be 1, 2, 4 or 8, got 3
// PREFETCH: error: prefetch must be 0 (automatic) to 32, got 33
func.func @id(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    flexsn.yield %xt : f32
  }
  return %y : tensor<?x?xf32>
}
