// RUN: flexsn-opt %s -split-input-file -convert-flexsn-to-gpu -verify-diagnostics
// RUN: flexsn-opt %s -split-input-file -convert-flexsn-to-gpu="neurons-per-thread=1 prefetch=4" | FileCheck %s

// At 4 neurons per thread, kernel @k needs a second entry @k_scalar, which
// another function's kernel already names. At one neuron per thread there
// is no second entry, and with an explicit prefetch no deep entry, so no
// clash:
// CHECK: gpu.func @k(
// CHECK: gpu.func @k_scalar(
// expected-error @+1 {{kernel 'k' needs a GPU entry named 'k_scalar', which is the name of another kernel; rename one of the functions}}
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

// -----

// A kernel reading 4 bytes a step has a deep entry (16 steps of reads in
// flight), @k_deep, which another function's kernel names here.
// CHECK: gpu.func @k(
// CHECK: gpu.func @k_deep(
// expected-error @+1 {{kernel 'k' needs a GPU entry named 'k_deep', which is the name of another kernel; rename one of the functions}}
func.func @k(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {flexsn.kernel = "backward"} {
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    flexsn.yield %xt : f32
  }
  return %y : tensor<?x?xf32>
}
func.func @k_deep(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {flexsn.kernel = "backward"} {
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    flexsn.yield %xt : f32
  }
  return %y : tensor<?x?xf32>
}
