// RUN: not flexsn-opt %s -convert-flexsn-to-gpu="neurons-per-thread=3" 2>&1 | FileCheck %s --check-prefix=WIDTH
// RUN: not flexsn-opt %s -convert-flexsn-to-gpu="block-size=100" 2>&1 | FileCheck %s --check-prefix=BLOCK
// WIDTH: error: neurons-per-thread must be 1, 2, 4 or 8, got 3
// BLOCK: error: block-size must be a multiple of 32 in [32, 1024], got 100
func.func @id(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    flexsn.yield %xt : f32
  }
  return %y : tensor<?x?xf32>
}
