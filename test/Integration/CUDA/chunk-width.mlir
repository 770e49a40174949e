// Chunks read in place (flexsn.chunk_width) on the GPU, against the
// reference interpreter: the vector entry (NCL a multiple of the lanes),
// the deep entry (few neurons, many steps), bf16 storage, a final-state
// kernel, and NCL not a multiple of W (rows of NCL).
// REQUIRES: cuda
// RUN: flexsn-run %s --backend=cuda --T=37 --ncl=4096 --check | FileCheck %s
// RUN: flexsn-run %s --backend=cuda --T=300 --ncl=512 --check | FileCheck %s
// RUN: flexsn-run %s --backend=cuda --dtype=bf16 --T=64 --ncl=1024 --check | FileCheck %s
// RUN: flexsn-run %s --backend=cuda --variant=final_state --T=64 --ncl=1024 --check | FileCheck %s
// RUN: flexsn-run %s --backend=cuda --T=64 --ncl=1000 --check | FileCheck %s
// CHECK: check: ok
func.func @lif(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {flexsn.chunk_width = 64 : i64} -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c2 = arith.constant 2.0 : f32
    %c1 = arith.constant 1.0 : f32
    %d = arith.subf %xt, %vt : f32
    %q = arith.divf %d, %c2 : f32
    %h = arith.addf %vt, %q : f32
    %hm = arith.subf %h, %c1 : f32
    %st = flexsn.spike %hm surrogate <sigmoid, alpha = 4.0> : f32
    %ns = arith.subf %c1, %st : f32
    %vn = arith.mulf %h, %ns : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
