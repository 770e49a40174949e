// RUN: flexsn-opt %s -convert-flexsn-to-cpu-kernels -split-input-file -verify-diagnostics | FileCheck %s --implicit-check-not=flexsn.scan --implicit-check-not=flexsn.spike --implicit-check-not=flexsn.detach

// Neurons [begin, end) in blocks of 256: per block, the initial states
// into a stack buffer, then time outside and the block's neurons inside,
// the states read from and written back to the buffer. Every access is a
// run's base (fixed in the neuron loop) plus the neuron's index in the
// block, consecutive elements that LLVM vectorizes; an optional pointer
// that is null (the initial state) reads its runs from a stack block of
// zeros.
// CHECK-LABEL: func.func @lif_inference
// CHECK-SAME: (%[[X:.*]]: !llvm.ptr, %[[V0:.*]]: !llvm.ptr, %[[S:.*]]: !llvm.ptr, %[[VS:.*]]: !llvm.ptr, %[[T:.*]]: i64, %[[NCL:.*]]: i64, %[[BEGIN:.*]]: i64, %[[END:.*]]: i64)
// CHECK-SAME: flexsn.variant = "inference"
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : i64
// CHECK: %[[ZEROS:.*]] = llvm.alloca %{{.*}} x i8 {alignment = 64 : i64}
// CHECK: "llvm.intr.memset"(%[[ZEROS]]
// CHECK: %[[GIVEN:.*]] = llvm.icmp "ne" %[[V0]]
// CHECK: %[[BUF:.*]] = llvm.alloca %{{.*}} x f32 {alignment = 64 : i64}
// CHECK: scf.for %[[FIRST:.*]] = %[[BEGIN]] to %[[END]] step %[[C256]]
// CHECK: %[[LEFT:.*]] = arith.subi %[[END]], %[[FIRST]]
// CHECK: %[[COUNT:.*]] = arith.minsi %[[C256]], %[[LEFT]]
// CHECK: %[[V0AT:.*]] = llvm.getelementptr %[[V0]][%[[FIRST]]]
// CHECK: %[[V0B:.*]] = llvm.select %[[GIVEN]], %[[V0AT]], %[[ZEROS]]
// CHECK: scf.for %[[I0:.*]] = %{{.*}} to %[[COUNT]]
// CHECK: llvm.getelementptr %[[V0B]][%[[I0]]]
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr
// CHECK: scf.for %[[STEP:.*]] = %{{.*}} to %[[T]]
// CHECK: %[[ROW:.*]] = arith.muli %[[STEP]], %[[NCL]] : i64
// CHECK: %[[AT:.*]] = arith.addi %[[ROW]], %[[FIRST]] : i64
// CHECK: %[[XB:.*]] = llvm.getelementptr %[[X]][%[[AT]]]
// CHECK: %[[SB:.*]] = llvm.getelementptr %[[S]][%[[AT]]]
// CHECK: %[[VSB:.*]] = llvm.getelementptr %[[VS]][%[[AT]]]
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[COUNT]]
// CHECK: llvm.getelementptr %[[XB]][%[[I]]]
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: llvm.getelementptr %[[BUF]]
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: arith.cmpf oge
// CHECK: arith.select
// CHECK: llvm.getelementptr %[[SB]][%[[I]]]
// CHECK: llvm.store
// CHECK: llvm.getelementptr %[[VSB]][%[[I]]]
// CHECK: llvm.store
// CHECK: llvm.getelementptr %[[BUF]]
// CHECK: llvm.store
// The final_state kernel stores the buffer's states after the steps.
// CHECK-LABEL: func.func @lif_final_state
// CHECK-SAME: %[[FS:[^:]*]]: !llvm.ptr, %[[T2:[^:]*]]: i64
// CHECK-SAME: flexsn.variant = "final_state"
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[T2]] step
// CHECK: scf.for
// CHECK: %[[FSB:.*]] = llvm.getelementptr %[[FS]][%{{.*}}]
// CHECK: scf.for %[[I2:.*]] = %{{.*}} to
// CHECK: %[[FINAL:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK-NEXT: %[[FADDR:.*]] = llvm.getelementptr %[[FSB]][%[[I2]]]
// CHECK-NEXT: llvm.store %[[FINAL]], %[[FADDR]]
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
// neurons in f64 (per block, after its steps) and added atomically to an f64 buffer (no rounding: the
// caller casts once).
// RUN: flexsn-opt %flexsn_src_root/examples/plif.mlir -flexsn-differentiate -canonicalize -convert-flexsn-to-cpu-kernels | FileCheck %s --check-prefix=SUM
// SUM-LABEL: func.func @plif_backward
// SUM: %[[Z:.*]] = arith.constant 0.000000e+00 : f64
// SUM: %[[S:.*]] = scf.for {{.*}} iter_args(%[[A:.*]] = %[[Z]]) -> (f64)
// SUM: scf.for {{.*}} iter_args(%[[P:.*]] = %[[A]]) -> (f64)
// SUM: %[[W:.*]] = arith.extf %{{.*}} : f32 to f64
// SUM: arith.addf %[[P]], %[[W]] : f64
// SUM-NOT: arith.truncf %[[S]]
// SUM: llvm.atomicrmw fadd %{{.*}}, %[[S]] monotonic : !llvm.ptr, f64
