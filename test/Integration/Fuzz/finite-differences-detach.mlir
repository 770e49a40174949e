// Found by flexsn-fuzz --seed=2 --first=230 --count=1, minimized.
// flexsn-run compared a detached body with finite differences, which see
// the true derivative; a body with flexsn.detach now skips that check.
// RUN: flexsn-run %s --backend=cpu --variant=backward --T=5 --ncl=33 --seed=4868409964889278965 --tie-margin=1.000000e-09 --check | FileCheck %s
// CHECK: check: ok
func.func @core(%x0: tensor<?x?xf64>, %s0: tensor<?xf64>) -> (tensor<?x?xf64>, tensor<?x?xf64>) {
  %r:2 = flexsn.scan ins(%x0 : tensor<?x?xf64>) states(%s0 : tensor<?xf64>) -> (tensor<?x?xf64>, tensor<?x?xf64>) {
  ^bb0(%v0: f64, %v1: f64):
    %t0 = flexsn.detach %v0 : f64
    %t1 = arith.constant 4.000000000e+00 : f64
    %t2 = math.tanh %t0 : f64
    %t3 = arith.mulf %t2, %t1 : f64
    flexsn.yield %v1, %t3 : f64, f64
  }
  return %r#0, %r#1 : tensor<?x?xf64>, tensor<?x?xf64>
}
