// RUN: flexsn-opt %s --flexsn-affine-transfer --split-input-file | FileCheck %s
// RUN: flexsn-opt %s --flexsn-affine-transfer=explain --split-input-file -verify-diagnostics -o /dev/null
// RUN: flexsn-opt %s --flexsn-differentiate --flexsn-affine-transfer=replace --canonicalize --split-input-file | FileCheck %s --check-prefix=BWD

// A leaky integrator with a parameter decay. @li_transfer runs the same
// step from (v0, m0) and carries dv/dv0 = m: its new value is m times the
// decay. The spike output is dropped (a transfer scan has no outputs).
// CHECK-LABEL: func.func @li(
// CHECK-LABEL: func.func @li_transfer(
// CHECK-SAME: %[[X:.*]]: tensor<?x?xf32>, %[[V0:.*]]: tensor<?xf32>, %[[M0:.*]]: tensor<?xf32>, %[[A:.*]]: f32)
// CHECK-SAME: -> (tensor<?x?xf32>, tensor<?x?xf32>)
// CHECK: %[[R:.*]]:2 = flexsn.scan ins(%[[X]] : tensor<?x?xf32>) states(%[[V0]], %[[M0]] : tensor<?xf32>, tensor<?xf32>) params(%[[A]] : f32)
// CHECK: ^bb0(%[[XT:.*]]: f32, %[[VT:.*]]: f32, %[[MT:.*]]: f32, %[[AT:.*]]: f32):
// CHECK: %[[D:.*]] = arith.mulf %[[VT]], %[[AT]] : f32
// CHECK: %[[N:.*]] = arith.addf %[[D]], %[[XT]] : f32
// CHECK: %[[DM:.*]] = arith.mulf %[[MT]], %[[AT]] : f32
// CHECK: flexsn.yield %[[N]], %[[DM]] : f32, f32
// CHECK: return %[[R]]#0, %[[R]]#1
// BWD-LABEL: func.func @li_transfer(
// BWD-LABEL: func.func @li_forward_transfer(
// BWD-LABEL: func.func @li_backward_transfer(
// BWD: flexsn.scan reverse
func.func @li(%x: tensor<?x?xf32>, %v0: tensor<?xf32>, %a: f32) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) params(%a : f32) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32, %at: f32):
    %d = arith.mulf %vt, %at : f32
    %n = arith.addf %d, %xt : f32
    %c1 = arith.constant 1.0 : f32
    %h = arith.subf %n, %c1 : f32
    %s = flexsn.spike %h surrogate <atan, alpha = 2.0> : f32
    flexsn.yield %s, %n : f32, f32
  }
  return %o, %v : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// Two states, a lower-triangular A: the current reads itself (through
// fma), the membrane both. The Jacobian's entries follow the states,
// row-major: d i/d i0, d i/d v0, d v/d i0, d v/d v0.
// CHECK-LABEL: func.func @cuba_transfer(
// CHECK-SAME: %[[X:[^:]*]]: tensor<?x?xf32>, %[[I0:[^:]*]]: tensor<?xf32>, %[[V0:[^:]*]]: tensor<?xf32>, %[[M00:[^:]*]]: tensor<?xf32>, %[[M01:[^:]*]]: tensor<?xf32>, %[[M10:[^:]*]]: tensor<?xf32>, %[[M11:[^:]*]]: tensor<?xf32>, %[[A:[^:]*]]: f32, %[[B:[^:]*]]: tensor<?xf32>)
// CHECK: flexsn.scan ins(%[[X]] : tensor<?x?xf32>) states(%[[I0]], %[[V0]], %[[M00]], %[[M01]], %[[M10]], %[[M11]] :
// CHECK: ^bb0(%[[XT:[^:]*]]: f32, %[[IT:[^:]*]]: f32, %[[VT:[^:]*]]: f32, %[[J00:[^:]*]]: f32, %[[J01:[^:]*]]: f32, %[[J10:[^:]*]]: f32, %[[J11:[^:]*]]: f32, %[[AT:[^:]*]]: f32, %[[BT:[^:]*]]: f32):
// CHECK: %[[DI:.*]] = math.fma %[[AT]], %[[IT]], %[[XT]] : f32
// CHECK: %[[BV:.*]] = arith.mulf %[[BT]], %[[VT]] : f32
// CHECK: %[[VN:.*]] = arith.addf %[[BV]], %[[DI]] : f32
// Column 0 (along i0):
// CHECK: %[[C0I:.*]] = arith.mulf %[[AT]], %[[J00]] : f32
// CHECK: %[[C0B:.*]] = arith.mulf %[[BT]], %[[J10]] : f32
// CHECK: %[[C0V:.*]] = arith.addf %[[C0B]], %[[C0I]] : f32
// Column 1 (along v0):
// CHECK: %[[C1I:.*]] = arith.mulf %[[AT]], %[[J01]] : f32
// CHECK: %[[C1B:.*]] = arith.mulf %[[BT]], %[[J11]] : f32
// CHECK: %[[C1V:.*]] = arith.addf %[[C1B]], %[[C1I]] : f32
// CHECK: flexsn.yield %[[DI]], %[[VN]], %[[C0I]], %[[C1I]], %[[C0V]], %[[C1V]] : f32, f32, f32, f32, f32, f32
func.func @cuba(%x: tensor<?x?xf32>, %i0: tensor<?xf32>, %v0: tensor<?xf32>, %a: f32, %b: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %o, %i, %v = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%i0, %v0 : tensor<?xf32>, tensor<?xf32>) params(%a, %b : f32, tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) {
  ^bb0(%xt: f32, %it: f32, %vt: f32, %at: f32, %bt: f32):
    %di = math.fma %at, %it, %xt : f32
    %bv = arith.mulf %bt, %vt : f32
    %vn = arith.addf %bv, %di : f32
    flexsn.yield %vn, %di, %vn : f32, f32, f32
  }
  return %o, %i, %v : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
}

// -----

// The other rules: a choice on the input (a zero derivative in the branch
// free of the states), a difference with the state subtracted, a quotient,
// a negation, a detach (identity: the Jacobian of values), a narrowing and
// widening (the same conversions of the derivative). A state the step
// sets from the input alone has a zero row.
// CHECK-LABEL: func.func @rules_transfer(
// CHECK: ^bb0(%[[XT:[^:]*]]: f64, %[[ST:[^:]*]]: f64, %[[RT:[^:]*]]: f64, %[[J00:[^:]*]]: f64, %[[J01:[^:]*]]: f64, %[[J10:[^:]*]]: f64, %[[J11:[^:]*]]: f64):
// CHECK: %[[Z:.*]] = arith.constant 0.000000e+00 : f64
// CHECK: %[[Z00:.*]] = arith.constant 0.000000e+00 : f64
// CHECK: %[[SEL:.*]] = arith.select %{{.*}}, %[[J00]], %[[Z00]] : f64
// CHECK: %[[NEG:.*]] = arith.negf %[[SEL]] : f64
// CHECK: %[[DIV:.*]] = arith.divf %[[NEG]], %[[XT]] : f64
// CHECK: %[[NAR:.*]] = arith.truncf %[[DIV]] : f64 to f32
// CHECK: %[[WID:.*]] = arith.extf %[[NAR]] : f32 to f64
// CHECK: %[[NEG2:.*]] = arith.negf %[[WID]] : f64
// CHECK: %[[Z10:.*]] = arith.constant 0.000000e+00 : f64
// CHECK: arith.select %{{.*}}, %[[J01]], %{{.*}} : f64
// CHECK: %[[Z11:.*]] = arith.constant 0.000000e+00 : f64
// CHECK: flexsn.yield %{{.*}}, %[[XT]], %[[NEG2]], %{{.*}}, %[[Z10]], %[[Z11]]
func.func @rules(%x: tensor<?x?xf64>, %s0: tensor<?xf64>, %r0: tensor<?xf64>) -> (tensor<?xf64>, tensor<?xf64>) {
  %s, %r = flexsn.scan final_states ins(%x : tensor<?x?xf64>) states(%s0, %r0 : tensor<?xf64>, tensor<?xf64>) -> (tensor<?xf64>, tensor<?xf64>) {
  ^bb0(%xt: f64, %st: f64, %rt: f64):
    %zero = arith.constant 0.0 : f64
    %pos = arith.cmpf ogt, %xt, %zero : f64
    %sel = arith.select %pos, %st, %xt : f64
    %det = flexsn.detach %sel : f64
    %neg = arith.negf %det : f64
    %div = arith.divf %neg, %xt : f64
    %narrow = arith.truncf %div : f64 to f32
    %wide = arith.extf %narrow : f32 to f64
    %sub = arith.subf %xt, %wide : f64
    flexsn.yield %sub, %xt : f64, f64
  }
  return %s, %r : tensor<?xf64>, tensor<?xf64>
}

// -----

// LIF with a reset through its spike gets no transfer function; its
// reverse-time backward scan (affine in the state gradients) does.
// CHECK-LABEL: func.func @lif(
// CHECK-NOT: func.func @lif_transfer
// BWD-NOT: func.func @lif(
// BWD-NOT: func.func @lif_forward
// BWD-LABEL: func.func @lif_backward_transfer(
// BWD: flexsn.scan reverse ins(
// BWD-SAME: lagged(
// BWD-SAME: lagged_init(
func.func @lif(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  // expected-remark @below {{no transfer function: state #0 is not affine in the states ('flexsn.spike' of a value that depends on the states}}
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c2 = arith.constant 2.0 : f32
    %c1 = arith.constant 1.0 : f32
    %d = arith.subf %xt, %vt : f32
    %q = arith.divf %d, %c2 : f32
    %h = arith.addf %vt, %q : f32
    %hm = arith.subf %h, %c1 : f32
    %st = flexsn.spike %hm surrogate <sigmoid, alpha = 4.0> : f32
    %ns = arith.subf %c1, %st : f32
    %vn = arith.mulf %h, %ns : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
