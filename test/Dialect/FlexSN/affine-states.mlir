// RUN: flexsn-opt %s --flexsn-affine-states --split-input-file | FileCheck %s
// RUN: flexsn-opt %s --flexsn-affine-states=explain --split-input-file -verify-diagnostics -o /dev/null
// RUN: flexsn-opt %s --flexsn-differentiate --flexsn-affine-states --split-input-file | FileCheck %s --check-prefix=BWD

// A leaky integrator: v' = 0.9 v + x.
// CHECK-LABEL: func.func @li(
// CHECK: flexsn.scan
// CHECK-SAME: flexsn.affine_states = array<i1: true>
// CHECK-SAME: flexsn.state_reads = [array<i64: 0>]
// BWD-LABEL: func.func @li_backward(
// BWD: flexsn.scan reverse
// BWD-SAME: flexsn.affine_states = array<i1: true>
func.func @li(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c = arith.constant 0.9 : f32
    %d = arith.mulf %vt, %c : f32
    %n = arith.addf %d, %xt : f32
    flexsn.yield %n, %n : f32, f32
  }
  return %o, %v : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// LIF with a hard reset through its spike: the state's update is not
// affine; the reverse-time backward scan is (its adjoint is linear in the
// state gradient, the forward's states read as lagged values).
// CHECK-LABEL: func.func @lif(
// CHECK: flexsn.scan
// CHECK-SAME: flexsn.affine_states = array<i1: false>
// CHECK-SAME: flexsn.state_reads = [array<i64>]
// BWD-LABEL: func.func @lif_forward(
// BWD: flexsn.scan ins(
// BWD-SAME: flexsn.affine_states = array<i1: false>
// BWD-LABEL: func.func @lif_backward(
// BWD: flexsn.scan reverse
// BWD-SAME: flexsn.affine_states = array<i1: true>
// BWD-SAME: flexsn.state_reads = [array<i64: 0>]
func.func @lif(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c2 = arith.constant 2.0 : f32
    %c1 = arith.constant 1.0 : f32
    %d = arith.subf %xt, %vt : f32
    %q = arith.divf %d, %c2 : f32
    %h = arith.addf %vt, %q : f32
    %hm = arith.subf %h, %c1 : f32
    // expected-remark @below {{state #0 is not affine in the states: 'flexsn.spike' of a value that depends on the states}}
    %st = flexsn.spike %hm surrogate <sigmoid, alpha = 4.0> : f32
    %ns = arith.subf %c1, %st : f32
    %vn = arith.mulf %h, %ns : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// LIF without reset fires but keeps integrating: the spike is an output,
// the state affine.
// CHECK-LABEL: func.func @lif_no_reset(
// CHECK: flexsn.scan
// CHECK-SAME: flexsn.affine_states = array<i1: true>
func.func @lif_no_reset(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c2 = arith.constant 2.0 : f32
    %c1 = arith.constant 1.0 : f32
    %d = arith.subf %xt, %vt : f32
    %q = arith.divf %d, %c2 : f32
    %h = arith.addf %vt, %q : f32
    %hm = arith.subf %h, %c1 : f32
    %st = flexsn.spike %hm surrogate <atan, alpha = 2.0> : f32
    flexsn.yield %st, %h : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// A current-based leaky integrator: the synaptic current reads itself, the
// membrane both (a lower-triangular A); decays are parameters, one a tensor.
// CHECK-LABEL: func.func @cuba_li(
// CHECK: flexsn.scan
// CHECK-SAME: flexsn.affine_states = array<i1: true, true>
// CHECK-SAME: flexsn.state_reads = [array<i64: 0>, array<i64: 0, 1>]
func.func @cuba_li(%x: tensor<?x?xf32>, %i0: tensor<?xf32>, %v0: tensor<?xf32>, %a: f32, %b: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %o, %i, %v = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%i0, %v0 : tensor<?xf32>, tensor<?xf32>) params(%a, %b : f32, tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) {
  ^bb0(%xt: f32, %it: f32, %vt: f32, %at: f32, %bt: f32):
    %di = math.fma %at, %it, %xt : f32
    %bv = arith.mulf %bt, %vt : f32
    %vn = arith.addf %bv, %di : f32
    %ne = arith.negf %vn : f32
    flexsn.yield %ne, %di, %vn : f32, f32, f32
  }
  return %o, %i, %v : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
}

// -----

// A choice on the input keeps the update affine; a choice on the state,
// a quadratic term, a division by the state, exp and abs of it do not.
// Detaching, narrowing and widening keep it.
// CHECK-LABEL: func.func @mixed(
// CHECK: flexsn.scan
// CHECK-SAME: flexsn.affine_states = array<i1: true, false, false, false, false, true, true, false>
// CHECK-SAME: flexsn.state_reads = [array<i64: 0, 1>, array<i64>, array<i64>, array<i64>, array<i64>, array<i64: 5>, array<i64: 6>, array<i64>]
func.func @mixed(%x: tensor<?x?xf64>, %s0: tensor<?xf64>)
    -> (tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>) {
  %r:8 = flexsn.scan final_states ins(%x : tensor<?x?xf64>) states(%s0, %s0, %s0, %s0, %s0, %s0, %s0, %s0 : tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>)
      -> (tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>) {
  ^bb0(%xt: f64, %a: f64, %b: f64, %c: f64, %d: f64, %e: f64, %f: f64, %g: f64, %h: f64):
    %zero = arith.constant 0.0 : f64
    %pos = arith.cmpf ogt, %xt, %zero : f64
    %sel = arith.select %pos, %a, %b : f64
    %neg = arith.cmpf olt, %b, %zero : f64
    // expected-remark @below {{state #1 is not affine in the states: a choice that depends on the states}}
    %chosen = arith.select %neg, %b, %xt : f64
    // expected-remark @below {{state #2 is not affine in the states: a product of two values that depend on the states}}
    %sq = arith.mulf %c, %c : f64
    // expected-remark @below {{state #3 is not affine in the states: a division by a value that depends on the states}}
    %inv = arith.divf %xt, %d : f64
    // expected-remark @below {{state #4 is not affine in the states: 'math.exp' of a value that depends on the states}}
    %ex = math.exp %e : f64
    %det = flexsn.detach %f : f64
    %narrow = arith.truncf %g : f64 to f32
    %wide = arith.extf %narrow : f32 to f64
    // expected-remark @below {{state #7 is not affine in the states: 'math.absf' of a value that depends on the states}}
    %abs = math.absf %h : f64
    flexsn.yield %sel, %chosen, %sq, %inv, %ex, %det, %wide, %abs : f64, f64, f64, f64, f64, f64, f64, f64
  }
  return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5, %r#6, %r#7 : tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>
}

// -----

// A state set from a parameter alone is affine and reads no state.
// CHECK-LABEL: func.func @from_param(
// CHECK: flexsn.scan
// CHECK-SAME: flexsn.affine_states = array<i1: true>
// CHECK-SAME: flexsn.state_reads = [array<i64>]
func.func @from_param(%x: tensor<?x?xf32>, %v0: tensor<?xf32>, %p: f32) -> tensor<?xf32> {
  %v = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) params(%p : f32) -> (tensor<?xf32>) {
  ^bb0(%xt: f32, %vt: f32, %pt: f32):
    %n = arith.addf %pt, %xt : f32
    flexsn.yield %n : f32
  }
  return %v : tensor<?xf32>
}
