// RUN: flexsn-opt %s --flexsn-differentiate --split-input-file --verify-diagnostics

// A body op without an adjoint rule is named.
func.func @no_rule(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>) {
  %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    // expected-error @+1 {{'math.sincos' op has no adjoint rule, so the scan cannot be differentiated}}
    %s, %c = math.sincos %xt : f32
    flexsn.yield %s : f32
  }
  return %v : tensor<?x?xf32>
}

// -----

func.func @reverse(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>) {
  // expected-error @+1 {{cannot be differentiated: it runs backwards in time (reverse)}}
  %v = flexsn.scan reverse ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %n = arith.addf %xt, %vt : f32
    flexsn.yield %n : f32
  }
  return %v : tensor<?x?xf32>
}

// -----

func.func @save_int(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>) {
  %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    // expected-error @+1 {{cannot be saved for the backward: only ops with one result of the compute type 'f32' can}}
    %c = arith.cmpf ogt, %xt, %vt {flexsn.save} : f32
    %n = arith.select %c, %xt, %vt : f32
    flexsn.yield %n : f32
  }
  return %v : tensor<?x?xf32>
}

// -----

// expected-error @+1 {{cannot be differentiated: a symbol named 'taken_forward' already exists}}
func.func @taken(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>) {
  %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %n = arith.addf %xt, %vt : f32
    flexsn.yield %n : f32
  }
  return %v : tensor<?x?xf32>
}
func.func @taken_forward() {
  return
}

// -----

// Integer-only ops need no rule; a float result without one is an error.
func.func @bitcast(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>) {
  %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %i = arith.bitcast %xt : f32 to i32
    %one = arith.constant 1 : i32
    %j = arith.addi %i, %one : i32
    // expected-error @+1 {{'arith.bitcast' op has no adjoint rule}}
    %f = arith.bitcast %j : i32 to f32
    flexsn.yield %f : f32
  }
  return %v : tensor<?x?xf32>
}

// -----

// The primal must be in kernel form.
func.func @not_kernel(%x: tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  %c = arith.constant 0.0 : f32
  %c1 = arith.constant 1 : index
  %n = tensor.dim %x, %c1 : tensor<?x?xf32>
  %v0 = tensor.empty(%n) : tensor<?xf32>
  // expected-error @+1 {{operand #1 must be an argument of the enclosing function}}
  %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %s = arith.addf %xt, %vt : f32
    flexsn.yield %s : f32
  }
  return %v : tensor<?x?xf32>
}

// -----

// A scalar param alone, and no result that takes a gradient: nothing the
// backward reads gives NCL for its zero-initialized accumulators.
func.func @no_neuron_count(%w: f32) -> (tensor<?x?xf32> {flexsn.no_grad}) {
  // expected-error @+1 {{cannot be differentiated: it reads no input, no state and no per-neuron param, and no result takes a gradient, so nothing gives the number of neurons}}
  %o = flexsn.scan params(%w : f32) -> (tensor<?x?xf32>) {
  ^bb0(%wt: f32):
    %y = arith.mulf %wt, %wt : f32
    flexsn.yield %y : f32
  }
  return %o : tensor<?x?xf32>
}
