// Smooth cores (no spike) in f64: the backward kernel's gradients of every
// input, initial state and parameter match central finite differences of
// the interpreter's forward (relative error <= 1e-6), and the independent
// reference adjoint. T in {0, 1, 5, 64}; state sequences and final states.
// RUN: flexsn-run %s --func=arith_core --variant=backward --check --T=5 --ncl=40 --seed=1 | FileCheck %s
// RUN: flexsn-run %s --func=arith_core --variant=backward --check --T=64 --ncl=33 --seed=2 | FileCheck %s
// RUN: flexsn-run %s --func=arith_core --variant=backward --check --T=1 --ncl=7 --seed=3 | FileCheck %s
// RUN: flexsn-run %s --func=arith_core --variant=backward --check --T=0 --ncl=7 --seed=3 | FileCheck %s --check-prefix=ZERO
// RUN: flexsn-run %s --func=math_core --variant=backward --check --T=5 --ncl=40 --seed=4 | FileCheck %s
// RUN: flexsn-run %s --func=math_core --variant=backward --check --T=64 --ncl=20 --seed=5 | FileCheck %s
// RUN: flexsn-run %s --func=math_core --variant=backward --check --T=1 --ncl=9 --seed=6 | FileCheck %s
// RUN: flexsn-run %s --func=final_core --variant=backward --check --T=5 --ncl=40 --seed=7 | FileCheck %s
// RUN: flexsn-run %s --func=final_core --variant=backward --check --T=64 --ncl=17 --seed=8 | FileCheck %s
// RUN: flexsn-run %s --func=recip_core --variant=backward --check --T=5 --ncl=40 --seed=9 | FileCheck %s
// RUN: flexsn-run %s --func=recip_core --variant=backward --check --T=64 --ncl=21 --seed=10 | FileCheck %s

// CHECK: finite differences, grad_input #0
// CHECK-SAME: ok
// CHECK: finite differences, grad_init_state #0
// CHECK-SAME: ok
// CHECK-NOT: FAIL
// CHECK: check: ok

// T = 0: no step; the initial-state gradient is the final-state gradient
// (here zero) and nothing is compared by finite differences.
// ZERO: kernel arith_core_backward: T=0
// ZERO-NOT: FAIL
// ZERO: check: ok

// Arithmetic family: add, sub, mul, div, neg, fma; a scalar and a
// per-neuron parameter. (Ops with kinks or jumps -- min/max, clamp, abs,
// floor, fmod, select -- are in piecewise.mlir: finite differences across a
// kink are not derivatives.)
func.func @arith_core(%x: tensor<?x?xf64>, %u: tensor<?x?xf64>,
                      %v0: tensor<?xf64>, %w0: tensor<?xf64>,
                      %p: f64, %q: tensor<?xf64>)
    -> (tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>) {
  %y, %v, %w = flexsn.scan ins(%x, %u : tensor<?x?xf64>, tensor<?x?xf64>)
      states(%v0, %w0 : tensor<?xf64>, tensor<?xf64>)
      params(%p, %q : f64, tensor<?xf64>)
      -> (tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>) {
  ^bb0(%xt: f64, %ut: f64, %vt: f64, %wt: f64, %pp: f64, %qq: f64):
    %half = arith.constant 0.5 : f64
    %c3 = arith.constant 3.0 : f64
    %a = arith.mulf %xt, %pp : f64
    %b = arith.addf %a, %vt : f64
    %c = arith.subf %b, %ut : f64
    %d = arith.mulf %c, %qq : f64
    %w2 = arith.mulf %wt, %wt : f64
    %den = arith.addf %c3, %w2 : f64
    %e = arith.divf %d, %den : f64
    %f = arith.negf %e : f64
    %fm = math.fma %f, %half, %b : f64
    %vn0 = arith.mulf %vt, %half : f64
    %vn1 = arith.mulf %fm, %half : f64
    %vn = arith.subf %vn0, %vn1 : f64
    %wn0 = arith.mulf %wt, %half : f64
    %wn = arith.addf %wn0, %e : f64
    %y = arith.mulf %vn, %e : f64
    flexsn.yield %y, %vn, %wn : f64, f64, f64
  }
  return %y, %v, %w : tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>
}

// Math family: exp, exp2, expm1, log, log2, log10, log1p, sqrt, rsqrt,
// tanh, sigmoid (as 1/(1+exp(-x))), sin, cos, atan, atan2, erf, pow with a
// per-neuron (tensor) exponent and with a constant exponent, fpowi.
func.func @math_core(%x: tensor<?x?xf64>, %v0: tensor<?xf64>,
                     %k: tensor<?xf64>) -> (tensor<?x?xf64>, tensor<?x?xf64>) {
  %y, %v = flexsn.scan ins(%x : tensor<?x?xf64>) states(%v0 : tensor<?xf64>)
      params(%k : tensor<?xf64>) -> (tensor<?x?xf64>, tensor<?x?xf64>) {
  ^bb0(%xt: f64, %vt: f64, %kk: f64):
    %one = arith.constant 1.0 : f64
    %tenth = arith.constant 0.1 : f64
    %c15 = arith.constant 1.5 : f64
    %n2 = arith.constant 2 : i32
    %a = arith.addf %xt, %vt : f64
    %a2 = arith.mulf %a, %a : f64
    %r = arith.addf %a2, %one : f64
    %e1 = math.exp %tenth : f64
    %na = arith.negf %a : f64
    %en = math.exp %na : f64
    %den = arith.addf %one, %en : f64
    %sig = arith.divf %one, %den : f64
    %e2 = math.exp2 %sig : f64
    %em = math.expm1 %sig : f64
    %l1 = math.log %r : f64
    %l2 = math.log2 %r : f64
    %l3 = math.log10 %r : f64
    %l4 = math.log1p %a2 : f64
    %s1 = math.sqrt %r : f64
    %s2 = math.rsqrt %r : f64
    %th = math.tanh %a : f64
    %sn = math.sin %a : f64
    %cs = math.cos %vt : f64
    %at = math.atan %a : f64
    %at2 = math.atan2 %xt, %r : f64
    %er = math.erf %th : f64
    %pw = math.powf %r, %kk : f64
    %pc = math.powf %r, %c15 : f64
    %pi = math.fpowi %a, %n2 : f64, i32
    %t1 = arith.addf %e2, %em : f64
    %t2 = arith.addf %l1, %l2 : f64
    %t3 = arith.addf %l3, %l4 : f64
    %t4 = arith.addf %s1, %s2 : f64
    %t5 = arith.mulf %sn, %cs : f64
    %t6 = arith.addf %at, %at2 : f64
    %t7 = arith.addf %er, %pw : f64
    %t8 = arith.mulf %pc, %e1 : f64
    %u1 = arith.addf %t1, %t2 : f64
    %u2 = arith.addf %t3, %t4 : f64
    %u3 = arith.addf %t5, %t6 : f64
    %u4 = arith.addf %t7, %t8 : f64
    %u5 = arith.addf %u1, %u2 : f64
    %u6 = arith.addf %u3, %u4 : f64
    %u7 = arith.addf %u5, %u6 : f64
    %u8 = arith.addf %u7, %pi : f64
    %half = arith.constant 0.5 : f64
    %c005 = arith.constant 0.05 : f64
    %small = arith.mulf %u8, %c005 : f64
    %bounded = math.tanh %small : f64
    %vh = arith.mulf %vt, %half : f64
    %vn = arith.addf %vh, %bounded : f64
    %y = arith.mulf %vn, %th : f64
    flexsn.yield %y, %vn : f64, f64
  }
  return %y, %v : tensor<?x?xf64>, tensor<?x?xf64>
}

// Final states only: the gradient of the final state seeds the carry.
func.func @final_core(%x: tensor<?x?xf64>, %v0: tensor<?xf64>, %tau: f64)
    -> (tensor<?x?xf64>, tensor<?xf64>) {
  %y, %v = flexsn.scan final_states ins(%x : tensor<?x?xf64>)
      states(%v0 : tensor<?xf64>) params(%tau : f64)
      -> (tensor<?x?xf64>, tensor<?xf64>) {
  ^bb0(%xt: f64, %vt: f64, %tt: f64):
    %two = arith.constant 2.0 : f64
    %s = arith.addf %tt, %two : f64
    %d = arith.subf %xt, %vt : f64
    %q = arith.divf %d, %s : f64
    %h = arith.addf %vt, %q : f64
    %y = math.tanh %h : f64
    flexsn.yield %y, %h : f64, f64
  }
  return %y, %v : tensor<?x?xf64>, tensor<?xf64>
}

// Reciprocals (numerator 1), whose adjoint is -(g*r)*r, a product: a plain
// one, 1/(1 + v*v), and sigmoid as the Python tracer writes it (one
// reciprocal shared by both branches of a select on x >= 0; smooth across
// the select, so finite differences apply).
func.func @recip_core(%x: tensor<?x?xf64>, %v0: tensor<?xf64>)
    -> (tensor<?x?xf64>, tensor<?x?xf64>) {
  %y, %v = flexsn.scan ins(%x : tensor<?x?xf64>) states(%v0 : tensor<?xf64>)
      -> (tensor<?x?xf64>, tensor<?x?xf64>) {
  ^bb0(%xt: f64, %vt: f64):
    %one = arith.constant 1.0 : f64
    %zero = arith.constant 0.0 : f64
    %sq = arith.mulf %vt, %vt : f64
    %d = arith.addf %sq, %one : f64
    %r = arith.divf %one, %d : f64
    %nonneg = arith.cmpf oge, %xt, %zero : f64
    %nx = arith.negf %xt : f64
    %z = arith.select %nonneg, %nx, %xt : f64
    %e = math.exp %z : f64
    %d2 = arith.addf %one, %e : f64
    %s = arith.divf %one, %d2 : f64
    %es = arith.mulf %e, %s : f64
    %sig = arith.select %nonneg, %s, %es : f64
    %sx = arith.mulf %sig, %vt : f64
    %vn = arith.addf %r, %sx : f64
    flexsn.yield %sig, %vn : f64, f64
  }
  return %y, %v : tensor<?x?xf64>, tensor<?x?xf64>
}
