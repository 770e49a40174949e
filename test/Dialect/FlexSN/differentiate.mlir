// RUN: flexsn-opt %s --flexsn-differentiate --split-input-file | FileCheck %s
// RUN: flexsn-opt %s --flexsn-differentiate=save-ops=flexsn.spike --split-input-file | FileCheck %s --check-prefix=SAVE

// LIF: the training forward writes outputs and the state sequence; the
// backward runs in reverse, reads x_t and the state before the step
// (lagged state sequence, initial state at t = 0), starts its carry at zero
// and recomputes the body before the adjoint.
// CHECK-LABEL: func.func @lif(
// CHECK-LABEL: func.func @lif_forward(
// CHECK-SAME: {flexsn.index = 0 : i64, flexsn.role = "input"}
// CHECK-SAME: -> (tensor<?x?xf32> {flexsn.index = 0 : i64, flexsn.role = "output"}, tensor<?x?xf32> {flexsn.index = 0 : i64, flexsn.role = "state_seq"})
// CHECK-SAME: flexsn.kernel = "forward", flexsn.primal = @lif
// CHECK: flexsn.scan ins(
// CHECK-LABEL: func.func @lif_backward(
// CHECK-SAME: flexsn.role = "input"
// CHECK-SAME: flexsn.role = "state_seq"
// CHECK-SAME: flexsn.role = "init_state"
// CHECK-SAME: flexsn.role = "grad_output"
// CHECK-SAME: flexsn.role = "grad_state_seq"
// CHECK-SAME: flexsn.role = "grad_input"
// CHECK-SAME: flexsn.role = "grad_init_state"
// CHECK-SAME: flexsn.kernel = "backward"
// CHECK: %[[Z:.*]] = tensor.splat
// CHECK: flexsn.scan reverse final_states ins({{.*}}) lagged(%{{.*}} : tensor<?x?xf32>) lagged_init(%{{.*}} : tensor<?xf32>) states(%[[Z]] : tensor<?xf32>)
// Recomputation, then the sigmoid surrogate's derivative.
// CHECK: flexsn.spike
// CHECK: math.exp
// CHECK: flexsn.yield
func.func @lif(%x: tensor<?x?xf32>, %v0: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>) {
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

// SAVE-LABEL: func.func @lif_forward(
// SAVE-SAME: flexsn.role = "saved"
// SAVE: flexsn.yield %{{.*}}, %{{.*}}, %[[S:.*]] : f32, f32, f32
// SAVE-LABEL: func.func @lif_backward(
// SAVE-SAME: flexsn.role = "saved"

// -----

// Requires-grad: no gradient for %x (flexsn.no_grad on the argument), and
// the state sequence takes no gradient (flexsn.no_grad on the result): the
// backward returns only the initial state's gradient and reads no output
// gradient of the state sequence.
// CHECK-LABEL: func.func @no_grad_backward(
// CHECK-NOT: grad_state_seq
// CHECK-NOT: "grad_input"
// CHECK-SAME: -> (tensor<?xf32> {flexsn.index = 0 : i64, flexsn.role = "grad_init_state"})
func.func @no_grad(%x: tensor<?x?xf32> {flexsn.no_grad}, %v0: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32> {flexsn.no_grad}) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c1 = arith.constant 1.0 : f32
    %h = arith.addf %vt, %xt : f32
    %hm = arith.subf %h, %c1 : f32
    %st = flexsn.spike %hm surrogate <atan> : f32
    %ns = arith.subf %c1, %st : f32
    %vn = arith.mulf %h, %ns : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// A non-differentiable output (through flexsn.detach) takes no gradient
// input; detach_reset stops the gradient through the reset.
// CHECK-LABEL: func.func @nondiff_backward(
// CHECK-SAME: flexsn.index = 0 : i64, flexsn.role = "grad_output"
// CHECK-NOT: flexsn.index = 1 : i64, flexsn.role = "grad_output"
// CHECK: flexsn.scan reverse final_states
func.func @nondiff(%x: tensor<?x?xf32>, %v0: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>) {
  %s, %m, %v = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c1 = arith.constant 1.0 : f32
    %h = arith.addf %vt, %xt : f32
    %hm = arith.subf %h, %c1 : f32
    %st = flexsn.spike %hm surrogate <atan> : f32
    %sd = flexsn.detach %st : f32
    %mark = flexsn.detach %h : f32
    %vn = arith.subf %h, %sd : f32
    flexsn.yield %st, %mark, %vn : f32, f32, f32
  }
  return %s, %m, %v : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>
}

// -----

// A scalar parameter's gradient is a sum over neurons (sum_states, rank-0
// result); a per-neuron parameter's is a [NCL] final state. Both
// accumulators start at zero.
// CHECK-LABEL: func.func @params_backward(
// CHECK-SAME: -> (tensor<?x?xf32> {{.*}}"grad_input"}, tensor<?xf32> {{.*}}"grad_init_state"}, tensor<f32> {flexsn.index = 0 : i64, flexsn.role = "grad_param"}, tensor<?xf32> {flexsn.index = 1 : i64, flexsn.role = "grad_param"})
// CHECK: flexsn.scan reverse final_states {{.*}} params({{.*}} : f32, tensor<?xf32>) attributes {sum_states = array<i64: 1>} -> (tensor<?x?xf32>, tensor<?xf32>, tensor<f32>, tensor<?xf32>)
func.func @params(%x: tensor<?x?xf32>, %v0: tensor<?xf32>, %w: f32, %b: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) params(%w, %b : f32, tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32, %wt: f32, %bt: f32):
    %c1 = arith.constant 1.0 : f32
    %a = arith.mulf %xt, %wt : f32
    %h0 = arith.addf %vt, %a : f32
    %h = arith.addf %h0, %bt : f32
    %hm = arith.subf %h, %c1 : f32
    %st = flexsn.spike %hm surrogate <sigmoid> : f32
    %ns = arith.subf %c1, %st : f32
    %vn = arith.mulf %h, %ns : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// Nothing requires a gradient: the training forward only, no (empty)
// backward function.
// CHECK-LABEL: func.func @frozen_forward(
// CHECK-NOT: func.func @frozen_backward
// SAVE-LABEL: func.func @frozen_forward(
func.func @frozen(%x: tensor<?x?xf32> {flexsn.no_grad}, %v0: tensor<?xf32> {flexsn.no_grad}) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %h = arith.addf %xt, %vt : f32
    %st = flexsn.spike %h surrogate <atan> : f32
    flexsn.yield %st, %h : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
