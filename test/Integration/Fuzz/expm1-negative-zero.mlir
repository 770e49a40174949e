// Found by flexsn-fuzz --seed=1 --first=7320 --count=1, minimized.
// trunc(-0.5) = -0.0, expm1(-0.0) must stay -0.0 (atan2(-0, -0) = -pi): the
// CPU lowering wrote expm1 as exp(x) - 1 (+0.0, and 2% off at |x| ~ 1e-6);
// CPU kernels now call libm's expm1/log1p.
// RUN: flexsn-run %s --backend=cpu --variant=inference --T=3 --ncl=33 --seed=962648702507584763 --tie-margin=2.000000e-02 --tolerance=5.000000e-02 --finite-differences=false --check | FileCheck %s
// CHECK: check: ok
func.func @core(%x0: tensor<?x?xf16>, %s0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %r:2 = flexsn.scan ins(%x0 : tensor<?x?xf16>) states(%s0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%v0: f32, %v1: f32):
    %t0 = math.trunc %v0 : f32
    %t1 = arith.constant 4.000000000e+00 : f32
    %t2 = arith.minimumf %t0, %t1 : f32
    %t3 = math.expm1 %t2 : f32
    %t4 = math.atan2 %t3, %t3 : f32
    %t5 = arith.constant -8.000000000e+00 : f32
    %t6 = arith.constant 8.000000000e+00 : f32
    %t7 = arith.minimumf %t4, %t6 : f32
    %t8 = arith.maximumf %t7, %t5 : f32
    flexsn.yield %t0, %t8 : f32, f32
  }
  return %r#0, %r#1 : tensor<?x?xf32>, tensor<?x?xf32>
}
