// A vector entry's lanes must stay contiguous in every chunk's row: the
// chunk width is a multiple of neurons-per-thread.
// RUN: not flexsn-opt %s -convert-flexsn-to-gpu="neurons-per-thread=4" 2>&1 | FileCheck %s
// RUN: flexsn-opt %s -convert-flexsn-to-gpu="neurons-per-thread=2" | FileCheck %s --check-prefix=OK
// CHECK: error: 'flexsn.scan' op 'flexsn.chunk_width' = 6 is not a multiple of neurons-per-thread (4)
// OK: gpu.func @li_inference(
func.func @li(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {flexsn.chunk_width = 6 : i64} -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c = arith.constant 0.5 : f32
    %d = arith.mulf %vt, %c : f32
    %n = arith.addf %d, %xt : f32
    flexsn.yield %n, %n : f32, f32
  }
  return %o, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
