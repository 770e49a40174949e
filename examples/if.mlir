// Integrate-and-fire neuron, hard reset to 0, ATan surrogate (alpha = 2):
//   h = v + x;  s = spike(h - 1);  v' = h * (1 - s)
// Returns the spikes and only the final membrane potential.
func.func @if_neuron(%x: tensor<?x?xf32>, %v0: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?xf32>) {
  %s, %v = flexsn.scan final_states ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %vth = arith.constant 1.000000e+00 : f32
    %one = arith.constant 1.000000e+00 : f32
    %h = arith.addf %vt, %xt : f32
    %hm = arith.subf %h, %vth : f32
    %st = flexsn.spike %hm surrogate <atan, alpha = 2.000000e+00> : f32
    %keep = arith.subf %one, %st : f32
    %vn = arith.mulf %h, %keep : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?xf32>
}
