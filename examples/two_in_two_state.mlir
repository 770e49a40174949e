// The FlexSN tutorial's neuron: two inputs (x, y), two states (v, rho), two
// outputs (s1, s2); ATan surrogate (alpha = 2); beta = 0.5, gamma = 0.9.
//   h   = beta * v + x
//   s1  = spike(h - (rho + 1))        threshold adaptation
//   s2  = spike(h - 1)
//   rho' = gamma * rho + s1
//   v1  = h * (1 - s1)                 hard reset
//   v2  = h - s2                       soft reset
//   yy  = sigmoid(y)
//   v'  = v1 * yy + v2 * (1 - yy)      modulated reset
func.func @two_in_two_state(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>,
                            %v0: tensor<?xf32>, %rho0: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  %s1, %s2, %v, %rho = flexsn.scan ins(%x, %y : tensor<?x?xf32>, tensor<?x?xf32>) states(%v0, %rho0 : tensor<?xf32>, tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %yt: f32, %vt: f32, %rt: f32):
    %beta = arith.constant 5.000000e-01 : f32
    %gamma = arith.constant 0.899999976 : f32
    %one = arith.constant 1.000000e+00 : f32
    %bv = arith.mulf %beta, %vt : f32
    %h = arith.addf %bv, %xt : f32
    %th = arith.addf %rt, %one : f32
    %a1 = arith.subf %h, %th : f32
    %o1 = flexsn.spike %a1 surrogate <atan, alpha = 2.000000e+00> : f32
    %a2 = arith.subf %h, %one : f32
    %o2 = flexsn.spike %a2 surrogate <atan, alpha = 2.000000e+00> : f32
    %gr = arith.mulf %gamma, %rt : f32
    %rn = arith.addf %gr, %o1 : f32
    %k1 = arith.subf %one, %o1 : f32
    %v1 = arith.mulf %h, %k1 : f32
    %v2 = arith.subf %h, %o2 : f32
    %ny = arith.negf %yt : f32
    %ey = math.exp %ny : f32
    %dy = arith.addf %one, %ey : f32
    %yy = arith.divf %one, %dy : f32
    %m1 = arith.mulf %v1, %yy : f32
    %k2 = arith.subf %one, %yy : f32
    %m2 = arith.mulf %v2, %k2 : f32
    %vn = arith.addf %m1, %m2 : f32
    flexsn.yield %o1, %o2, %vn, %rn : f32, f32, f32, f32
  }
  return %s1, %s2, %v, %rho : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}
