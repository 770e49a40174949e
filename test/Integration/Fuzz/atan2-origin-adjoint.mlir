// Found by flexsn-fuzz --seed=2 --first=715 --count=1, minimized.
// atan2 at the origin: the kernel's gradient is NaN (0 * 0/0, as PyTorch's);
// the reference adjoint skipped zero gradients and gave 0. It now computes
// IEEE products wherever a partial is not finite.
// RUN: flexsn-run %s --backend=cpu --variant=backward --T=3 --ncl=33 --seed=14624340424876201462 --tie-margin=2.000000e-02 --check | FileCheck %s
// CHECK: check: ok
func.func @core(%x0: tensor<?x?xf32>, %x1: tensor<?x?xf16>) -> (tensor<?x?xf32>) {
  %r:1 = flexsn.scan ins(%x0, %x1 : tensor<?x?xf32>, tensor<?x?xf16>) -> (tensor<?x?xf32>) {
  ^bb0(%v0: f32, %v1: f32):
    %t0 = arith.constant 7.490559221e-01 : f32
    %t1 = arith.subf %v1, %t0 : f32
    %t2 = flexsn.spike %t1 surrogate <super_spike, alpha = 8.732165746e-01> : f32
    %t3 = arith.constant 1.238587596e+00 : f32
    %t4 = arith.subf %v0, %t3 : f32
    %t5 = flexsn.spike %t4 surrogate <rect, alpha = 1.888841666e+00> : f32
    %t6 = math.atan2 %t2, %t5 : f32
    flexsn.yield %t6 : f32
  }
  return %r#0 : tensor<?x?xf32>
}
