// Found by flexsn-fuzz --seed=2 --first=813 --count=1, minimized.
// As fptosi-negative-zero.mlir, through a state.
// RUN: flexsn-run %s --backend=cpu --variant=inference --T=2 --ncl=16 --seed=14950080173050600168 --tie-margin=2.000000e-02 --check | FileCheck %s
// CHECK: check: ok
func.func @core(%x0: tensor<?x?xf16>, %s0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %r:2 = flexsn.scan ins(%x0 : tensor<?x?xf16>) states(%s0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%v0: f32, %v1: f32):
    %t0 = math.ceil %v0 : f32
    %t1 = arith.constant -1.000000000e+06 : f32
    %t2 = arith.constant 1.000000000e+06 : f32
    %t3 = arith.minimumf %v0, %t2 : f32
    %t4 = arith.maximumf %t3, %t1 : f32
    %t5 = arith.fptosi %t4 : f32 to i32
    %t6 = arith.sitofp %t5 : i32 to f32
    %t7 = math.atan2 %v1, %t6 : f32
    %t8 = arith.constant 4.000000000e+00 : f32
    %t9 = math.tanh %t0 : f32
    %t10 = arith.mulf %t9, %t8 : f32
    flexsn.yield %t7, %t10 : f32, f32
  }
  return %r#0, %r#1 : tensor<?x?xf32>, tensor<?x?xf32>
}
