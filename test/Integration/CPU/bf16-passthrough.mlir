// Issue 13 finding 1: a bf16 value stored back unchanged (a state with
// v' = v, a bf16 per-neuron param yielded to a bf16 output). The report
// was a JIT failure on the symbol __truncsfbf2; CPU kernels now round
// f32 -> bf16 with integer ops and store the i16 bits, so no libcall and
// no bf16 value reaches the back end. Every variant runs and matches.
// RUN: flexsn-run %s --func=state --T=2 --ncl=5 --check | FileCheck %s
// RUN: flexsn-run %s --func=state --variant=final_state --T=3 --ncl=5 --check | FileCheck %s
// RUN: flexsn-run %s --func=state --variant=backward --T=3 --ncl=5 --check | FileCheck %s
// RUN: flexsn-run %s --func=param --T=2 --ncl=5 --check | FileCheck %s
// RUN: flexsn-run %s --func=param --variant=backward --T=2 --ncl=5 --check | FileCheck %s
// RUN: flexsn-opt %s --flexsn-cpu-pipeline | FileCheck %s --check-prefix=IR
// CHECK: check: ok
// IR-NOT: truncsfbf2
// IR-NOT: -> bf16
// IR-NOT: : bf16,
func.func @state(%x: tensor<?x?xbf16>, %v0: tensor<?xbf16>)
    -> (tensor<?x?xbf16>, tensor<?x?xbf16>) {
  %o, %v = flexsn.scan ins(%x : tensor<?x?xbf16>) states(%v0 : tensor<?xbf16>) -> (tensor<?x?xbf16>, tensor<?x?xbf16>) {
  ^bb0(%xt: f32, %vt: f32):
    %y = arith.addf %xt, %vt : f32
    flexsn.yield %y, %vt : f32, f32
  }
  return %o, %v : tensor<?x?xbf16>, tensor<?x?xbf16>
}
func.func @param(%x: tensor<?x?xbf16>, %p: tensor<?xbf16>)
    -> (tensor<?x?xbf16>, tensor<?x?xbf16>) {
  %o, %q = flexsn.scan ins(%x : tensor<?x?xbf16>) params(%p : tensor<?xbf16>) -> (tensor<?x?xbf16>, tensor<?x?xbf16>) {
  ^bb0(%xt: f32, %pt: f32):
    %y = arith.mulf %xt, %pt : f32
    flexsn.yield %y, %pt : f32, f32
  }
  return %o, %q : tensor<?x?xbf16>, tensor<?x?xbf16>
}
