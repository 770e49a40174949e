// LIF with soft reset and detach_reset off (the reset's gradient flows
// through the spike's surrogate), next to examples/lif_soft_detach.mlir
// (detach on); and a core with a non-differentiable output, which the
// backward does not read. Both against the reference adjoint.
// RUN: flexsn-run %s --func=lif_soft --variant=backward --check --T=5 --ncl=1000 --seed=1 | FileCheck %s
// RUN: flexsn-run %s --func=lif_soft --variant=backward --check --T=64 --ncl=257 --dtype=bf16 --seed=2 | FileCheck %s
// RUN: flexsn-run %s --func=lif_soft --variant=backward --check --T=0 --ncl=9 --seed=3 | FileCheck %s
// RUN: flexsn-run %s --func=with_marker --variant=backward --check --T=5 --ncl=1000 --seed=4 | FileCheck %s
// RUN: flexsn-run %s --func=with_marker --variant=backward --check --T=64 --ncl=100 --dtype=bf16 --seed=5 | FileCheck %s
// RUN: flexsn-translate --flexsn-to-manifest --options='differentiate' %s | FileCheck %s --check-prefix=MANIFEST

// CHECK: grad_input #0 vs reference adjoint
// CHECK-SAME: ok
// CHECK: grad_init_state #0 vs reference adjoint
// CHECK-SAME: ok
// CHECK: check: ok

// The marker output (#1) is detached: with_marker_backward reads the
// gradient of output #0 only.
// MANIFEST: "name": "with_marker_backward"
// MANIFEST: "meaning": "grad_output"
// MANIFEST-NEXT: "meaning_index": 0
// MANIFEST-NOT: "meaning_index": 1
// MANIFEST: "role": "NCL"

func.func @lif_soft(%x: tensor<?x?xf32>, %v0: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %half = arith.constant 0.5 : f32
    %vth = arith.constant 1.0 : f32
    %lv = arith.mulf %vt, %half : f32
    %h = arith.addf %lv, %xt : f32
    %hm = arith.subf %h, %vth : f32
    %st = flexsn.spike %hm surrogate <sigmoid, alpha = 4.0> : f32
    %r = arith.mulf %st, %vth : f32
    %vn = arith.subf %h, %r : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}

func.func @with_marker(%x: tensor<?x?xf32>, %v0: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %m, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %half = arith.constant 0.5 : f32
    %vth = arith.constant 1.0 : f32
    %lv = arith.mulf %vt, %half : f32
    %h = arith.addf %lv, %xt : f32
    %hm = arith.subf %h, %vth : f32
    %st = flexsn.spike %hm surrogate <atan> : f32
    %hd = flexsn.detach %h : f32
    %mark = arith.mulf %hd, %hd : f32
    %keep = arith.subf %vth, %st : f32
    %vn = arith.mulf %h, %keep : f32
    flexsn.yield %st, %mark, %vn : f32, f32, f32
  }
  return %s, %m, %v : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}
