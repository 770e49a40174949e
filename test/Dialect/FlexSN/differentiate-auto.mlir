// RUN: flexsn-opt %s --flexsn-differentiate=save-ops=auto --split-input-file | FileCheck %s

// The auto policy on a hard-reset LIF with f32 storage. The backward needs
// h (the surrogate's argument and v' = h * (1 - s)'s factors); h is one
// sequence written and read (8 bytes a neuron and step) against reading x
// and writing and reading the state sequence (12). So the forward saves
// h, the backward reads neither x nor the state sequence, and the
// final-state pair is built: its forward writes the final state, its
// backward takes the final state's gradient.
// CHECK-LABEL: func.func @lif_forward(
// CHECK-SAME: flexsn.role = "state_seq"
// CHECK-SAME: flexsn.role = "saved"
// CHECK: %[[H:.*]] = arith.addf
// CHECK: flexsn.yield %{{.*}}, %[[H]], %{{.*}} : f32, f32, f32
// CHECK-LABEL: func.func @lif_backward(
// CHECK-NOT: "input"
// CHECK-NOT: "state_seq"
// CHECK-SAME: flexsn.role = "saved"
// CHECK-SAME: flexsn.role = "grad_output"
// CHECK-SAME: flexsn.role = "grad_state_seq"
// CHECK-SAME: -> (
// The saved h replaces its recomputation: no x - v of two block arguments.
// CHECK-NOT: arith.subf %arg{{[0-9]+}}, %arg
// CHECK: flexsn.yield
// CHECK-LABEL: func.func @lif_forward_final(
// CHECK-SAME: -> (tensor<?x?xf32> {flexsn.index = 0 : i64, flexsn.role = "output"}, tensor<?xf32> {flexsn.index = 0 : i64, flexsn.role = "final_state"}, tensor<?x?xf32> {flexsn.index = 0 : i64, flexsn.role = "saved"})
// CHECK-SAME: flexsn.kernel = "forward", flexsn.primal = @lif
// CHECK: flexsn.scan final_states ins(
// CHECK-LABEL: func.func @lif_backward_final(
// CHECK-SAME: %{{.*}}: tensor<?x?xf32> {flexsn.index = 0 : i64, flexsn.role = "saved"}, %{{.*}}: tensor<?x?xf32> {flexsn.index = 0 : i64, flexsn.role = "grad_output"}, %{{.*}}: tensor<?xf32> {flexsn.index = 0 : i64, flexsn.role = "grad_final_state"})
// CHECK-SAME: flexsn.kernel = "backward", flexsn.primal = @lif
// CHECK: flexsn.scan reverse final_states ins(
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

// -----

// The same neuron with bf16 storage: a saved value is an f32 sequence (8
// bytes written and read), against 2 for reading x and 4 for the state
// sequence. Rematerialization stays. The final-state pair's forward writes
// the final state and, for its backward, the state sequence (the new state
// stored as an extra output of a final_states scan); the backward takes the
// final state's gradient, not [T, NCL] rows of zeros.
// CHECK-LABEL: func.func @lif_bf16_forward(
// CHECK-NOT: "saved"
// CHECK-SAME: flexsn.kernel = "forward"
// CHECK-LABEL: func.func @lif_bf16_backward(
// CHECK-SAME: flexsn.role = "input"
// CHECK-SAME: flexsn.role = "state_seq"
// CHECK-NOT: "saved"
// CHECK-SAME: flexsn.kernel = "backward"
// CHECK-LABEL: func.func @lif_bf16_forward_final(
// CHECK-SAME: -> (tensor<?x?xbf16> {flexsn.index = 0 : i64, flexsn.role = "output"}, tensor<?xbf16> {flexsn.index = 0 : i64, flexsn.role = "final_state"}, tensor<?x?xbf16> {flexsn.index = 0 : i64, flexsn.role = "state_seq"})
// CHECK: flexsn.scan final_states ins({{.*}}) -> (tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?xbf16>)
// CHECK: %[[V:.*]] = arith.mulf
// CHECK: flexsn.yield %{{.*}}, %[[V]], %[[V]] : f32, f32, f32
// CHECK-LABEL: func.func @lif_bf16_backward_final(
// CHECK-SAME: flexsn.role = "input"
// CHECK-SAME: flexsn.role = "state_seq"
// CHECK-SAME: flexsn.role = "grad_final_state"
// CHECK-NOT: "grad_state_seq"
// CHECK-SAME: flexsn.kernel = "backward"
func.func @lif_bf16(%x: tensor<?x?xbf16>, %v0: tensor<?xbf16>)
    -> (tensor<?x?xbf16>, tensor<?x?xbf16>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xbf16>) states(%v0 : tensor<?xbf16>) -> (tensor<?x?xbf16>, tensor<?x?xbf16>) {
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
  return %s, %v : tensor<?x?xbf16>, tensor<?x?xbf16>
}

// -----

// bf16 inputs and f32 states stored as bf16 outside chunk borders
// (flexsn.state_storage): the cut weighs the state sequence at 2 bytes, as
// for @lif_bf16, and makes @lif_bf16's choice (no saved value; the backward
// reads x and the state sequence), with the kernels' f32 state types.
// Without the attribute the same scan saves h.
// CHECK-LABEL: func.func @lif_bf16_f32_states_forward_final(
// CHECK-SAME: -> (tensor<?x?xbf16> {flexsn.index = 0 : i64, flexsn.role = "output"}, tensor<?xf32> {flexsn.index = 0 : i64, flexsn.role = "final_state"}, tensor<?x?xf32> {flexsn.index = 0 : i64, flexsn.role = "state_seq"})
// CHECK-LABEL: func.func @lif_bf16_f32_states_backward_final(
// CHECK-SAME: flexsn.role = "input"
// CHECK-SAME: flexsn.role = "state_seq"
// CHECK-NOT: "saved"
// CHECK-SAME: flexsn.kernel = "backward"
// CHECK-LABEL: func.func @lif_f32_states_forward_final(
// CHECK-SAME: flexsn.role = "final_state"
// CHECK-SAME: tensor<?x?xf32> {flexsn.index = 0 : i64, flexsn.role = "saved"}
func.func @lif_bf16_f32_states(%x: tensor<?x?xbf16>, %v0: tensor<?xf32>)
    -> (tensor<?x?xbf16>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xbf16>) states(%v0 : tensor<?xf32>) attributes {flexsn.state_storage = bf16} -> (tensor<?x?xbf16>, tensor<?x?xf32>) {
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
  return %s, %v : tensor<?x?xbf16>, tensor<?x?xf32>
}
func.func @lif_f32_states(%x: tensor<?x?xbf16>, %v0: tensor<?xf32>)
    -> (tensor<?x?xbf16>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xbf16>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xbf16>, tensor<?x?xf32>) {
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
  return %s, %v : tensor<?x?xbf16>, tensor<?x?xf32>
}

// -----

// A state the backward needs directly (v' = v * x: its adjoint reads both):
// no cut avoids the state sequence, so nothing is saved (the sequences are
// written anyway), and the final-state pair writes that sequence too.
// CHECK-LABEL: func.func @gate_forward(
// CHECK-NOT: "saved"
// CHECK-SAME: flexsn.kernel = "forward"
// CHECK-LABEL: func.func @gate_backward(
// CHECK-SAME: flexsn.role = "input"
// CHECK-SAME: flexsn.role = "state_seq"
// CHECK-LABEL: func.func @gate_forward_final(
// CHECK-SAME: flexsn.role = "final_state"}, tensor<?x?xf32> {flexsn.index = 0 : i64, flexsn.role = "state_seq"})
// CHECK-LABEL: func.func @gate_backward_final(
// CHECK-SAME: flexsn.role = "state_seq"
// CHECK-SAME: flexsn.role = "grad_final_state"
func.func @gate(%x: tensor<?x?xf32>, %v0: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %p = arith.mulf %vt, %xt : f32
    flexsn.yield %p, %p : f32, f32
  }
  return %o, %v : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// An op marked flexsn.save stays saved under auto, beside the cut's choice
// (here the cut needs nothing more: the backward of a linear leak reads no
// value of the step, only constants).
// CHECK-LABEL: func.func @leak_forward(
// CHECK-SAME: flexsn.role = "saved"
// CHECK-NOT: "saved"
// CHECK-SAME: flexsn.kernel = "forward"
// CHECK-LABEL: func.func @leak_backward(
// CHECK-NOT: "input"
// CHECK-NOT: "state_seq"
// CHECK-SAME: flexsn.kernel = "backward"
// CHECK-LABEL: func.func @leak_forward_final(
// CHECK-SAME: flexsn.role = "final_state"
func.func @leak(%x: tensor<?x?xf32>, %v0: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c = arith.constant 0.5 : f32
    %d = arith.mulf %vt, %c {flexsn.save} : f32
    %h = arith.addf %d, %xt : f32
    flexsn.yield %h, %h : f32, f32
  }
  return %o, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
