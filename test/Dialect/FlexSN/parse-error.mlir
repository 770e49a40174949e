// Malformed input gives a located diagnostic and a failing exit code.
// RUN: not flexsn-opt %s 2>&1 | FileCheck %s
// CHECK: parse-error.mlir:[[@LINE+3]]:{{[0-9]+}}: error: expected ')'
func.func @bad(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32:
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xf32>
}
