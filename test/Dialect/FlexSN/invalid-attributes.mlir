// The dialect's discardable attributes are verified where they appear: one
// case per check (FlexSNDialect::verify{Operation,RegionArg,RegionResult}Attribute).
// RUN: flexsn-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'flexsn.kernel' must be "forward" or "backward", got "sideways"}}
func.func @f() attributes {flexsn.kernel = "sideways"} { return }

// -----

// expected-error @+1 {{'flexsn.kernel' belongs on a function}}
module attributes {flexsn.kernel = "forward"} {}

// -----

// expected-error @+1 {{'flexsn.primal' belongs on a function made by flexsn-differentiate (with 'flexsn.kernel')}}
func.func @f() attributes {flexsn.primal = @g} { return }
func.func @g() { return }

// -----

// expected-error @+1 {{'flexsn.primal' must be a symbol reference, got "g"}}
func.func @f() attributes {flexsn.kernel = "backward", flexsn.primal = "g"} { return }

// -----

// expected-error @+1 {{'flexsn.primal' names @missing, which does not exist}}
func.func @f() attributes {flexsn.kernel = "backward", flexsn.primal = @missing} { return }

// -----

// expected-error @+1 {{'flexsn.variant' must be "inference", "final_state", "forward" or "backward", got "fast"}}
func.func @k() attributes {flexsn.variant = "fast"} { return }

// -----

func.func @f(%x: f32) -> f32 {
  // expected-error @+1 {{'flexsn.save' belongs on an op of a flexsn.scan body}}
  %y = arith.addf %x, %x {flexsn.save} : f32
  return %y : f32
}

// -----

func.func @f(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    // expected-error @+1 {{'flexsn.save' must be a unit attribute}}
    %h = arith.addf %xt, %xt {flexsn.save = 1 : i64} : f32
    flexsn.yield %h : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

// expected-error @+1 {{'flexsn.role' belongs on a function argument or result}}
func.func @f() attributes {flexsn.role = "input"} { return }

// -----

// expected-error @+1 {{unknown attribute 'flexsn.colour' of the flexsn dialect (known: flexsn.kernel, flexsn.primal, flexsn.role, flexsn.index, flexsn.no_grad, flexsn.save, flexsn.variant, flexsn.affine_states, flexsn.state_reads, flexsn.chunk_width, flexsn.state_storage)}}
func.func @f() attributes {flexsn.colour = "red"} { return }

// -----

// expected-error @+1 {{argument #0: 'flexsn.role' must be one of input, init_state, param, output, state_seq, final_state, saved, grad_output, grad_state_seq, grad_final_state, grad_input, grad_init_state, grad_param, lagged, lagged_init, sum_state, got "gradient"}}
func.func @f(%x: tensor<?x?xf32> {flexsn.role = "gradient"}) { return }

// -----

// expected-error @+1 {{argument #1: 'flexsn.index' must be an i64 >= 0, got -1 : i64}}
func.func @f(%x: f32, %y: f32 {flexsn.index = -1 : i64}) { return }

// -----

// expected-error @+1 {{result #0: 'flexsn.index' must be an i64 >= 0, got "0"}}
func.func @f() -> (f32 {flexsn.index = "0"}) {
  %c = arith.constant 0.0 : f32
  return %c : f32
}

// -----

// expected-error @+1 {{argument #0: 'flexsn.no_grad' must be a unit attribute}}
func.func @f(%x: f32 {flexsn.no_grad = true}) { return }

// -----

// expected-error @+1 {{result #0: 'flexsn.save' belongs on an op, not on a function result}}
func.func @f() -> (f32 {flexsn.save}) {
  %c = arith.constant 0.0 : f32
  return %c : f32
}

// -----

// expected-error @+1 {{argument #0: unknown attribute 'flexsn.colour' of the flexsn dialect}}
func.func @f(%x: f32 {flexsn.colour = 1 : i64}) { return }

// -----

// Valid: what flexsn-differentiate writes.
func.func @p(%x: f32) { return }
func.func @p_backward(%g: tensor<?x?xf32> {flexsn.role = "grad_output", flexsn.index = 0 : i64},
                      %x: f32 {flexsn.no_grad})
    -> (tensor<?x?xf32> {flexsn.role = "grad_input", flexsn.index = 0 : i64})
    attributes {flexsn.kernel = "backward", flexsn.primal = @p} {
  return %g : tensor<?x?xf32>
}

// -----

// expected-error @+1 {{'flexsn.affine_states' belongs on a flexsn.scan}}
func.func @f() attributes {flexsn.affine_states = array<i1: true>} { return }

// -----

func.func @f(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'flexsn.affine_states' must be an array<i1> of 1 (one per state), got array<i1: true, false>}}
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {flexsn.affine_states = array<i1: true, false>} -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    flexsn.yield %xt, %vt : f32, f32
  }
  return %o : tensor<?x?xf32>
}

// -----

func.func @f(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'flexsn.state_reads' must be an array of 1 array<i64> (one per state), got [array<i64: 0>, array<i64: 0>]}}
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {flexsn.state_reads = [array<i64: 0>, array<i64: 0>]} -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    flexsn.yield %xt, %vt : f32, f32
  }
  return %o : tensor<?x?xf32>
}

// -----

func.func @f(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'flexsn.state_reads' entry #0 must be an array<i64>, got 0 : i64}}
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {flexsn.state_reads = [0]} -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    flexsn.yield %xt, %vt : f32, f32
  }
  return %o : tensor<?x?xf32>
}

// -----

func.func @f(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'flexsn.state_reads' entry #0 must list increasing state indices below 1, got array<i64: 1>}}
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {flexsn.state_reads = [array<i64: 1>]} -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    flexsn.yield %xt, %vt : f32, f32
  }
  return %o : tensor<?x?xf32>
}

// -----

// expected-error @+1 {{argument #0: 'flexsn.state_reads' belongs on an op, not on a function argument}}
func.func @f(%x: f32 {flexsn.state_reads = []}) { return }

// -----

// expected-error @+1 {{'flexsn.chunk_width' belongs on a flexsn.scan}}
func.func @f() attributes {flexsn.chunk_width = 8 : i64} { return }

// -----

func.func @f(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'flexsn.chunk_width' must be an i64 of at least 1 (the neurons of a chunk's row), got 0 : i64}}
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {flexsn.chunk_width = 0 : i64} -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    flexsn.yield %xt, %vt : f32, f32
  }
  return %o : tensor<?x?xf32>
}

// -----

func.func @f(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'flexsn.chunk_width' must be an i64 of at least 1 (the neurons of a chunk's row), got 8 : i32}}
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {flexsn.chunk_width = 8 : i32} -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    flexsn.yield %xt, %vt : f32, f32
  }
  return %o : tensor<?x?xf32>
}

// -----

// expected-error @+1 {{'flexsn.state_storage' belongs on a flexsn.scan}}
func.func @f() attributes {flexsn.state_storage = bf16} { return }

// -----

func.func @f(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'flexsn.state_storage' must be a float type (the states' storage outside chunk borders), got i16}}
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {flexsn.state_storage = i16} -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    flexsn.yield %xt, %vt : f32, f32
  }
  return %o : tensor<?x?xf32>
}

// -----

func.func @f(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'flexsn.state_storage' must be a float type (the states' storage outside chunk borders), got "bf16"}}
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {flexsn.state_storage = "bf16"} -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    flexsn.yield %xt, %vt : f32, f32
  }
  return %o : tensor<?x?xf32>
}
