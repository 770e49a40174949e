// RUN: flexsn-opt %s --flexsn-affine-transfer=replace --split-input-file -verify-diagnostics

// Nothing to build a chunked parallel scan from: the only scan resets its
// state through a spike. The error names the function, state and op.
// expected-error @below {{flexsn-affine-transfer (replace): no scan updates its states affinely, so no chunked parallel scan can be built:}}
module {
  func.func @lif(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
    %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
    ^bb0(%xt: f32, %vt: f32):
      %c1 = arith.constant 1.0 : f32
      %h = arith.addf %vt, %xt : f32
      %hm = arith.subf %h, %c1 : f32
      %st = flexsn.spike %hm surrogate <sigmoid, alpha = 4.0> : f32
      %ns = arith.subf %c1, %st : f32
      %vn = arith.mulf %h, %ns : f32
      flexsn.yield %st, %vn : f32, f32
    }
    return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
  }
}

// -----

// A scan without states has nothing to carry across chunks.
// expected-error @below {{@relu: the scan has no states}}
module {
  func.func @relu(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %o = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
    ^bb0(%xt: f32):
      %z = arith.constant 0.0 : f32
      %r = arith.maximumf %xt, %z : f32
      flexsn.yield %r : f32
    }
    return %o : tensor<?x?xf32>
  }
}

// -----

// The transfer function's name is taken.
module {
  // expected-error @below {{'func.func' op has no room for its transfer function: a symbol named 'li_transfer' already exists}}
  func.func @li(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?xf32> {
    %v = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?xf32>) {
    ^bb0(%xt: f32, %vt: f32):
      %n = arith.addf %vt, %xt : f32
      flexsn.yield %n : f32
    }
    return %v : tensor<?xf32>
  }
  func.func @li_transfer() {
    return
  }
}

// -----

// Two scans in one function (not a kernel function): the affine one gets
// its transfer function, and the function is erased once (no diagnostic).
module {
  func.func @two(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
    %v = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?xf32>) {
    ^bb0(%xt: f32, %vt: f32):
      %n = arith.addf %vt, %xt : f32
      flexsn.yield %n : f32
    }
    %s, %w = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
    ^bb0(%xt: f32, %vt: f32):
      %c1 = arith.constant 1.0 : f32
      %h = arith.addf %vt, %xt : f32
      %st = flexsn.spike %h surrogate <sigmoid, alpha = 4.0> : f32
      %vn = arith.mulf %h, %st : f32
      flexsn.yield %st, %vn : f32, f32
    }
    return %v, %s, %w : tensor<?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
  }
}
