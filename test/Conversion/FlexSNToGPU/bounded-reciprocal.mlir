// 1 / d for an f32 divisor proven to lie within [2^-64, 2^64] in magnitude
// becomes the reciprocal's fast path (rcp.approx.ftz and one Newton step);
// any other division is left alone.
// RUN: flexsn-opt %s -flexsn-bounded-reciprocal -split-input-file | FileCheck %s
//
// In the GPU pipeline: lif's backward (sigmoid surrogate) holds no
// rcp.rn.f32 and assembles.
// RUN: flexsn-translate %flexsn_src_root/examples/lif.mlir --flexsn-to-ptx --options='chip=sm_90 differentiate' --ptx-entry=lif_backward_scalar -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --implicit-check-not=rcp.rn < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// PTX: .entry lif_backward_scalar(
// PTX: rcp.approx.ftz.f32
// PTX: fma.rn.f32

// The sigmoid surrogate's divisor, 1 + exp(-4 |x|), lies in [1, 2].
// CHECK-LABEL: func.func @surrogate(
// CHECK-SAME: %[[X:.*]]: f32
// CHECK: %[[D:.*]] = arith.addf
// CHECK: %[[R0:.*]] = nvvm.rcp.approx.ftz.f %[[D]] : f32
// CHECK: %[[M1:.*]] = arith.constant -1.000000e+00 : f32
// CHECK: %[[E:.*]] = llvm.intr.fma(%[[D]], %[[R0]], %[[M1]]) : (f32, f32, f32) -> f32
// CHECK: %[[NE:.*]] = arith.negf %[[E]] : f32
// CHECK: %[[R:.*]] = llvm.intr.fma(%[[R0]], %[[NE]], %[[R0]]) : (f32, f32, f32) -> f32
// CHECK-NOT: arith.divf
// CHECK: return %[[R]]
func.func @surrogate(%x: f32) -> f32 {
  %one = arith.constant 1.0 : f32
  %c = arith.constant -4.0 : f32
  %a = math.absf %x : f32
  %m = arith.mulf %a, %c : f32
  %e = math.exp %m : f32
  %d = arith.addf %e, %one : f32
  %r = arith.divf %one, %d : f32
  return %r : f32
}

// -----

// A traced torch.sigmoid: -|x| as select(x >= 0, -x, x); each branch is
// bounded under the condition it is taken on.
// CHECK-LABEL: func.func @traced_sigmoid(
// CHECK: nvvm.rcp.approx.ftz.f
// CHECK-NOT: arith.divf
func.func @traced_sigmoid(%x: f32) -> f32 {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %nonneg = arith.cmpf oge, %x, %zero : f32
  %n = arith.negf %x : f32
  %z = arith.select %nonneg, %n, %x : f32
  %e = math.exp %z : f32
  %d = arith.addf %one, %e : f32
  %r = arith.divf %one, %d : f32
  return %r : f32
}

// -----

// The constant on the left of the comparison: 0 < x, so -x <= 0 there.
// CHECK-LABEL: func.func @constant_on_the_left(
// CHECK: nvvm.rcp.approx.ftz.f
func.func @constant_on_the_left(%x: f32) -> f32 {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %pos = arith.cmpf olt, %zero, %x : f32
  %n = arith.negf %x : f32
  %z = arith.select %pos, %n, %x : f32
  %e = math.exp %z : f32
  %d = arith.addf %e, %one : f32
  %r = arith.divf %one, %d : f32
  return %r : f32
}

// -----

// A clamp to [1, 2] by two selects, and by maximumf/minimumf; a negative
// range ([-2, -1]) and subf.
// CHECK-LABEL: func.func @clamped(
// CHECK-COUNT-3: nvvm.rcp.approx.ftz.f
// CHECK-NOT: arith.divf
func.func @clamped(%x: f32) -> (f32, f32, f32) {
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %low = arith.cmpf olt, %x, %one : f32
  %y = arith.select %low, %one, %x : f32
  %high = arith.cmpf ugt, %y, %two : f32
  %d = arith.select %high, %two, %y : f32
  %r = arith.divf %one, %d : f32
  %lo = arith.maximumf %x, %one : f32
  %d2 = arith.minnumf %lo, %two : f32
  %r2 = arith.divf %one, %d2 : f32
  %zero = arith.constant 0.0 : f32
  %neg = arith.subf %zero, %d2 : f32
  %r3 = arith.divf %one, %neg : f32
  return %r, %r2, %r3 : f32, f32, f32
}

// -----

// Not proven: an unknown divisor; 1 + exp(x) (unbounded above); |x| (may be
// 0); max(x, 1) (unbounded above); a numerator other than 1; 0 * |x| (0 *
// inf); the wrong branch of the select (x itself where x >= 0); f64; and
// maxnumf(clamp(x, 1, 2), -|y|): [1, 2] where neither is NaN, but -|y|
// (down to -inf, and -0, whose reciprocal is -inf) where x is NaN;
// clamp(x, 1, 2) * 1e20 * 1e20 * 1e-30, which overflows f32 on the way;
// clamp(x, 1, 2) * 1e5 rounded to f16 (past 65504: inf) and back.
// CHECK-LABEL: func.func @kept(
// CHECK-NOT: nvvm.rcp
// CHECK-COUNT-11: arith.divf
// CHECK-NOT: nvvm.rcp
func.func @kept(%x: f32, %w: f64, %y: f32) -> (f32, f32, f32, f32, f32, f32, f32, f64, f32, f32, f32) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %r0 = arith.divf %one, %x : f32
  %e = math.exp %x : f32
  %d1 = arith.addf %e, %one : f32
  %r1 = arith.divf %one, %d1 : f32
  %a = math.absf %x : f32
  %r2 = arith.divf %one, %a : f32
  %m = arith.maximumf %x, %one : f32
  %r3 = arith.divf %one, %m : f32
  %c = arith.constant -4.0 : f32
  %am = arith.mulf %a, %c : f32
  %ea = math.exp %am : f32
  %d4 = arith.addf %ea, %one : f32
  %r4 = arith.divf %two, %d4 : f32
  %z = arith.mulf %a, %zero : f32
  %d5 = arith.addf %z, %one : f32
  %r5 = arith.divf %one, %d5 : f32
  %nonneg = arith.cmpf oge, %x, %zero : f32
  %n = arith.negf %x : f32
  %wrong = arith.select %nonneg, %x, %n : f32
  %ew = math.exp %wrong : f32
  %d6 = arith.addf %ew, %one : f32
  %r6 = arith.divf %one, %d6 : f32
  %one64 = arith.constant 1.0 : f64
  %c64 = arith.constant -4.0 : f64
  %a64 = math.absf %w : f64
  %m64 = arith.mulf %a64, %c64 : f64
  %e64 = math.exp %m64 : f64
  %d64 = arith.addf %e64, %one64 : f64
  %r7 = arith.divf %one64, %d64 : f64
  %low = arith.cmpf olt, %x, %one : f32
  %lx = arith.select %low, %one, %x : f32
  %high = arith.cmpf ogt, %lx, %two : f32
  %cx = arith.select %high, %two, %lx : f32
  %ay = math.absf %y : f32
  %ny = arith.negf %ay : f32
  %d8 = arith.maxnumf %cx, %ny : f32
  %r8 = arith.divf %one, %d8 : f32
  %big = arith.constant 1.0e20 : f32
  %small = arith.constant 1.0e-30 : f32
  %p1 = arith.mulf %cx, %big : f32
  %p2 = arith.mulf %p1, %big : f32
  %d9 = arith.mulf %p2, %small : f32
  %r9 = arith.divf %one, %d9 : f32
  %e5 = arith.constant 1.0e5 : f32
  %p3 = arith.mulf %cx, %e5 : f32
  %h = arith.truncf %p3 : f32 to f16
  %hw = arith.extf %h : f16 to f32
  %r10 = arith.divf %one, %hw : f32
  return %r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9, %r10 : f32, f32, f32, f32, f32, f32, f32, f64, f32, f32, f32
}
