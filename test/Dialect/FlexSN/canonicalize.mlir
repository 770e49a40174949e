// RUN: flexsn-opt %s -canonicalize -split-input-file | FileCheck %s

// In a backward function made by flexsn-differentiate (its arguments name
// their meaning), an output nobody reads is no longer computed.
// CHECK-LABEL: func.func @drop_unused_output
// CHECK: %[[V:.*]] = flexsn.scan ins(%{{.*}} : tensor<?x?xf32>) states(%{{.*}} : tensor<?xf32>) -> (tensor<?x?xf32>) {
// CHECK-NOT: flexsn.spike
// CHECK: flexsn.yield %{{.*}} : f32
// CHECK: return %[[V]]
func.func @drop_unused_output(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?x?xf32> attributes {flexsn.kernel = "backward"} {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %h = arith.addf %vt, %xt : f32
    %st = flexsn.spike %h surrogate <atan> : f32
    flexsn.yield %st, %h : f32, f32
  }
  return %v : tensor<?x?xf32>
}

// -----

// A state whose result is unused and that feeds no live value goes, with its
// initial state operand; the input only it read goes too.
// CHECK-LABEL: func.func @drop_dead_state
// CHECK-SAME: (%[[X:.*]]: tensor<?x?xf32>, %[[Y:.*]]: tensor<?x?xf32>, %[[A:.*]]: tensor<?xf32>, %[[B:.*]]: tensor<?xf32>)
// CHECK: flexsn.scan ins(%[[X]] : tensor<?x?xf32>) states(%[[A]] : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: f32):
func.func @drop_dead_state(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %a0: tensor<?xf32>, %b0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) attributes {flexsn.kernel = "backward"} {
  %o, %a, %b = flexsn.scan ins(%x, %y : tensor<?x?xf32>, tensor<?x?xf32>) states(%a0, %b0 : tensor<?xf32>, tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %yt: f32, %at: f32, %bt: f32):
    %an = arith.addf %at, %xt : f32
    %bn = arith.mulf %bt, %yt : f32
    flexsn.yield %an, %an, %bn : f32, f32, f32
  }
  return %o, %a : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// What flexsn-affine-states recorded per state goes with a dropped state
// (it describes the old list), and stays where every state stays.
// CHECK-LABEL: func.func @affine_marks_follow_the_states
// CHECK: flexsn.scan ins(%{{.*}} : tensor<?x?xf32>) states(%{{.*}} : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
// CHECK: flexsn.scan ins(%{{.*}} : tensor<?x?xf32>) states(%{{.*}} : tensor<?xf32>) attributes {flexsn.affine_states = array<i1: true>, flexsn.state_reads = [array<i64: 0>]}
func.func @affine_marks_follow_the_states(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %a0: tensor<?xf32>, %b0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) attributes {flexsn.kernel = "backward"} {
  %o, %a, %b = flexsn.scan ins(%x, %y : tensor<?x?xf32>, tensor<?x?xf32>) states(%a0, %b0 : tensor<?xf32>, tensor<?xf32>) attributes {flexsn.affine_states = array<i1: true, true>, flexsn.state_reads = [array<i64: 0>, array<i64: 1>]} -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %yt: f32, %at: f32, %bt: f32):
    %an = arith.addf %at, %xt : f32
    %bn = arith.mulf %bt, %yt : f32
    flexsn.yield %an, %an, %bn : f32, f32, f32
  }
  %o2, %c = flexsn.scan ins(%x : tensor<?x?xf32>) states(%a0 : tensor<?xf32>) attributes {flexsn.affine_states = array<i1: true>, flexsn.state_reads = [array<i64: 0>]} -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %ct: f32):
    %cn = arith.addf %ct, %xt : f32
    flexsn.yield %cn, %cn : f32, f32
  }
  return %o, %a, %c : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// A state whose result is unused but whose value reaches an output stays.
// CHECK-LABEL: func.func @keep_feeding_state
// CHECK: %[[R:.*]]:2 = flexsn.scan ins(%{{.*}} : tensor<?x?xf32>) states(%{{.*}} : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>)
// CHECK: return %[[R]]#0
func.func @keep_feeding_state(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?x?xf32> {
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %h = arith.addf %vt, %xt : f32
    flexsn.yield %h, %h : f32, f32
  }
  return %o : tensor<?x?xf32>
}

// -----

// Unused params are dropped (in a generated backward); constant scalar
// params move into the body and fold there.
// CHECK-LABEL: func.func @params
// CHECK-SAME: (%[[X:.*]]: tensor<?x?xf32>, %[[P:.*]]: tensor<?xf32>, %[[Q:.*]]: f32)
// CHECK: flexsn.scan ins(%[[X]] : tensor<?x?xf32>) params(%[[P]] : tensor<?xf32>) -> (tensor<?x?xf32>) {
// CHECK-NEXT: ^bb0(%[[XT:.*]]: f32, %[[PT:.*]]: f32):
// CHECK-NEXT: %[[C:.*]] = arith.constant 6.000000e+00 : f32
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[XT]], %[[C]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[M]], %[[PT]] : f32
// CHECK-NEXT: flexsn.yield %[[R]] : f32
func.func @params(%x: tensor<?x?xf32>, %p: tensor<?xf32>, %q: f32) -> tensor<?x?xf32> attributes {flexsn.kernel = "backward"} {
  %three = arith.constant 3.0 : f32
  %o = flexsn.scan ins(%x : tensor<?x?xf32>) params(%three, %p, %q : f32, tensor<?xf32>, f32) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32, %c: f32, %pt: f32, %qt: f32):
    %two = arith.constant 2.0 : f32
    %six = arith.mulf %c, %two : f32
    %m = arith.mulf %xt, %six : f32
    %r = arith.addf %m, %pt : f32
    flexsn.yield %r : f32
  }
  return %o : tensor<?x?xf32>
}

// -----

// Spikes of constants fold (x >= 0 spikes, NaN does not); detach of detach
// folds to one detach.
// CHECK-LABEL: func.func @folds
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[D:.*]] = flexsn.detach %{{.*}} : f32
// CHECK-NOT: flexsn.detach
// CHECK: flexsn.yield %[[ONE]], %[[ZERO]], %[[ZERO]], %[[D]] : f32, f32, f32, f32
func.func @folds(%x: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  %a, %b, %c, %d = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    %zero = arith.constant 0.0 : f32
    %neg = arith.constant -0.5 : f32
    %nan = arith.constant 0x7FC00000 : f32
    %s0 = flexsn.spike %zero surrogate <sigmoid> : f32
    %s1 = flexsn.spike %neg surrogate <sigmoid> : f32
    %s2 = flexsn.spike %nan surrogate <sigmoid> : f32
    %d0 = flexsn.detach %xt : f32
    %d1 = flexsn.detach %d0 : f32
    flexsn.yield %s0, %s1, %s2, %d1 : f32, f32, f32, f32
  }
  return %a, %b, %c, %d : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// A scan with no used result disappears.
// CHECK-LABEL: func.func @dead_scan
// CHECK-NOT: flexsn.scan
// CHECK: return
func.func @dead_scan(%x: tensor<?x?xf32>) {
  %o = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    flexsn.yield %xt : f32
  }
  return
}

// -----

// A user's function is a kernel whose ABI is its signature as written: its
// results and its operands that are function arguments stay even when
// unused (an unused input, param and state, an output nobody returns), so
// that "input #1" keeps meaning the second input. Constant params still
// fold into the body.
// CHECK-LABEL: func.func @keep_user_abi
// CHECK-SAME: (%[[X:.*]]: tensor<?x?xf32>, %[[Y:.*]]: tensor<?x?xf32>, %[[A:.*]]: tensor<?xf32>, %[[B:.*]]: tensor<?xf32>, %[[P:.*]]: tensor<?xf32>)
// CHECK: %[[R:.*]]:3 = flexsn.scan ins(%[[X]], %[[Y]] : tensor<?x?xf32>, tensor<?x?xf32>) states(%[[A]], %[[B]] : tensor<?xf32>, tensor<?xf32>) params(%[[P]] : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK: return %[[R]]#1
func.func @keep_user_abi(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %a0: tensor<?xf32>, %b0: tensor<?xf32>, %p: tensor<?xf32>) -> tensor<?x?xf32> {
  %three = arith.constant 3.0 : f32
  %o, %a, %b = flexsn.scan ins(%x, %y : tensor<?x?xf32>, tensor<?x?xf32>) states(%a0, %b0 : tensor<?xf32>, tensor<?xf32>) params(%p, %three : tensor<?xf32>, f32) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %yt: f32, %at: f32, %bt: f32, %pt: f32, %c: f32):
    %an = arith.addf %at, %yt : f32
    %an3 = arith.mulf %an, %c : f32
    %bn = arith.mulf %bt, %bt : f32
    flexsn.yield %an3, %an3, %bn : f32, f32, f32
  }
  return %a : tensor<?x?xf32>
}
