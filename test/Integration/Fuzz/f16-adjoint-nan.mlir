// Found by flexsn-fuzz --seed=2 --first=1970 --count=1, minimized.
// As atan2-origin-adjoint.mlir, in f16 storage.
// RUN: flexsn-run %s --backend=cpu --variant=backward --T=1 --ncl=3 --seed=9692099733496142478 --tie-margin=2.000000e-02 --check | FileCheck %s
// CHECK: check: ok
func.func @core(%x0: tensor<?x?xbf16>, %s0: tensor<?xf16>) -> (tensor<?x?xf32>, tensor<?x?xf16>) {
  %r:2 = flexsn.scan ins(%x0 : tensor<?x?xbf16>) states(%s0 : tensor<?xf16>) -> (tensor<?x?xf32>, tensor<?x?xf16>) {
  ^bb0(%v0: f32, %v1: f32):
    %t0 = arith.constant 1.478879697e+00 : f32
    %t1 = arith.subf %v1, %t0 : f32
    %t2 = flexsn.spike %t1 surrogate <leaky_k_relu, leak = 0.000000000e+00, k = 1.000000000e+00> : f32
    %t3 = math.atan2 %t2, %t2 : f32
    %t4 = arith.constant 4.000000000e+00 : f32
    %t5 = math.tanh %t3 : f32
    %t6 = arith.mulf %t5, %t4 : f32
    flexsn.yield %v1, %t6 : f32, f32
  }
  return %r#0, %r#1 : tensor<?x?xf32>, tensor<?x?xf16>
}
