// Parametric LIF (PLIF): the decay is learnable through a scalar w,
// 1/tau = sigmoid(w), shared by all neurons; hard reset; sigmoid surrogate.
//   h = v + (x - v) * sigmoid(w)
//   s = spike(h - 1);  v' = h * (1 - s)
func.func @plif(%x: tensor<?x?xf32>, %v0: tensor<?xf32>, %w: f32)
    -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) params(%w : f32) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32, %wt: f32):
    %one = arith.constant 1.000000e+00 : f32
    %vth = arith.constant 1.000000e+00 : f32
    %nw = arith.negf %wt : f32
    %e = math.exp %nw : f32
    %den = arith.addf %one, %e : f32
    %k = arith.divf %one, %den : f32
    %d = arith.subf %xt, %vt : f32
    %dk = arith.mulf %d, %k : f32
    %h = arith.addf %vt, %dk : f32
    %hm = arith.subf %h, %vth : f32
    %st = flexsn.spike %hm surrogate <sigmoid, alpha = 4.000000e+00> : f32
    %keep = arith.subf %one, %st : f32
    %vn = arith.mulf %h, %keep : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
