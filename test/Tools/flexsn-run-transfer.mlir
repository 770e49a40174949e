// flexsn-run --transfer: the transfer function (flexsn-affine-transfer) of
// the primal scan or of a training scan, run and checked against the
// reference interpreter. LIF's reset makes its own scan not affine; its
// backward scans are.
// RUN: flexsn-run %s --backend=cpu --transfer=backward --variant=final_state --T=16 --ncl=67 --check | FileCheck %s --check-prefix=BWD
// BWD: kernel lif_backward_transfer_final_state: T=16 NCL=67 backend=cpu
// BWD: check: ok
// RUN: flexsn-run %s --backend=cpu --transfer=backward_final --save-ops=auto --variant=final_state --T=9 --ncl=33 --check | FileCheck %s --check-prefix=FINAL
// FINAL: kernel lif_backward_final_transfer_final_state: T=9 NCL=33 backend=cpu
// FINAL: check: ok
// RUN: not flexsn-run %s --backend=cpu --transfer=primal --variant=final_state 2>&1 | FileCheck %s --check-prefix=PRIMAL
// PRIMAL: error: --transfer=primal: lif has no transfer function: state #0 is not affine ('flexsn.spike' of a value that depends on the states)
// RUN: not flexsn-run %s --backend=cpu --transfer=sideways 2>&1 | FileCheck %s --check-prefix=WHICH
// WHICH: error: unknown --transfer 'sideways' (expected primal, forward, backward, forward_final or backward_final)
// RUN: not flexsn-run %s --backend=cpu --transfer=backward --variant=backward 2>&1 | FileCheck %s --check-prefix=VARIANT
// VARIANT: error: --transfer runs a transfer function's inference or final_state kernel, not --variant=backward
// RUN: not flexsn-run %s --backend=cpu --transfer=forward_final --variant=final_state 2>&1 | FileCheck %s --check-prefix=PAIR
// PAIR: error: --transfer=forward_final runs the final-state pair, which only --save-ops=auto builds
func.func @lif(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
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
