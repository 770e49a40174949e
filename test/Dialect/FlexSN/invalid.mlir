// RUN: flexsn-opt %s -split-input-file -verify-diagnostics

func.func @input_rank(%x: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'flexsn.scan' op input #0 must be a rank-2 tensor [T, NCL], got 'tensor<?xf32>'}}
  %y = flexsn.scan ins(%x : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @input_storage(%x: tensor<?x?xi32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{input #0 must be stored as f16, bf16, f32 or f64, got 'i32'}}
  %y = flexsn.scan ins(%x : tensor<?x?xi32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @state_rank(%v: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{initial state #0 must be a rank-1 tensor [NCL], got 'tensor<?x?xf32>'}}
  %y = flexsn.scan states(%v : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @param_scalar_type(%x: tensor<?x?xf32>, %p: i32) -> tensor<?x?xf32> {
  // expected-error @+1 {{param #0 must be a float scalar (f16, bf16, f32, f64) or a per-neuron tensor [NCL], got 'i32'}}
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) params(%p : i32) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @param_tensor_rank(%x: tensor<?x?xf32>, %p: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{param #0 must be a rank-1 tensor [NCL], got 'tensor<?x?xf32>'}}
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) params(%p : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @fewer_results_than_states(%v: tensor<?xf32>, %w: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{has 1 result(s), fewer than its 2 state(s)}}
  %y = flexsn.scan states(%v, %w : tensor<?xf32>, tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @no_results(%x: tensor<?x?xf32>) {
  // expected-error @+1 {{produces nothing: it needs at least one output or state}}
  "flexsn.scan"(%x) <{operandSegmentSizes = array<i32: 1, 0, 0, 0, 0>}> ({
  ^bb0(%a: f32):
    flexsn.yield
  }) : (tensor<?x?xf32>) -> ()
  return
}

// -----

func.func @output_rank(%x: tensor<?x?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{output #0 must be a rank-2 tensor [T, NCL], got 'tensor<?xf32>'}}
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?xf32>
}

// -----

func.func @state_sequence_rank(%v: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{state result #0 (a state sequence) must be a rank-2 tensor [T, NCL], got 'tensor<?xf32>'}}
  %y = flexsn.scan states(%v : tensor<?xf32>) -> (tensor<?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?xf32>
}

// -----

func.func @final_state_rank(%v: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{state result #0 (final_states) must be a rank-1 tensor [NCL], got 'tensor<?x?xf32>'}}
  %y = flexsn.scan final_states states(%v : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @output_storage(%x: tensor<?x?xf32>) -> tensor<?x?xi8> {
  // expected-error @+1 {{output #0 must be stored as f16, bf16, f32 or f64, got 'i8'}}
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xi8>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xi8>
}

// -----

func.func @state_storage_changes(%v: tensor<?xf32>) -> tensor<?x?xbf16> {
  // expected-error @+1 {{state result #0 is stored as 'bf16' but initial state #0 as 'f32'; a state keeps its storage type}}
  %y = flexsn.scan states(%v : tensor<?xf32>) -> (tensor<?x?xbf16>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xbf16>
}

// -----

func.func @time_mismatch(%x: tensor<4x8xf32>, %y: tensor<5x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{time dimension (T) mismatch: input #0 has 4 but input #1 has 5}}
  %o = flexsn.scan ins(%x, %y : tensor<4x8xf32>, tensor<5x8xf32>) -> (tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return %o : tensor<4x8xf32>
}

// -----

func.func @neuron_mismatch(%x: tensor<4x8xf32>, %v: tensor<7xf32>) -> (tensor<4x8xf32>, tensor<4x7xf32>) {
  // expected-error @+1 {{neuron dimension (NCL) mismatch: input #0 has 8 but initial state #0 has 7}}
  %o, %s = flexsn.scan ins(%x : tensor<4x8xf32>) states(%v : tensor<7xf32>) -> (tensor<4x8xf32>, tensor<4x7xf32>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a, %b : f32, f32
  }
  return %o, %s : tensor<4x8xf32>, tensor<4x7xf32>
}

// -----

func.func @result_time_mismatch(%x: tensor<4x8xf32>) -> tensor<3x8xf32> {
  // expected-error @+1 {{time dimension (T) mismatch: input #0 has 4 but output #0 has 3}}
  %o = flexsn.scan ins(%x : tensor<4x8xf32>) -> (tensor<3x8xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return %o : tensor<3x8xf32>
}

// -----

func.func @body_arity(%x: tensor<?x?xf32>, %v: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  // expected-error @+1 {{body has 1 argument(s), but the scan has 1 input(s) + 1 state(s) + 0 param(s) = 2}}
  %o, %s = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a, %a : f32, f32
  }
  return %o, %s : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

func.func @compute_type(%x: tensor<?x?xf16>) -> tensor<?x?xf16> {
  // expected-error @+1 {{body computes in 'f16'; the compute type must be f32 or f64}}
  %o = flexsn.scan ins(%x : tensor<?x?xf16>) -> (tensor<?x?xf16>) {
  ^bb0(%a: f16):
    flexsn.yield %a : f16
  }
  return %o : tensor<?x?xf16>
}

// -----

func.func @mixed_compute_types(%x: tensor<?x?xf32>, %v: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  // expected-error @+1 {{body argument #1 has type 'f64' but argument #0 has 'f32'; all body arguments share the compute type}}
  %o, %s = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f64):
    flexsn.yield %a, %a : f32, f32
  }
  return %o, %s : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

func.func @yield_arity(%x: tensor<?x?xf32>, %v: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %o, %s = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    // expected-error @+1 {{yields 1 value(s), but the scan has 1 output(s) + 1 state(s) = 2}}
    flexsn.yield %a : f32
  }
  return %o, %s : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

func.func @yield_type(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %o = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32):
    %b = arith.fptosi %a : f32 to i32
    // expected-error @+1 {{value #0 has type 'i32'; yielded values must have the compute type 'f32'}}
    flexsn.yield %b : i32
  }
  return %o : tensor<?x?xf32>
}

// -----

func.func @body_region(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %o = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32):
    // expected-error @+1 {{'tensor.generate' op is not allowed in a flexsn.scan body: the body is straight-line scalar code without nested regions}}
    %t = tensor.generate {
    ^bb1(%i: index):
      %c = arith.constant 0.0 : f32
      tensor.yield %c : f32
    } : tensor<4xf32>
    flexsn.yield %a : f32
  }
  return %o : tensor<?x?xf32>
}

// -----

func.func private @ext(f32) -> f32

func.func @body_side_effect(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %o = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32):
    // expected-error @+1 {{'func.call' op is not allowed in a flexsn.scan body: it has (or may have) side effects}}
    %b = func.call @ext(%a) : (f32) -> f32
    flexsn.yield %b : f32
  }
  return %o : tensor<?x?xf32>
}

// -----

func.func @body_not_scalar(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %o = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32):
    // expected-error @+1 {{'tensor.from_elements' op is not allowed in a flexsn.scan body: it uses a value of type 'tensor<1xf32>'; the body is elementwise, on scalars only}}
    %t = tensor.from_elements %a : tensor<1xf32>
    flexsn.yield %a : f32
  }
  return %o : tensor<?x?xf32>
}

// -----

func.func @captures_outer_value(%x: tensor<?x?xf32>, %c: f32) -> tensor<?x?xf32> {
  // expected-note @+1 {{required by region isolation constraints}}
  %o = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32):
    // expected-error @+1 {{using value defined outside the region}}
    %b = arith.addf %a, %c : f32
    flexsn.yield %b : f32
  }
  return %o : tensor<?x?xf32>
}

// -----

func.func @yield_outside_scan(%a: f32) {
  // expected-error @+1 {{'flexsn.yield' op expects parent op 'flexsn.scan'}}
  flexsn.yield %a : f32
}

// -----

func.func @spike_types(%a: f32) -> f64 {
  // expected-error @+1 {{custom op 'flexsn.spike' expected 'surrogate'}}
  %s = flexsn.spike %a, %a surrogate <atan> : f32
  return %s : f64
}

// -----

func.func @spike_int(%a: i32) -> i32 {
  // expected-error @+1 {{custom op 'flexsn.spike' invalid kind of type specified}}
  %s = flexsn.spike %a surrogate <atan> : i32
  return %s : i32
}

// -----

func.func @detach_int(%a: i32) -> i32 {
  // expected-error @+1 {{custom op 'flexsn.detach' invalid kind of type specified}}
  %s = flexsn.detach %a : i32
  return %s : i32
}

// -----

func.func @spike_generic_int(%a: i32) -> i32 {
  // expected-error @+1 {{'flexsn.spike' op operand #0 must be floating-point, but got 'i32'}}
  %s = "flexsn.spike"(%a) <{surrogate = #flexsn.surrogate<atan>}> : (i32) -> i32
  return %s : i32
}

// -----

func.func @spike_generic_result_type(%a: f32) -> f64 {
  // expected-error @+1 {{'flexsn.spike' op requires the same type for all operands and results}}
  %s = "flexsn.spike"(%a) <{surrogate = #flexsn.surrogate<atan>}> : (f32) -> f64
  return %s : f64
}

// -----

func.func @spike_missing_surrogate(%a: f32) -> f32 {
  // expected-error @+1 {{'flexsn.spike' op requires attribute 'surrogate'}}
  %s = "flexsn.spike"(%a) : (f32) -> f32
  return %s : f32
}

// -----

func.func @unknown_surrogate(%a: f32) -> f32 {
  // expected-error @+1 {{unknown surrogate 'tanh'; expected one of: sigmoid, atan, piecewise_quadratic, piecewise_exp, soft_sign, super_spike, erf, nonzero_sign_log_abs, piecewise_leaky_relu, squarewave_fourier_series, s2nn, q_pseudo_spike, leaky_k_relu, fake_numerical_gradient, log_tailed_relu, rect}}
  %s = flexsn.spike %a surrogate <tanh> : f32
  return %s : f32
}

// -----

func.func @unknown_param(%a: f32) -> f32 {
  // expected-error @+1 {{surrogate 'atan' has no parameter 'beta'; its parameters are: alpha}}
  %s = flexsn.spike %a surrogate <atan, beta = 1.0> : f32
  return %s : f32
}

// -----

func.func @param_twice(%a: f32) -> f32 {
  // expected-error @+1 {{parameter 'alpha' given twice}}
  %s = flexsn.spike %a surrogate <atan, alpha = 1.0, alpha = 2.0> : f32
  return %s : f32
}

// -----

func.func @param_not_number(%a: f32) -> f32 {
  // expected-error @+1 {{surrogate parameter 'alpha' must be a number}}
  %s = flexsn.spike %a surrogate <atan, alpha = "big"> : f32
  return %s : f32
}

// -----

func.func @alpha_positive(%a: f32) -> f32 {
  // expected-error @+1 {{surrogate 'sigmoid' parameter 'alpha' must be > 0, got 0}}
  %s = flexsn.spike %a surrogate <sigmoid, alpha = 0.0> : f32
  return %s : f32
}

// -----

func.func @q_alpha(%a: f32) -> f32 {
  // expected-error @+1 {{surrogate 'q_pseudo_spike' parameter 'alpha' must be > 1, got 1}}
  %s = flexsn.spike %a surrogate <q_pseudo_spike, alpha = 1.0> : f32
  return %s : f32
}

// -----

func.func @squarewave_n(%a: f32) -> f32 {
  // expected-error @+1 {{surrogate 'squarewave_fourier_series' parameter 'n' must be an integer >= 1, got 2.5}}
  %s = flexsn.spike %a surrogate <squarewave_fourier_series, n = 2.5> : f32
  return %s : f32
}

// -----

func.func @leaky_w(%a: f32) -> f32 {
  // expected-error @+1 {{surrogate 'piecewise_leaky_relu' parameter 'w' must be > 0, got -1}}
  %s = flexsn.spike %a surrogate <piecewise_leaky_relu, w = -1> : f32
  return %s : f32
}

// -----

func.func @lagged_pairs(%x: tensor<?x?xf32>, %l: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{has 1 lagged sequence(s) but 0 lagged_init value(s); they come in pairs}}
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) lagged(%l : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @lagged_types(%x: tensor<?x?xf32>, %l: tensor<?x?xf32>, %l0: tensor<?xbf16>) -> tensor<?x?xf32> {
  // expected-error @+1 {{lagged #0 is stored as 'f32' but its lagged_init as 'bf16'; a lagged pair shares its storage type}}
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) lagged(%l : tensor<?x?xf32>) lagged_init(%l0 : tensor<?xbf16>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @lagged_rank(%x: tensor<?x?xf32>, %l: tensor<?xf32>, %l0: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{lagged #0 must be a rank-2 tensor [T, NCL], got 'tensor<?xf32>'}}
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) lagged(%l : tensor<?xf32>) lagged_init(%l0 : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @lagged_args(%x: tensor<?x?xf32>, %l: tensor<?x?xf32>, %l0: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{body has 1 argument(s), but the scan has 1 input(s) + 1 lagged pair(s) + 0 state(s) + 0 param(s) = 2}}
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) lagged(%l : tensor<?x?xf32>) lagged_init(%l0 : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @sum_needs_final(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{sum_states needs final_states}}
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {sum_states = array<i64: 0>} -> (tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @sum_index(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<f32> {
  // expected-error @+1 {{sum_states must list state indices in increasing order, each below the number of states (1), got 1}}
  %y = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {sum_states = array<i64: 1>} -> (tensor<f32>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<f32>
}

// -----

func.func @sum_rank(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{state result #0 is in sum_states and must be a rank-0 tensor of f32 or f64, got 'tensor<?xf32>'}}
  %y = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {sum_states = array<i64: 0>} -> (tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<?xf32>
}

// -----

func.func @sum_compute(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<f64> {
  // expected-error @+1 {{state result #0 is in sum_states and must be a rank-0 tensor of the compute type 'f32', got 'tensor<f64>'}}
  %y = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {sum_states = array<i64: 0>} -> (tensor<f64>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return %y : tensor<f64>
}
