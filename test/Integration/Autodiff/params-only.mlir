// A core whose outputs depend only on its params (the input is declared but
// never read) is differentiated: the params' gradients are well defined.
// Canonicalization keeps the unread input (a user's function keeps its
// ABI), so the scan keeps its T.
// RUN: flexsn-run %s --func=scalar --variant=backward --check --T=3 --ncl=257 --seed=1 | FileCheck %s
// RUN: flexsn-run %s --func=per_neuron --variant=backward --check --T=5 --ncl=64 --seed=2 | FileCheck %s
// RUN: flexsn-run %s --func=per_neuron_f64 --variant=backward --check --T=4 --ncl=33 --seed=3 | FileCheck %s --check-prefix=FD
// A hand-written scan with no ins at all (issue 13, finding 5): NCL comes
// from a per-neuron param, or from the output gradient for scalar params.
// RUN: flexsn-run %s --func=no_ins_per_neuron --variant=backward --check --T=4 --ncl=37 --seed=4 | FileCheck %s
// RUN: flexsn-run %s --func=no_ins_scalar --variant=backward --check --T=3 --ncl=70 --seed=5 | FileCheck %s
// RUN: flexsn-run %s --func=no_ins_f64 --variant=backward --check --T=3 --ncl=9 --seed=6 | FileCheck %s --check-prefix=FD
// RUN: flexsn-run %s --func=no_ins_scalar --variant=inference --check --T=3 --ncl=70 --seed=7 | FileCheck %s --check-prefix=INF
// INF: check: ok
// CHECK: grad_param #0 vs reference adjoint
// CHECK-SAME: ok
// CHECK: check: ok
// FD: finite differences
// FD-SAME: ok
// FD: check: ok
func.func @scalar(%x: tensor<?x?xf32>, %w: f32) -> tensor<?x?xf32> {
  %o = flexsn.scan ins(%x : tensor<?x?xf32>) params(%w : f32) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32, %wt: f32):
    %two = arith.constant 2.0 : f32
    %r = arith.mulf %wt, %two : f32
    %e = math.exp %r : f32
    flexsn.yield %e : f32
  }
  return %o : tensor<?x?xf32>
}
func.func @per_neuron(%w: tensor<?xf32>, %x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %o = flexsn.scan ins(%x : tensor<?x?xf32>) params(%w : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32, %wt: f32):
    %e = math.sin %wt : f32
    flexsn.yield %e : f32
  }
  return %o : tensor<?x?xf32>
}
func.func @per_neuron_f64(%w: tensor<?xf64>, %x: tensor<?x?xf64>) -> tensor<?x?xf64> {
  %o = flexsn.scan ins(%x : tensor<?x?xf64>) params(%w : tensor<?xf64>) -> (tensor<?x?xf64>) {
  ^bb0(%xt: f64, %wt: f64):
    %e = math.tanh %wt : f64
    flexsn.yield %e : f64
  }
  return %o : tensor<?x?xf64>
}

func.func @no_ins_per_neuron(%w: tensor<?xf32>) -> tensor<?x?xf32> {
  %o = flexsn.scan params(%w : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%wt: f32):
    %e = math.sin %wt : f32
    flexsn.yield %e : f32
  }
  return %o : tensor<?x?xf32>
}
func.func @no_ins_scalar(%w: f32) -> tensor<?x?xf32> {
  %o = flexsn.scan params(%w : f32) -> (tensor<?x?xf32>) {
  ^bb0(%wt: f32):
    %e = math.exp %wt : f32
    flexsn.yield %e : f32
  }
  return %o : tensor<?x?xf32>
}
func.func @no_ins_f64(%w: tensor<?xf64>) -> tensor<?x?xf64> {
  %o = flexsn.scan params(%w : tensor<?xf64>) -> (tensor<?x?xf64>) {
  ^bb0(%wt: f64):
    %e = math.tanh %wt : f64
    flexsn.yield %e : f64
  }
  return %o : tensor<?x?xf64>
}
