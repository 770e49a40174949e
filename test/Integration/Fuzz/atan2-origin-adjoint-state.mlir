// Found by flexsn-fuzz --seed=2 --first=50 --count=1, minimized.
// As atan2-origin-adjoint.mlir, with the NaN carried by a state.
// RUN: flexsn-run %s --backend=cpu --variant=backward --T=3 --ncl=67 --seed=16602747846973450965 --tie-margin=1.000000e-03 --check | FileCheck %s
// CHECK: check: ok
func.func @core(%x0: tensor<?x?xf32>, %s0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %r:2 = flexsn.scan ins(%x0 : tensor<?x?xf32>) states(%s0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%v0: f32, %v1: f32):
    %t0 = math.roundeven %v1 : f32
    %t1 = math.atan2 %t0, %v1 : f32
    %t2 = arith.constant 4.000000000e+00 : f32
    %t3 = math.tanh %t1 : f32
    %t4 = arith.mulf %t3, %t2 : f32
    flexsn.yield %v0, %t4 : f32, f32
  }
  return %r#0, %r#1 : tensor<?x?xf32>, tensor<?x?xf32>
}
