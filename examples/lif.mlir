// LIF neuron, hard reset, sigmoid surrogate (alpha = 4):
//   h = v + (x - v) / tau,  tau = 2
//   s = spike(h - v_th),    v_th = 1
//   v' = h * (1 - s)
// Outputs: the spike sequence, then the membrane-potential sequence.
func.func @lif(%x: tensor<?x?xf32>, %v0: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %tau = arith.constant 2.000000e+00 : f32
    %vth = arith.constant 1.000000e+00 : f32
    %one = arith.constant 1.000000e+00 : f32
    %d = arith.subf %xt, %vt : f32
    %q = arith.divf %d, %tau : f32
    %h = arith.addf %vt, %q : f32
    %hm = arith.subf %h, %vth : f32
    %st = flexsn.spike %hm surrogate <sigmoid, alpha = 4.000000e+00> : f32
    %keep = arith.subf %one, %st : f32
    %vn = arith.mulf %h, %keep : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
