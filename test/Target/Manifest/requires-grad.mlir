// The manifest's requires-grad mask: over the primal's inputs, initial
// states and params, in that order, false where the argument carries
// flexsn.no_grad; every kernel made from the function (inference,
// final_state, the training forward and backward) gives its primal's mask.
// The CPU manifest has the same kernels without chip and launch geometry.
// RUN: flexsn-translate --flexsn-to-cpu-manifest --options=differentiate %s | FileCheck %s
// CHECK: "target": "cpu"
// CHECK-NOT: "chip"
// CHECK: "name": "f_inference"
// CHECK: "requires_grad": [
// CHECK-NEXT: false,
// CHECK-NEXT: true,
// CHECK-NEXT: true
// CHECK-NEXT: ]
// CHECK-NEXT: "args"
// CHECK: "name": "f_backward"
// CHECK-NEXT: "source": "f_backward"
// CHECK-NEXT: "primal": "f"
// CHECK: "requires_grad": [
// CHECK-NEXT: false,
// CHECK-NEXT: true,
// CHECK-NEXT: true
// CHECK-NEXT: ]
// The backward computes exactly the wanted gradients.
// CHECK-NOT: "meaning": "grad_input"
// CHECK: "meaning": "grad_init_state"
// CHECK: "meaning": "grad_param"
// CHECK-NOT: "block_size"

// The CUDA manifest adds the launch geometry the options chose.
// RUN: flexsn-translate --flexsn-to-manifest --options='block-size=128 neurons-per-thread=2' %s | FileCheck %s --check-prefix=CUDA
// CUDA: "chip": "sm_90"
// CUDA: "requires_grad": [
// CUDA: "block_size": 128
// CUDA-NEXT: "neurons_per_thread": 2
func.func @f(%x: tensor<?x?xf32> {flexsn.no_grad}, %v0: tensor<?xf32>, %tau: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) params(%tau : tensor<?xf32>)
      -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32, %taut: f32):
    %d = arith.subf %xt, %vt : f32
    %q = arith.divf %d, %taut : f32
    %h = arith.addf %vt, %q : f32
    flexsn.yield %h, %h : f32, f32
  }
  return %o, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
