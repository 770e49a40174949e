// RUN: flexsn-translate --flexsn-to-manifest %flexsn_src_root/examples/plif.mlir | FileCheck %s
// CHECK: "format": "flexsn-manifest"
// CHECK: "chip": "sm_90"
// CHECK: "name": "plif_inference"
// CHECK-NEXT: "source": "plif"
// CHECK-NEXT: "variant": "inference"
// CHECK-NEXT: "reverse": false
// CHECK-NEXT: "compute_type": "f32"
// CHECK-NEXT: "num_inputs": 1
// CHECK-NEXT: "num_states": 1
// CHECK-NEXT: "num_outputs": 1
// CHECK-NEXT: "num_params": 1
// CHECK-NEXT: "block_size": 256
// CHECK-NEXT: "neurons_per_thread": 4
// CHECK: "args": [
// CHECK: "role": "input"
// CHECK: "role": "init_state"
// CHECK: "role": "param_scalar"
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
// RUN: flexsn-translate --flexsn-to-manifest --differentiate %flexsn_src_root/examples/plif.mlir | FileCheck %s --check-prefix=TRAIN
// TRAIN: "version": 2
// TRAIN: "name": "plif_forward"
// TRAIN-NEXT: "source": "plif_forward"
// TRAIN-NEXT: "primal": "plif"
// TRAIN-NEXT: "variant": "forward"
// TRAIN: "name": "plif_backward"
// TRAIN: "variant": "backward"
// TRAIN-NEXT: "reverse": true
// TRAIN: "role": "input"
// TRAIN: "meaning": "input"
// TRAIN: "role": "input"
// TRAIN: "meaning": "grad_output"
// TRAIN: "role": "input"
// TRAIN: "meaning": "grad_state_seq"
// TRAIN: "role": "lagged"
// TRAIN: "meaning": "state_seq"
// TRAIN: "role": "lagged_init"
// TRAIN: "meaning": "init_state"
// TRAIN: "role": "param_scalar"
// TRAIN: "meaning": "param"
// TRAIN: "role": "output"
// TRAIN: "meaning": "grad_input"
// TRAIN: "role": "final_state"
// TRAIN: "meaning": "grad_init_state"
// TRAIN: "role": "sum_state"
// TRAIN: "meaning": "grad_param"
// TRAIN-NEXT: "meaning_index": 0
// TRAIN-NEXT: "accumulate": true
