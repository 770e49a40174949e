// RUN: flexsn-opt %s | FileCheck %s
// RUN: flexsn-opt %s | flexsn-opt | FileCheck %s
// RUN: flexsn-opt %s --mlir-print-op-generic | flexsn-opt | FileCheck %s

// CHECK-LABEL: func.func @lif_sequences
// CHECK: flexsn.scan ins(%{{.*}} : tensor<?x?xf32>) states(%{{.*}} : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>)
// CHECK: ^bb0(%[[X:.*]]: f32, %[[V:.*]]: f32):
// CHECK: %[[S:.*]] = flexsn.spike %{{.*}} surrogate <sigmoid, alpha = 4.000000e+00> : f32
// CHECK: flexsn.yield %[[S]], %{{.*}} : f32, f32
func.func @lif_sequences(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %one = arith.constant 1.0 : f32
    %h = arith.addf %vt, %xt : f32
    %hm = arith.subf %h, %one : f32
    %st = flexsn.spike %hm surrogate <sigmoid> : f32
    %k = arith.subf %one, %st : f32
    %vn = arith.mulf %h, %k : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}

// Final states, reverse, bf16/f16 storage, scalar and per-neuron params.
// CHECK-LABEL: func.func @mixed
// CHECK: flexsn.scan reverse final_states ins(%{{.*}} : tensor<?x?xbf16>) states(%{{.*}} : tensor<?xf16>) params(%{{.*}}, %{{.*}} : f32, tensor<?xf32>) -> (tensor<?x?xbf16>, tensor<?xf16>)
// CHECK: flexsn.detach %{{.*}} : f32
func.func @mixed(%x: tensor<?x?xbf16>, %v0: tensor<?xf16>, %a: f32, %b: tensor<?xf32>) -> (tensor<?x?xbf16>, tensor<?xf16>) {
  %y, %v = flexsn.scan reverse final_states ins(%x : tensor<?x?xbf16>) states(%v0 : tensor<?xf16>) params(%a, %b : f32, tensor<?xf32>) -> (tensor<?x?xbf16>, tensor<?xf16>) {
  ^bb0(%xt: f32, %vt: f32, %at: f32, %bt: f32):
    %m = arith.mulf %at, %vt : f32
    %n = arith.addf %m, %bt : f32
    %o = arith.addf %n, %xt : f32
    %d = flexsn.detach %o : f32
    flexsn.yield %d, %o : f32, f32
  }
  return %y, %v : tensor<?x?xbf16>, tensor<?xf16>
}

// f64 compute (gradient checks), static shapes, no inputs.
// CHECK-LABEL: func.func @f64_static
// CHECK: flexsn.scan states(%{{.*}} : tensor<8xf64>) -> (tensor<3x8xf64>)
// CHECK: ^bb0(%{{.*}}: f64):
func.func @f64_static(%v0: tensor<8xf64>) -> tensor<3x8xf64> {
  %v = flexsn.scan states(%v0 : tensor<8xf64>) -> (tensor<3x8xf64>) {
  ^bb0(%vt: f64):
    %c = arith.constant 0.5 : f64
    %vn = arith.mulf %vt, %c : f64
    flexsn.yield %vn : f64
  }
  return %v : tensor<3x8xf64>
}

// Every surrogate family, with defaults filled in by the parser.
// CHECK-LABEL: func.func @surrogates
// CHECK: surrogate <sigmoid, alpha = 4.000000e+00>
// CHECK: surrogate <atan, alpha = 2.000000e+00>
// CHECK: surrogate <piecewise_quadratic, alpha = 1.000000e+00>
// CHECK: surrogate <piecewise_exp, alpha = 1.000000e+00>
// CHECK: surrogate <soft_sign, alpha = 2.000000e+00>
// CHECK: surrogate <super_spike, alpha = 1.000000e+00>
// CHECK: surrogate <erf, alpha = 2.000000e+00>
// CHECK: surrogate <nonzero_sign_log_abs, alpha = 1.000000e+00>
// CHECK: surrogate <piecewise_leaky_relu, w = 1.000000e+00, c = 1.000000e-02>
// CHECK: surrogate <squarewave_fourier_series, n = 2.000000e+00, T_period = 8.000000e+00>
// CHECK: surrogate <s2nn, alpha = 4.000000e+00, beta = 1.000000e+00>
// CHECK: surrogate <q_pseudo_spike, alpha = 2.000000e+00>
// CHECK: surrogate <leaky_k_relu, leak = 0.000000e+00, k = 1.000000e+00>
// CHECK: surrogate <fake_numerical_gradient, alpha = 3.000000e-01>
// CHECK: surrogate <log_tailed_relu, alpha = 0.000000e+00>
// CHECK: surrogate <rect, alpha = 1.000000e+00>
// CHECK: surrogate <piecewise_leaky_relu, w = 5.000000e-01, c = 1.000000e-01>
// CHECK: surrogate <s2nn, alpha = 4.000000e+00, beta = 2.000000e+00>
// CHECK: surrogate <squarewave_fourier_series, n = 4.000000e+00, T_period = 8.000000e+00>
func.func @surrogates(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%h: f32):
    %0 = flexsn.spike %h surrogate <sigmoid> : f32
    %1 = flexsn.spike %h surrogate <atan> : f32
    %2 = flexsn.spike %h surrogate <piecewise_quadratic> : f32
    %3 = flexsn.spike %h surrogate <piecewise_exp> : f32
    %4 = flexsn.spike %h surrogate <soft_sign> : f32
    %5 = flexsn.spike %h surrogate <super_spike> : f32
    %6 = flexsn.spike %h surrogate <erf> : f32
    %7 = flexsn.spike %h surrogate <nonzero_sign_log_abs> : f32
    %8 = flexsn.spike %h surrogate <piecewise_leaky_relu> : f32
    %9 = flexsn.spike %h surrogate <squarewave_fourier_series> : f32
    %10 = flexsn.spike %h surrogate <s2nn> : f32
    %11 = flexsn.spike %h surrogate <q_pseudo_spike> : f32
    %12 = flexsn.spike %h surrogate <leaky_k_relu> : f32
    %13 = flexsn.spike %h surrogate <fake_numerical_gradient> : f32
    %14 = flexsn.spike %h surrogate <log_tailed_relu> : f32
    %15 = flexsn.spike %h surrogate <rect> : f32
    %16 = flexsn.spike %h surrogate <piecewise_leaky_relu, c = 0.1, w = 0.5> : f32
    %17 = flexsn.spike %h surrogate <s2nn, beta = 2> : f32
    %18 = flexsn.spike %h surrogate <squarewave_fourier_series, n = 4> : f32
    %a = arith.addf %0, %1 : f32
    %b = arith.addf %a, %2 : f32
    %c = arith.addf %b, %3 : f32
    %d = arith.addf %c, %4 : f32
    %e = arith.addf %d, %5 : f32
    %f = arith.addf %e, %6 : f32
    %g = arith.addf %f, %7 : f32
    %i = arith.addf %g, %8 : f32
    %j = arith.addf %i, %9 : f32
    %k = arith.addf %j, %10 : f32
    %l = arith.addf %k, %11 : f32
    %m = arith.addf %l, %12 : f32
    %n = arith.addf %m, %13 : f32
    %o = arith.addf %n, %14 : f32
    %p = arith.addf %o, %15 : f32
    %q = arith.addf %p, %16 : f32
    %r = arith.addf %q, %17 : f32
    %s = arith.addf %r, %18 : f32
    flexsn.yield %s : f32
  }
  return %y : tensor<?x?xf32>
}

// The surrogate attribute on its own, in its full form.
// CHECK-LABEL: func.func @attr_alone
// CHECK-SAME: sg = #flexsn.surrogate<erf, alpha = 3.000000e+00>
func.func @attr_alone() attributes {sg = #flexsn.surrogate<erf, alpha = 3.0>} {
  return
}

// A backward-style scan: lagged pair, zero-initialized carry, a scalar
// parameter's gradient summed over neurons.
// CHECK-LABEL: func.func @backward_form
// CHECK: flexsn.scan reverse final_states ins(%{{.*}} : tensor<?x?xf32>) lagged(%{{.*}} : tensor<?x?xf32>) lagged_init(%{{.*}} : tensor<?xf32>) states(%{{.*}}, %{{.*}} : tensor<?xf32>, tensor<?xf32>) params(%{{.*}} : f32) attributes {sum_states = array<i64: 1>} -> (tensor<?xf32>, tensor<f32>)
func.func @backward_form(%g: tensor<?x?xf32>, %vs: tensor<?x?xf32>, %v0: tensor<?xf32>, %w: f32) -> (tensor<?xf32>, tensor<f32>) {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f32
  %n = tensor.dim %v0, %c0 : tensor<?xf32>
  %zs = tensor.splat %z[%n] : tensor<?xf32>
  %a, %b = flexsn.scan reverse final_states ins(%g : tensor<?x?xf32>) lagged(%vs : tensor<?x?xf32>) lagged_init(%v0 : tensor<?xf32>) states(%zs, %zs : tensor<?xf32>, tensor<?xf32>) params(%w : f32) attributes {sum_states = array<i64: 1>} -> (tensor<?xf32>, tensor<f32>) {
  ^bb0(%gt: f32, %vp: f32, %c: f32, %acc: f32, %wt: f32):
    %m = arith.mulf %gt, %wt : f32
    %nc = arith.addf %c, %m : f32
    %p = arith.mulf %gt, %vp : f32
    %na = arith.addf %acc, %p : f32
    flexsn.yield %nc, %na : f32, f32
  }
  return %a, %b : tensor<?xf32>, tensor<f32>
}
