// Ops with kinks, jumps or no gradient: min/max (ties split), a clamp, abs,
// floor/ceil/round (zero gradient), fmod, select on a comparison, logic on
// comparisons, int casts (zero gradient), f16 round trips (extf/truncf).
// Checked against the reference adjoint, in f32 and f64 (finite differences
// off: across a kink they are not derivatives).
// RUN: flexsn-run %s --variant=backward --check --T=5 --ncl=1000 --seed=1 | FileCheck %s
// RUN: flexsn-run %s --variant=backward --check --T=64 --ncl=33 --seed=2 | FileCheck %s
// RUN: flexsn-run %s --variant=backward --check --T=5 --ncl=1000 --seed=3 --dtype=bf16 | FileCheck %s
// RUN: flexsn-run %s --variant=backward --check --T=64 --ncl=100 --seed=4 --dtype=f64 --finite-differences=false | FileCheck %s

// CHECK: grad_input #0 vs reference adjoint
// CHECK-SAME: ok
// CHECK: grad_input #1 vs reference adjoint
// CHECK-SAME: ok
// CHECK: grad_init_state #0 vs reference adjoint
// CHECK-SAME: ok
// CHECK-NOT: FAIL
// CHECK: check: ok

func.func @piecewise(%x: tensor<?x?xf32>, %u: tensor<?x?xf32>,
                     %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %y, %v = flexsn.scan ins(%x, %u : tensor<?x?xf32>, tensor<?x?xf32>)
      states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %ut: f32, %vt: f32):
    %zero = arith.constant 0.0 : f32
    %half = arith.constant 0.5 : f32
    %lo = arith.constant -0.5 : f32
    %hi = arith.constant 1.5 : f32
    %c17 = arith.constant 1.7 : f32
    %a = arith.addf %xt, %vt : f32
    %mx = arith.maximumf %a, %ut : f32
    %mn = arith.minimumf %a, %ut : f32
    %mxn = arith.maxnumf %mx, %lo : f32
    %clamp = arith.minnumf %mxn, %hi : f32
    %ab = math.absf %mn : f32
    %fl = math.floor %a : f32
    %ce = math.ceil %ut : f32
    %rd = math.round %xt : f32
    %fm = arith.remf %a, %c17 : f32
    %pos = arith.cmpf ogt, %xt, %ut : f32
    %neg = arith.cmpf olt, %vt, %zero : f32
    %both = arith.andi %pos, %neg : i1
    %either = arith.ori %pos, %neg : i1
    %sel = arith.select %both, %clamp, %ab : f32
    %sel2 = arith.select %either, %fm, %mn : f32
    %i = arith.fptosi %a : f32 to i32
    %back = arith.sitofp %i : i32 to f32
    %h = arith.truncf %sel2 : f32 to f16
    %hx = arith.extf %h : f16 to f32
    %t1 = arith.addf %sel, %hx : f32
    %t2 = arith.addf %fl, %ce : f32
    %t3 = arith.addf %rd, %back : f32
    %t4 = arith.mulf %t2, %t3 : f32
    %t5 = arith.mulf %t4, %half : f32
    %vh = arith.mulf %vt, %half : f32
    %t6 = arith.mulf %t1, %half : f32
    %vn = arith.addf %vh, %t6 : f32
    %y = arith.addf %t1, %t5 : f32
    flexsn.yield %y, %vn : f32, f32
  }
  return %y, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
