// The surrogate derivative of every surrogate family (flexsn.spike's
// adjoint, built as arith/math ops by flexsn-differentiate) matches
// SurrogateAttr::derivative used by the reference adjoint. One output per
// family, each with its own random output gradient.
// RUN: flexsn-run %s --variant=backward --check --T=5 --ncl=2000 --seed=1 | FileCheck %s
// RUN: flexsn-run %s --variant=backward --check --T=16 --ncl=257 --seed=2 --dtype=bf16 | FileCheck %s
// RUN: flexsn-run %s --variant=backward --check --T=16 --ncl=257 --seed=3 --dtype=f64 | FileCheck %s

// CHECK: grad_input #0 vs reference adjoint
// CHECK-SAME: ok
// CHECK-NOT: FAIL
// CHECK: check: ok

func.func @surrogates(%x: tensor<?x?xf32>, %v0: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  %s0, %s1, %s2, %s3, %s4, %s5, %s6, %s7, %s8, %s9, %s10, %s11, %s12, %s13, %s14, %s15, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>)
      -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %d = arith.subf %xt, %vt : f32
    %q = arith.mulf %d, %half : f32
    %h = arith.addf %vt, %q : f32
    %hm = arith.subf %h, %one : f32
    %t0 = flexsn.spike %hm surrogate <sigmoid> : f32
    %t1 = flexsn.spike %hm surrogate <atan> : f32
    %t2 = flexsn.spike %hm surrogate <piecewise_quadratic, alpha = 0.8> : f32
    %t3 = flexsn.spike %hm surrogate <piecewise_exp> : f32
    %t4 = flexsn.spike %hm surrogate <soft_sign> : f32
    %t5 = flexsn.spike %hm surrogate <super_spike> : f32
    %t6 = flexsn.spike %hm surrogate <erf> : f32
    %t7 = flexsn.spike %hm surrogate <nonzero_sign_log_abs> : f32
    %t8 = flexsn.spike %hm surrogate <piecewise_leaky_relu, w = 0.6, c = 0.05> : f32
    %t9 = flexsn.spike %hm surrogate <squarewave_fourier_series, n = 4, T_period = 8.0> : f32
    %t10 = flexsn.spike %hm surrogate <s2nn> : f32
    %t11 = flexsn.spike %hm surrogate <q_pseudo_spike> : f32
    %t12 = flexsn.spike %hm surrogate <leaky_k_relu, leak = 0.1, k = 0.9> : f32
    %t13 = flexsn.spike %hm surrogate <fake_numerical_gradient> : f32
    %t14 = flexsn.spike %hm surrogate <log_tailed_relu, alpha = 0.1> : f32
    %t15 = flexsn.spike %hm surrogate <rect> : f32
    %keep = arith.subf %one, %t0 : f32
    %vn = arith.mulf %h, %keep : f32
    flexsn.yield %t0, %t1, %t2, %t3, %t4, %t5, %t6, %t7, %t8, %t9, %t10, %t11, %t12, %t13, %t14, %t15, %vn : f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32
  }
  return %s0, %s1, %s2, %s3, %s4, %s5, %s6, %s7, %s8, %s9, %s10, %s11, %s12, %s13, %s14, %s15, %v : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}
