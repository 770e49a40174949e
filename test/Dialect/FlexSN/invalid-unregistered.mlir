// Checks that need ops from no registered dialect (unknown effects,
// unknown terminators).
// RUN: flexsn-opt %s -split-input-file -verify-diagnostics --allow-unregistered-dialect

func.func @unknown_effects(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %o = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32):
    // expected-error @+1 {{'foo.op' op is not allowed in a flexsn.scan body: it has (or may have) side effects}}
    %b = "foo.op"(%a) : (f32) -> f32
    flexsn.yield %b : f32
  }
  return %o : tensor<?x?xf32>
}

// -----

func.func @foreign_terminator(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{body must end in 'flexsn.yield'}}
  %o = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32):
    "foo.terminator"(%a) : (f32) -> ()
  }
  return %o : tensor<?x?xf32>
}
