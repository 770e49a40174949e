// f16/bf16 storage on the vector path: 64-bit vector loads/stores of the
// narrow type with f32 compute; f64 storage with f64 compute. Every read
// of a sequence or state is invariant (ld.global.nc): a kernel never
// writes what it reads.
// REQUIRES: ptxas
// RUN: flexsn-translate --flexsn-to-ptx %s -o %t.ptx
// RUN: %ptxas -arch=sm_90 %t.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.ptx --implicit-check-not=.extern --implicit-check-not=ld.global.v --implicit-check-not=ld.global.b
// CHECK: .visible .entry half_inference(
// CHECK-DAG: ld.global.nc.v4.b16
// CHECK-DAG: cvt.f32.bf16
// CHECK-DAG: cvt.f32.f16
// CHECK-DAG: cvt.rn.f16x2.f32
// CHECK-DAG: st.global.v2.b32
// CHECK: .visible .entry wide_inference(
// CHECK: ld.global.nc.v2.b64
func.func @half(%x: tensor<?x?xbf16>, %v0: tensor<?xf16>) -> (tensor<?x?xbf16>, tensor<?x?xf16>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xbf16>) states(%v0 : tensor<?xf16>) -> (tensor<?x?xbf16>, tensor<?x?xf16>) {
  ^bb0(%xt: f32, %vt: f32):
    %one = arith.constant 1.0 : f32
    %h = arith.addf %vt, %xt : f32
    %hm = arith.subf %h, %one : f32
    %st = flexsn.spike %hm surrogate <atan> : f32
    %k = arith.subf %one, %st : f32
    %vn = arith.mulf %h, %k : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xbf16>, tensor<?x?xf16>
}
func.func @wide(%x: tensor<?x?xf64>) -> tensor<?x?xf64> {
  %y = flexsn.scan ins(%x : tensor<?x?xf64>) -> (tensor<?x?xf64>) {
  ^bb0(%xt: f64):
    %e = math.exp %xt : f64
    flexsn.yield %e : f64
  }
  return %y : tensor<?x?xf64>
}
