// The software-pipelined time loop (prefetch > 1: the reads of the next
// P - 1 steps carried in registers, those of step t + P - 1 issued before
// step t) gives the interpreter's results for every variant, with T below,
// at and above the depth (T = 0 runs nothing and reads nothing), a reverse
// scan with lagged reads (the backward) and bf16 storage. The GPU lowering
// uses it by default; on the CPU the option exists for this test.
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=inference --check --T=0 --ncl=9 --prefetch=4 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=inference --check --T=3 --ncl=9 --prefetch=4 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=final_state --check --T=4 --ncl=9 --prefetch=4 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=forward --check --T=11 --ncl=9 --prefetch=3 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=backward --check --T=2 --ncl=9 --prefetch=8 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=backward --check --T=13 --ncl=33 --prefetch=3 --dtype=bf16 | FileCheck %s
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --prefetch=9 2>&1 | FileCheck %s --check-prefix=BAD
// CHECK: check: ok
// BAD: --prefetch must be 1 to 8, not 9

// The pass: a prologue reads the first P - 1 steps only when T > 0; the
// loop carries them after the states and reads step iv + P - 1, clamped to
// the last step.
// RUN: flexsn-opt %flexsn_src_root/examples/lif.mlir -convert-flexsn-to-cpu-kernels=prefetch=3 | FileCheck %s --check-prefix=IR
// IR: func.func @lif_inference
// IR: %[[ANY:.*]] = arith.cmpi sgt, %[[T:.*]], %c0
// IR: %[[PRO:.*]]:2 = scf.if %[[ANY]] -> (f32, f32)
// IR: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %[[PRO]]#0, %{{.*}} = %[[PRO]]#1) -> (f32, f32, f32)
// IR: arith.minsi
// RUN: not flexsn-opt %flexsn_src_root/examples/lif.mlir -convert-flexsn-to-cpu-kernels=prefetch=0 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: prefetch must be 1 to 8, got 0
