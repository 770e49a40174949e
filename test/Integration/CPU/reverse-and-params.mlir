// A reverse scan with a per-neuron param, a scalar param, two states and an
// erf (libm on the CPU), checked against the interpreter; NCL = 0 and T = 0.
// RUN: flexsn-run %s --check --T=37 --ncl=1000 | FileCheck %s
// RUN: flexsn-run %s --check --T=37 --ncl=1000 --variant=final_state --dtype=f16 | FileCheck %s
// RUN: flexsn-run %s --check --T=5 --ncl=0 | FileCheck %s
// RUN: flexsn-run %s --check --T=0 --ncl=7 --variant=final_state | FileCheck %s
// RUN: flexsn-run %s --check --T=9 --ncl=33 --dtype=f64 | FileCheck %s
// CHECK: check: ok
func.func @rev(%x: tensor<?x?xf32>, %a0: tensor<?xf32>, %b0: tensor<?xf32>, %p: tensor<?xf32>, %q: f32)
    -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  %y, %a, %b = flexsn.scan reverse ins(%x : tensor<?x?xf32>) states(%a0, %b0 : tensor<?xf32>, tensor<?xf32>) params(%p, %q : tensor<?xf32>, f32) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %at: f32, %bt: f32, %pt: f32, %qt: f32):
    %m = arith.mulf %at, %pt : f32
    %n = arith.addf %m, %xt : f32
    %e = math.erf %n : f32
    %bn = arith.mulf %bt, %qt : f32
    %bo = arith.addf %bn, %e : f32
    %s = flexsn.spike %bo surrogate <erf> : f32
    flexsn.yield %s, %e, %bo : f32, f32, f32
  }
  return %y, %a, %b : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}
