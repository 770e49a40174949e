// Found by flexsn-fuzz --seed=2 --first=128 --count=1, minimized.
// copysign of two bf16 inputs came out positive on the CPU: LLVM 22's x86
// back end lost the sign bit of a bf16 load bitcast to i16. CPU kernels now
// read and write bf16 as i16 bits (FlexSNToCPUKernels).
// RUN: flexsn-run %s --backend=cpu --variant=inference --T=1 --ncl=16 --seed=14852008220804362928 --tie-margin=2.000000e-02 --check | FileCheck %s
// CHECK: check: ok
func.func @core(%x0: tensor<?x?xbf16>, %x1: tensor<?x?xbf16>, %s0: tensor<?xf16>) -> (tensor<?x?xf32>, tensor<?x?xf16>) {
  %r:2 = flexsn.scan ins(%x0, %x1 : tensor<?x?xbf16>, tensor<?x?xbf16>) states(%s0 : tensor<?xf16>) -> (tensor<?x?xf32>, tensor<?x?xf16>) {
  ^bb0(%v0: f32, %v1: f32, %v2: f32):
    %t0 = math.copysign %v1, %v0 : f32
    %t1 = arith.minnumf %v2, %t0 : f32
    %t2 = arith.constant 4.000000000e+00 : f32
    %t3 = math.tanh %v2 : f32
    %t4 = arith.mulf %t3, %t2 : f32
    flexsn.yield %t1, %t4 : f32, f32
  }
  return %r#0, %r#1 : tensor<?x?xf32>, tensor<?x?xf16>
}
