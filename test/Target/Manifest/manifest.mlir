// RUN: flexsn-translate --flexsn-to-manifest %flexsn_src_root/examples/plif.mlir | FileCheck %s
// CHECK: "format": "flexsn-manifest"
// CHECK-NEXT: "version": 4
// CHECK-NEXT: "target": "cuda"
// CHECK-NEXT: "chip": "sm_90"
// CHECK: "name": "plif_inference"
// CHECK-NEXT: "source": "plif"
// CHECK-NEXT: "variant": "inference"
// CHECK-NEXT: "reverse": false
// CHECK-NEXT: "compute_type": "f32"
// CHECK-NEXT: "num_inputs": 1
// CHECK-NEXT: "num_states": 1
// CHECK-NEXT: "num_outputs": 1
// CHECK-NEXT: "num_params": 1
// CHECK-NEXT: "num_pointers": 5
// CHECK-NEXT: "requires_grad": [
// CHECK-NEXT: true,
// CHECK-NEXT: true,
// CHECK-NEXT: true
// CHECK-NEXT: ],
// CHECK-NEXT: "block_size": 256
// CHECK-NEXT: "neurons_per_thread": 4
// The one-neuron-per-thread entry, and the rule for which entry a launch takes.
// CHECK-NEXT: "scalar_entry": "plif_inference_scalar"
// CHECK-NEXT: "entry": "`name` (neurons_per_thread per thread) when NCL is a multiple of neurons_per_thread, every [T, NCL] or [NCL] pointer is aligned to neurons_per_thread elements
// PLIF reads 4 bytes a step: a deep entry with 16 steps of reads in
// flight (64 bytes a thread), and when a launch takes it.
// CHECK-NEXT: "deep_entry": "plif_inference_deep"
// CHECK-NEXT: "deep_prefetch": 16
// CHECK-NEXT: "deep": "`deep_entry` (one neuron per thread, deep_prefetch steps of reads in flight) before the others when NCL is at most 512 per SM and T is at least 4 x deep_prefetch"
// CHECK: "args": [
// Each pointer's shape rule and byte size.
// CHECK: "role": "input"
// CHECK: "shape": "[T, NCL]"
// CHECK-NEXT: "bytes": "T * NCL * 4"
// An initial state may be null (the states start from zeros).
// CHECK: "role": "init_state"
// CHECK: "shape": "[NCL]"
// CHECK-NEXT: "bytes": "NCL * 4"
// CHECK-NEXT: "optional": true
// A scalar param is param #0 in the user's terms; its shape says scalar.
// CHECK: "role": "param_scalar"
// CHECK: "meaning": "param"
// CHECK-NEXT: "meaning_index": 0
// CHECK-NEXT: "shape": "[]"
// CHECK-NEXT: "bytes": "4"
// CHECK: "role": "output"
// CHECK: "role": "state_seq"
// CHECK: "role": "T"
// CHECK-NEXT: "index": 0
// CHECK-NEXT: "kind": "i64"
// CHECK: "role": "NCL"
// CHECK: "name": "plif_final_state"
// CHECK: "role": "final_state"

// With --differentiate: the training kernels, and what each pointer of the
// backward holds, in launch order. The scalar parameter's gradient is
// accumulated (the caller zeroes it).
// RUN: flexsn-translate --flexsn-to-manifest --options='differentiate' %flexsn_src_root/examples/plif.mlir | FileCheck %s --check-prefix=TRAIN
// TRAIN: "version": 4
// TRAIN: "name": "plif_forward"
// TRAIN-NEXT: "source": "plif_forward"
// TRAIN-NEXT: "primal": "plif"
// TRAIN-NEXT: "variant": "forward"
// TRAIN: "name": "plif_backward"
// TRAIN: "variant": "backward"
// TRAIN-NEXT: "reverse": true
// The backward reads 4 sequences a step (16 bytes): no deep entry.
// TRAIN: "scalar_entry": "plif_backward_scalar"
// TRAIN-NOT: "deep_entry"
// TRAIN: "threads":
// TRAIN: "role": "input"
// TRAIN: "meaning": "input"
// TRAIN-NOT: "optional"
// The gradients the backward reads may be null (read as zeros).
// TRAIN: "role": "input"
// TRAIN: "meaning": "grad_output"
// TRAIN: "bytes": "T * NCL * 4",
// TRAIN-NEXT: "optional": true
// TRAIN: "role": "input"
// TRAIN: "meaning": "grad_state_seq"
// TRAIN: "optional": true
// TRAIN: "role": "lagged"
// TRAIN: "meaning": "state_seq"
// TRAIN: "role": "lagged_init"
// TRAIN: "meaning": "init_state"
// TRAIN: "optional": true
// TRAIN-NEXT: }
// TRAIN: "role": "param_scalar"
// TRAIN: "meaning": "param"
// TRAIN: "role": "output"
// TRAIN: "meaning": "grad_input"
// TRAIN: "role": "final_state"
// TRAIN: "meaning": "grad_init_state"
// TRAIN: "role": "sum_state"
// TRAIN: "meaning": "grad_param"
// TRAIN-NEXT: "meaning_index": 0
// TRAIN-NEXT: "shape": "[]"
// TRAIN-NEXT: "bytes": "8"
// TRAIN-NEXT: "accumulate": true

// The manifest exists without CUDA (no libdevice needed) and for the CPU
// target the C API gives it too (test/CAPI).
// RUN: env CUDA_HOME=/nonexistent flexsn-translate --flexsn-to-manifest %flexsn_src_root/examples/plif.mlir | FileCheck %s --check-prefix=NOCUDA
// NOCUDA: "name": "plif_inference"

// A user's function keeps its ABI as written: the unused first input and
// first param still have their pointers, so input #1 is y and param #1 is q
// (canonicalization would otherwise renumber them).
// RUN: flexsn-translate --flexsn-to-manifest %s | FileCheck %s --check-prefix=UNUSED
// UNUSED: "name": "unused_inference"
// UNUSED: "num_inputs": 2
// UNUSED: "num_params": 2
// UNUSED: "meaning": "input"
// UNUSED-NEXT: "meaning_index": 0
// UNUSED: "meaning": "input"
// UNUSED-NEXT: "meaning_index": 1
// UNUSED: "meaning": "param"
// UNUSED-NEXT: "meaning_index": 0
// UNUSED: "meaning": "param"
// UNUSED-NEXT: "meaning_index": 1
func.func @unused(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %p: tensor<?xf32>, %q: tensor<?xf32>) -> tensor<?x?xf32> {
  %o = flexsn.scan ins(%x, %y : tensor<?x?xf32>, tensor<?x?xf32>) params(%p, %q : tensor<?xf32>, tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32, %yt: f32, %pt: f32, %qt: f32):
    %two = arith.constant 2.0 : f32
    %m = arith.mulf %yt, %two : f32
    %r = arith.addf %m, %qt : f32
    flexsn.yield %r : f32
  }
  return %o : tensor<?x?xf32>
}

// At one neuron per thread a kernel is one entry.
// RUN: flexsn-translate --flexsn-to-manifest --options='neurons-per-thread=1' %flexsn_src_root/examples/plif.mlir | FileCheck %s --check-prefix=W1
// W1: "neurons_per_thread": 1
// W1-NOT: scalar_entry
// W1: "deep_entry": "plif_inference_deep"
// An explicit prefetch depth holds for every entry: no deep entry.
// RUN: flexsn-translate --flexsn-to-manifest --options='prefetch=4' %flexsn_src_root/examples/plif.mlir | FileCheck %s --check-prefix=P4
// P4: "scalar_entry": "plif_inference_scalar"
// P4-NOT: deep
