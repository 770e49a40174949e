// Found by flexsn-fuzz --seed=1 --first=1322 --count=1, minimized.
// atan2 at the origin gives a NaN gradient; the select in front of it routes
// it to the chosen branch only. The reference adjoint multiplied the other
// branch's zero partial by the NaN; select, max/min and copysign now route.
// RUN: flexsn-run %s --backend=cpu --variant=backward --T=8 --ncl=33 --seed=6249797156866082396 --tie-margin=1.000000e-04 --tolerance=1.000000e-09 --finite-differences=false --check | FileCheck %s
// CHECK: check: ok
func.func @core(%x0: tensor<?x?xf64>, %s0: tensor<?xf64>, %s1: tensor<?xf64>) -> (tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>) {
  %r:3 = flexsn.scan ins(%x0 : tensor<?x?xf64>) states(%s0, %s1 : tensor<?xf64>, tensor<?xf64>) -> (tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>) {
  ^bb0(%v0: f64, %v1: f64, %v2: f64):
    %t0 = arith.constant -1.000000000e+06 : f64
    %t1 = arith.constant 1.000000000e+06 : f64
    %t2 = arith.minimumf %v0, %t1 : f64
    %t3 = arith.maximumf %t2, %t0 : f64
    %t4 = arith.fptosi %t3 : f64 to i32
    %t5 = arith.sitofp %t4 : i32 to f64
    %t6 = arith.cmpf true, %v2, %v0 : f64
    %t7 = arith.select %t6, %t5, %v0 : f64
    %t8 = math.atan2 %t7, %t5 : f64
    %t9 = arith.constant -8.000000000e+00 : f64
    %t10 = arith.constant 8.000000000e+00 : f64
    %t11 = arith.minimumf %t8, %t10 : f64
    %t12 = arith.maximumf %t11, %t9 : f64
    %t13 = arith.constant -8.000000000e+00 : f64
    %t14 = arith.constant 8.000000000e+00 : f64
    %t15 = arith.minimumf %t7, %t14 : f64
    %t16 = arith.maximumf %t15, %t13 : f64
    flexsn.yield %v0, %t12, %t16 : f64, f64, f64
  }
  return %r#0, %r#1, %r#2 : tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>
}
