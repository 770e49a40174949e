// Found by flexsn-fuzz --seed=3 --first=1524 --count=1, minimized.
// The reference adjoint multiplied floor's zero partial by an incoming NaN
// (atan2 at the origin); floor passes no gradient on, as in PyTorch and the
// kernels.
// RUN: flexsn-run %s --backend=cpu --variant=backward --T=8 --ncl=3 --seed=3405117401578683066 --tie-margin=2.000000e-02 --check | FileCheck %s
// CHECK: check: ok
func.func @core(%x0: tensor<?x?xbf16>, %s0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %r:2 = flexsn.scan ins(%x0 : tensor<?x?xbf16>) states(%s0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%v0: f32, %v1: f32):
    %t0 = arith.constant 5.000000000e-01 : f32
    %t1 = math.absf %v0 : f32
    %t2 = arith.addf %t1, %t0 : f32
    %t3 = math.log2 %t2 : f32
    %t4 = math.floor %t3 : f32
    %t5 = arith.cmpf true, %t3, %t4 : f32
    %t6 = arith.select %t5, %t4, %t4 : f32
    %t7 = math.atan2 %t6, %t4 : f32
    %t8 = arith.constant 4.000000000e+00 : f32
    %t9 = math.tanh %t7 : f32
    %t10 = arith.mulf %t9, %t8 : f32
    flexsn.yield %v0, %t10 : f32, f32
  }
  return %r#0, %r#1 : tensor<?x?xf32>, tensor<?x?xf32>
}
