// Adjoint rules by family, as flexsn-differentiate emits them in the
// backward body (after the recomputed step). Numerical checks of every rule
// are in test/Integration/Autodiff.
// RUN: flexsn-opt %s --flexsn-differentiate --split-input-file | FileCheck %s

// Product and quotient rules: d(x*v) = g*v, g*x; d(x/v) = g/v, -(g*r)/v.
// CHECK-LABEL: func.func @mul_div_backward(
// CHECK: ^bb0(%[[X:.*]]: f32, %[[GY:.*]]: f32, %[[V:.*]]: f32, %[[C:.*]]: f32):
// CHECK-DAG: %[[R:.*]] = arith.divf %[[X]], %[[V]] : f32
// CHECK-DAG: arith.mulf %{{.*}}, %[[V]] : f32
// CHECK-DAG: arith.divf %{{.*}}, %[[V]] : f32
// CHECK-DAG: arith.mulf %{{.*}}, %[[R]] : f32
func.func @mul_div(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %y, %v = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %m = arith.mulf %xt, %vt : f32
    %r = arith.divf %xt, %vt : f32
    flexsn.yield %m, %r : f32, f32
  }
  return %y, %v : tensor<?x?xf32>, tensor<?xf32>
}

// -----

// A reciprocal (numerator 1) takes no division in the backward: d(1/v) =
// -(g*r)*r; the only divf left is the recomputed forward's.
// CHECK-LABEL: func.func @reciprocal_backward(
// CHECK: ^bb0(%{{.*}}: f32, %[[V:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[R:.*]] = arith.divf %{{.*}}, %[[V]] : f32
// CHECK-NOT: arith.divf
// CHECK: %[[GR:.*]] = arith.mulf %{{.*}}, %[[R]] : f32
// CHECK: arith.mulf %[[GR]], %[[R]] : f32
// CHECK-NOT: arith.divf
// CHECK: flexsn.yield
func.func @reciprocal(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %y, %v = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %one = arith.constant 1.000000e+00 : f32
    %r = arith.divf %one, %vt : f32
    %n = arith.addf %r, %xt : f32
    flexsn.yield %r, %n : f32, f32
  }
  return %y, %v : tensor<?x?xf32>, tensor<?xf32>
}

// -----

// exp reuses its result; tanh uses 1 - r*r.
// CHECK-LABEL: func.func @transcendental_backward(
// CHECK: %[[E:.*]] = math.exp
// CHECK: %[[T:.*]] = math.tanh
// CHECK-DAG: arith.mulf %{{.*}}, %[[E]] : f32
// CHECK-DAG: arith.mulf %[[T]], %[[T]] : f32
func.func @transcendental(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %y, %v = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %e = math.exp %xt : f32
    %t = math.tanh %vt : f32
    %s = arith.addf %e, %t : f32
    flexsn.yield %s, %t : f32, f32
  }
  return %y, %v : tensor<?x?xf32>, tensor<?xf32>
}

// -----

// select routes the gradient by its condition (the recomputed select
// itself is dead and removed); the comparison takes none.
// CHECK-LABEL: func.func @select_backward(
// CHECK: %[[CMP:.*]] = arith.cmpf ogt
// CHECK: %[[G:.*]] = arith.addf
// CHECK: %[[GT:.*]] = arith.select %[[CMP]], %[[G]], %[[ZERO:.*]] : f32
// CHECK: %[[GF:.*]] = arith.select %[[CMP]], %[[ZERO]], %[[G]] : f32
// CHECK: flexsn.yield %[[GT]], %[[GF]] : f32, f32
func.func @select(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %y, %v = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c = arith.cmpf ogt, %xt, %vt : f32
    %s = arith.select %c, %xt, %vt : f32
    flexsn.yield %s, %s : f32, f32
  }
  return %y, %v : tensor<?x?xf32>, tensor<?xf32>
}

// -----

// Casts: the gradient of an f16 round trip is rounded to f16 on the way
// back (extf's adjoint is truncf, truncf's is extf).
// CHECK-LABEL: func.func @casts_backward(
// CHECK: %[[G16:.*]] = arith.truncf %{{.*}} : f32 to f16
// CHECK: arith.extf %[[G16]] : f16 to f32
func.func @casts(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %y, %v = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %h = arith.truncf %xt : f32 to f16
    %b = arith.extf %h : f16 to f32
    %s = arith.addf %b, %vt : f32
    flexsn.yield %s, %s : f32, f32
  }
  return %y, %v : tensor<?x?xf32>, tensor<?xf32>
}

// -----

// Spike: the atan surrogate's derivative alpha/2 / (1 + (pi/2 alpha x)^2);
// detach: no gradient, so the state's reset path contributes nothing and
// the detached output takes no gradient input.
// CHECK-LABEL: func.func @spike_detach_backward(
// CHECK-SAME: flexsn.role = "grad_output"
// CHECK-NOT: flexsn.index = 1 : i64, flexsn.role = "grad_output"
// CHECK-DAG: arith.constant 3.14159274 : f32
// CHECK-DAG: arith.constant 1.000000e+00 : f32
// CHECK: flexsn.yield
func.func @spike_detach(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>) {
  %y, %d, %v = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %h = arith.addf %xt, %vt : f32
    %s = flexsn.spike %h surrogate <atan, alpha = 2.0> : f32
    %sd = flexsn.detach %s : f32
    %vn = arith.subf %h, %sd : f32
    flexsn.yield %s, %sd, %vn : f32, f32, f32
  }
  return %y, %d, %v : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>
}
