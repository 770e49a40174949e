// Saving policy and requires-grad, run end to end on the CPU.
// Saved intermediates (--save-ops, or flexsn.save on an op) are written by
// the training forward and read by the backward; gradients still match the
// reference adjoint. (With f16/bf16 storage a saved value keeps the
// forward's f32 value while a rematerialized one starts from the stored,
// rounded state, so the two policies differ by that rounding: these checks
// use f32 storage.)
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=backward --save-ops=math.exp,arith.subf --check --T=5 --ncl=999 --seed=1 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=backward --save-ops=arith.mulf --check --T=64 --ncl=100 --seed=2 | FileCheck %s
// The auto policy (a minimum cut: lif saves h and reads neither x nor the
// state sequence; two_in_two_state keeps rematerializing):
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=backward --save-ops=auto --check --T=9 --ncl=777 --seed=4 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --variant=backward --save-ops=auto --check --T=9 --ncl=777 --seed=5 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=backward --save-ops=auto --check --T=9 --ncl=777 --seed=6 | FileCheck %s
// The final-state pair (the forward writes final states, the backward takes
// their gradients), against the reference adjoint seeded by grad_final_state:
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=backward_final --save-ops=auto --check --T=9 --ncl=777 --seed=7 | FileCheck %s --check-prefix=FINAL
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --variant=backward_final --save-ops=auto --check --T=9 --ncl=777 --seed=8 | FileCheck %s --check-prefix=FINAL
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=forward_final --save-ops=auto --check --T=9 --ncl=777 --seed=9 | FileCheck %s --check-prefix=FFINAL
// A core whose backward reads its state sequences (two_in_two_state, and
// lif in bf16): the pair's forward writes those sequences besides the
// final states, and its backward reads them and the final states'
// gradients.
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=backward_final --save-ops=auto --check --T=9 --ncl=777 --seed=10 | FileCheck %s --check-prefix=SFINAL
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --dtype=bf16 --variant=backward_final --save-ops=auto --check --T=9 --ncl=777 --seed=11 | FileCheck %s --check-prefix=SFINAL
// SFINAL: kernel {{.*}}_backward_final
// SFINAL: state_seq #0 (training forward)
// SFINAL: final_state #0 (training forward)
// SFINAL: grad_input #0 vs reference adjoint
// SFINAL-NOT: FAIL
// SFINAL: check: ok
// FINAL: kernel lif{{.*}}_backward_final
// FINAL: final_state #0 (training forward)
// FINAL: grad_input #0 vs reference adjoint
// FINAL: grad_init_state #0 vs reference adjoint
// FINAL-NOT: FAIL
// FINAL: check: ok
// FFINAL: kernel lif_forward_final
// FFINAL: saved #0
// FFINAL: final_state #0
// FFINAL: check: ok
// RUN: flexsn-run %s --variant=backward --check --T=5 --ncl=1000 --seed=3 | FileCheck %s --check-prefix=NOGRAD
// RUN: flexsn-run %s --variant=forward --check --T=5 --ncl=1000 --seed=3 | FileCheck %s --check-prefix=SAVED

// CHECK: grad_input #0 vs reference adjoint
// CHECK-NOT: FAIL
// CHECK: check: ok

// x needs no gradient and the state sequence takes none: the backward
// writes only the initial state's and the parameter's gradients.
// NOGRAD: kernel masked_backward
// NOGRAD-NOT: grad_input
// NOGRAD: grad_init_state #0 vs reference adjoint
// NOGRAD-SAME: ok
// NOGRAD: grad_param #0 vs reference adjoint
// NOGRAD-SAME: ok
// NOGRAD: check: ok

// The op marked flexsn.save becomes a third result of the training forward.
// SAVED: kernel masked_forward
// SAVED: output #0
// SAVED: saved #0
// SAVED: state_seq #0
// SAVED: check: ok
func.func @masked(%x: tensor<?x?xf32> {flexsn.no_grad}, %v0: tensor<?xf32>, %b: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32> {flexsn.no_grad}) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) params(%b : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32, %bt: f32):
    %c1 = arith.constant 1.0 : f32
    %c09 = arith.constant 0.9 : f32
    %lv = arith.mulf %vt, %c09 : f32
    %h0 = arith.addf %lv, %xt : f32
    %h = arith.addf %h0, %bt {flexsn.save} : f32
    %hm = arith.subf %h, %c1 : f32
    %st = flexsn.spike %hm surrogate <erf> : f32
    %ns = arith.subf %c1, %st : f32
    %vn = arith.mulf %h, %ns : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
