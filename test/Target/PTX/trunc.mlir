// math.trunc (torch.trunc, torch.frac, fmod's adjoint) has no NVVM lowering
// in MLIR 22; the GPU lowering expands it to x < 0 ? ceil(x) : floor(x), so
// the PTX assembles (math.trunc itself has no LLVM translation on NVPTX).
// REQUIRES: ptxas
// RUN: flexsn-opt %s -convert-flexsn-to-gpu | FileCheck %s --check-prefix=GPU
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate' %s -o %t.ptx
// RUN: %ptxas -arch=sm_90 %t.ptx -o %t.cubin
// RUN: flexsn-run %s --T=5 --ncl=300 --check | FileCheck %s --check-prefix=CPU
// GPU-LABEL: gpu.func @frac_inference
// GPU-NOT: math.trunc
// GPU-DAG: math.ceil
// GPU-DAG: math.floor
// CPU: check: ok
func.func @frac(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %three = arith.constant 3.0 : f32
    %y = arith.mulf %xt, %three : f32
    %t = math.trunc %y : f32
    %f = arith.subf %y, %t : f32
    %vn = arith.remf %vt, %xt : f32
    %w = arith.addf %vn, %f : f32
    flexsn.yield %f, %w : f32, f32
  }
  return %o, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
