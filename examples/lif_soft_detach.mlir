// LIF neuron from the FlexSN tutorial: soft reset with detach_reset,
// non-decaying input, sigmoid surrogate.
//   h = (1 - 1/tau) * v + x,  tau = 2
//   s = spike(h - v_th),      v_th = 1
//   v' = h - detach(s) * v_th
func.func @lif_soft_detach(%x: tensor<?x?xf32>, %v0: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %decay = arith.constant 5.000000e-01 : f32
    %vth = arith.constant 1.000000e+00 : f32
    %dv = arith.mulf %decay, %vt : f32
    %h = arith.addf %dv, %xt : f32
    %hm = arith.subf %h, %vth : f32
    %st = flexsn.spike %hm surrogate <sigmoid, alpha = 4.000000e+00> : f32
    %sd = flexsn.detach %st : f32
    %r = arith.mulf %sd, %vth : f32
    %vn = arith.subf %h, %r : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
