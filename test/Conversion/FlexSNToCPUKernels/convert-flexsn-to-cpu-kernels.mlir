// RUN: flexsn-opt %s -convert-flexsn-to-cpu-kernels -split-input-file -verify-diagnostics | FileCheck %s --implicit-check-not=flexsn.scan --implicit-check-not=flexsn.spike --implicit-check-not=flexsn.detach

// CHECK-LABEL: func.func @lif_inference
// CHECK-SAME: (%[[X:.*]]: !llvm.ptr, %[[V0:.*]]: !llvm.ptr, %[[S:.*]]: !llvm.ptr, %[[VS:.*]]: !llvm.ptr, %[[T:.*]]: i64, %[[NCL:.*]]: i64, %[[BEGIN:.*]]: i64, %[[END:.*]]: i64)
// CHECK-SAME: flexsn.variant = "inference"
// CHECK: scf.for %[[N:.*]] = %[[BEGIN]] to %[[END]]
// CHECK: %[[INIT:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[T]] step %{{.*}} iter_args(%[[V:.*]] = %[[INIT]]) -> (f32)
// CHECK: %[[ROW:.*]] = arith.muli %[[I]], %[[NCL]] : i64
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: arith.cmpf oge
// CHECK: arith.select
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr
// CHECK: llvm.store
// CHECK: scf.yield
// CHECK-LABEL: func.func @lif_final_state
// CHECK-SAME: flexsn.variant = "final_state"
// CHECK: %[[FINAL:.*]] = scf.for
// CHECK: llvm.store %[[FINAL]]
func.func @lif(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %one = arith.constant 1.0 : f32
    %h = arith.addf %vt, %xt : f32
    %hm = arith.subf %h, %one : f32
    %st = flexsn.spike %hm surrogate <atan> : f32
    %sd = flexsn.detach %st : f32
    %k = arith.subf %one, %sd : f32
    %vn = arith.mulf %h, %k : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// Reverse scans walk t = T-1 .. 0; bf16 storage is read as i16 bits,
// bitcast and widened where the step uses them (arith-expand then widens
// with integer ops: no bf16 value reaches the x86 back end, nor crosses a
// block in the pipelined loop), and stored as the bits of the rounded
// value; scalar params load once.
// CHECK-LABEL: func.func @rev_inference
// CHECK: scf.for
// CHECK: arith.subi
// CHECK: %[[BITS:.*]] = llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr -> i16
// CHECK: %[[VAL:.*]] = arith.bitcast %[[BITS]] : i16 to bf16
// CHECK: arith.extf %[[VAL]] : bf16 to f32
// CHECK: %[[ROUNDED:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK: %[[OUT:.*]] = arith.bitcast %[[ROUNDED]] : bf16 to i16
// CHECK: llvm.store %[[OUT]], %{{.*}} {alignment = 2 : i64} : i16, !llvm.ptr
func.func @rev(%x: tensor<?x?xbf16>, %w: f32) -> tensor<?x?xbf16> {
  %y = flexsn.scan reverse ins(%x : tensor<?x?xbf16>) params(%w : f32) -> (tensor<?x?xbf16>) {
  ^bb0(%xt: f32, %wt: f32):
    %m = arith.mulf %xt, %wt : f32
    flexsn.yield %m : f32
  }
  return %y : tensor<?x?xbf16>
}

// -----

func.func @no_lowering(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    // expected-error @+1 {{'ub.poison' op has no lowering to CPU kernels; a scan body may use arith, math, flexsn.spike and flexsn.detach}}
    %p = ub.poison : f32
    flexsn.yield %p : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @not_kernel_form(%n: index) -> tensor<?x?xf32> {
  %x = tensor.empty(%n, %n) : tensor<?x?xf32>
  // expected-error @+1 {{operand #0 must be an argument of the enclosing function to become a kernel argument}}
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    flexsn.yield %xt : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

// expected-error @+1 {{holds 2 flexsn.scan ops; a kernel function holds exactly one}}
func.func @two_scans(%x: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %a = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    flexsn.yield %xt : f32
  }
  %b = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    flexsn.yield %xt : f32
  }
  return %a, %b : tensor<?x?xf32>, tensor<?x?xf32>
}

// A scalar param's gradient (a sum_state) is accumulated over the chunk's
// neurons in f64 and added atomically to an f64 buffer (no rounding: the
// caller casts once).
// RUN: flexsn-opt %flexsn_src_root/examples/plif.mlir -flexsn-differentiate -canonicalize -convert-flexsn-to-cpu-kernels | FileCheck %s --check-prefix=SUM
// SUM-LABEL: func.func @plif_backward
// SUM: %[[Z:.*]] = arith.constant 0.000000e+00 : f64
// SUM: %[[S:.*]] = scf.for {{.*}} iter_args(%[[A:.*]] = %[[Z]]) -> (f64)
// SUM: %[[W:.*]] = arith.extf %{{.*}} : f32 to f64
// SUM: arith.addf %[[A]], %[[W]] : f64
// SUM-NOT: arith.truncf %[[S]]
// SUM: llvm.atomicrmw fadd %{{.*}}, %[[S]] monotonic : !llvm.ptr, f64
