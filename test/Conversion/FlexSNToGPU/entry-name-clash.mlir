// RUN: flexsn-opt %s -convert-flexsn-to-gpu -verify-diagnostics
// RUN: flexsn-opt %s -convert-flexsn-to-gpu="neurons-per-thread=1" | FileCheck %s

// At 4 neurons per thread, kernel @k needs a second entry @k_scalar, which
// another function's kernel already names. At one neuron per thread there
// is no second entry, so no clash:
// CHECK: gpu.func @k(
// CHECK: gpu.func @k_scalar(
// expected-error @+1 {{kernel 'k' needs a second GPU entry named 'k_scalar', which is the name of another kernel; rename one of the functions}}
func.func @k(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {flexsn.kernel = "backward"} {
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    flexsn.yield %xt : f32
  }
  return %y : tensor<?x?xf32>
}
func.func @k_scalar(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {flexsn.kernel = "backward"} {
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    flexsn.yield %xt : f32
  }
  return %y : tensor<?x?xf32>
}
