// RUN: flexsn-opt %s --flexsn-differentiate=save-ops=auto --split-input-file --verify-diagnostics

// The auto policy may add the final-state pair: its names must be free.
// expected-error @+1 {{cannot be differentiated: a symbol named 'taken_forward_final' already exists}}
func.func @taken(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>) {
  %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %n = arith.addf %xt, %vt : f32
    flexsn.yield %n : f32
  }
  return %v : tensor<?x?xf32>
}
func.func @taken_forward_final() {
  return
}

// -----

// A body op without an adjoint rule is named under auto as under the
// default policy (the cut is chosen only after that check).
func.func @no_rule(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>) {
  %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %i = arith.bitcast %xt : f32 to i32
    // expected-error @+1 {{'arith.bitcast' op has no adjoint rule, so the scan cannot be differentiated}}
    %f = arith.bitcast %i : i32 to f32
    %n = arith.addf %f, %vt : f32
    flexsn.yield %n : f32
  }
  return %v : tensor<?x?xf32>
}
