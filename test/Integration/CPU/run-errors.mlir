// flexsn-run reports bad requests clearly.
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --variant=sideways 2>&1 | FileCheck %s --check-prefix=BWD
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --save-ops=flexsn.spike 2>&1 | FileCheck %s --check-prefix=SAVE
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --T=-1 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --T=1000000 --ncl=100000000 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --dtype=i8 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --func=nope 2>&1 | FileCheck %s --check-prefix=FUNC
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --T=4 --ncl=4096 --bench --reps=3 | FileCheck %s --check-prefix=BENCH
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --variant=backward_final 2>&1 | FileCheck %s --check-prefix=FINAL
// RUN: not flexsn-run %s --func=stateless --variant=backward_final --save-ops=auto 2>&1 | FileCheck %s --check-prefix=NOPAIR
// BWD: error: unknown variant 'sideways' (expected inference, final_state, forward, backward, forward_final or backward_final)
// SAVE: error: --save-ops applies to --variant=forward|backward|forward_final|backward_final
// FINAL: error: --variant=backward_final runs the final-state pair, which only --save-ops=auto builds
// NOPAIR: error: no stateless_forward_final: the saving policy built no final-state pair (the core has no state, its scan gives final states already, or nothing takes a gradient)
// NEG: error: --T and --ncl must be >= 0
// DTYPE: error: unknown --dtype 'i8'
// FUNC: error: no kernel function named 'nope'
// BENCH: bench: median {{.*}} ms over 3 runs, 212992 bytes moved
// HUGE: error: T=1000000 NCL=100000000 needs about {{.*}} GB of host buffers; this machine has

// A core without states: no final state, so no final-state pair.
func.func @stateless(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %o = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    %e = math.exp %xt : f32
    flexsn.yield %e : f32
  }
  return %o : tensor<?x?xf32>
}
