// LLVM optimizes libdevice's f64 pow helper (__internal_accurate_pow) into
// each kernel entry's module on its own; the program's merged PTX keeps one
// definition per body, renamed where they differ, and assembles.
// REQUIRES: ptxas
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate' %s -o %t.ptx
// RUN: %ptxas -arch=sm_90 %t.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.ptx
// CHECK: .func {{.*}}__internal_accurate_pow(
// CHECK: .func {{.*}}__internal_accurate_pow_m{{[0-9]+}}_1(
func.func @core(%x0: tensor<?x?xf64>, %s0: tensor<?xf64>, %s1: tensor<?xf64>) -> (tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>) {
  %r:3 = flexsn.scan ins(%x0 : tensor<?x?xf64>) states(%s0, %s1 : tensor<?xf64>, tensor<?xf64>) -> (tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>) {
  ^bb0(%v0: f64, %v1: f64, %v2: f64):
    %t0 = arith.constant 5.000000000e-01 : f64
    %t1 = math.absf %v2 : f64
    %t2 = arith.addf %t1, %t0 : f64
    %t3 = arith.constant -2.000000000e+00 : f64
    %t4 = arith.constant 2.000000000e+00 : f64
    %t5 = arith.minimumf %v0, %t4 : f64
    %t6 = arith.maximumf %t5, %t3 : f64
    %t7 = math.powf %t2, %t6 : f64
    %t8 = arith.constant 6.913241519e-01 : f64
    %t9 = arith.subf %v0, %t8 : f64
    %t10 = flexsn.spike %t9 surrogate <squarewave_fourier_series, n = 2.000000000e+00, T_period = 1.034405180e+01> : f64
    %t11 = arith.constant 4.000000000e+00 : f64
    %t12 = math.tanh %t10 : f64
    %t13 = arith.mulf %t12, %t11 : f64
    %t14 = arith.constant -8.000000000e+00 : f64
    %t15 = arith.constant 8.000000000e+00 : f64
    %t16 = arith.minimumf %t7, %t15 : f64
    %t17 = arith.maximumf %t16, %t14 : f64
    flexsn.yield %v2, %t13, %t17 : f64, f64, f64
  }
  return %r#0, %r#1, %r#2 : tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>
}
