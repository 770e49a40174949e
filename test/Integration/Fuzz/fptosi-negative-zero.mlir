// Found by flexsn-fuzz --seed=2 --first=1474 --count=1, minimized.
// The reference interpreter kept -0.0 through fptosi/sitofp (an integer has
// no negative zero), so atan2(-0, -0) gave -pi where the kernel gave 0.
// RUN: flexsn-run %s --backend=cpu --variant=inference --T=2 --ncl=67 --seed=14795730435944153941 --tie-margin=2.000000e-02 --check | FileCheck %s
// CHECK: check: ok
func.func @core(%x0: tensor<?x?xbf16>) -> (tensor<?x?xf32>) {
  %r:1 = flexsn.scan ins(%x0 : tensor<?x?xbf16>) -> (tensor<?x?xf32>) {
  ^bb0(%v0: f32):
    %t0 = arith.constant -1.000000000e+06 : f32
    %t1 = arith.constant 1.000000000e+06 : f32
    %t2 = arith.minimumf %v0, %t1 : f32
    %t3 = arith.maximumf %t2, %t0 : f32
    %t4 = arith.fptosi %t3 : f32 to i32
    %t5 = arith.sitofp %t4 : i32 to f32
    %t6 = math.atan2 %t5, %t5 : f32
    flexsn.yield %t6 : f32
  }
  return %r#0 : tensor<?x?xf32>
}
