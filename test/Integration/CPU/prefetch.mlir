// The software-pipelined time loop (prefetch P > 1: P slots hold the reads
// of P steps; the loop advances P steps, its body unrolled P times, each
// copy computing one step from its slot and refilling it) gives the interpreter's results for every variant, with T below,
// at and above the depth (T = 0 runs nothing and reads nothing), a reverse
// scan with lagged reads (the backward) and bf16 storage. The GPU lowering
// uses it by default; on the CPU the option exists for this test.
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=inference --check --T=0 --ncl=9 --prefetch=4 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=inference --check --T=3 --ncl=9 --prefetch=4 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=final_state --check --T=4 --ncl=9 --prefetch=4 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=forward --check --T=11 --ncl=9 --prefetch=3 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=backward --check --T=2 --ncl=9 --prefetch=8 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=backward --check --T=13 --ncl=33 --prefetch=3 --dtype=bf16 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=backward --check --T=21 --ncl=9 --prefetch=16 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=inference --check --T=70 --ncl=9 --prefetch=32 --dtype=bf16 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=final_state --check --T=31 --ncl=5 --prefetch=32 | FileCheck %s
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --prefetch=33 2>&1 | FileCheck %s --check-prefix=BAD
// CHECK: check: ok
// BAD: --prefetch=33: 0 (chosen per kernel) to 32 steps
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --l2-prefetch=257 2>&1 | FileCheck %s --check-prefix=L2
// L2: --l2-prefetch=257: 0 (none) to 256 steps

// The pass: a prologue reads steps 0 to P - 1, each only inside T; the
// loop steps by P and carries the slots after the states, then the input's
// cursor (at step iv + P) and the outputs' cursors. An iteration whose
// steps and refills are all inside T (iv < T - (2P - 1)) runs a copy of
// the body without bound tests: every step, every refill of slot j with
// step iv + j + P. The others (the last one or two) run the checked copy:
// copy 0 unguarded, copies 1 to P - 1 only inside T, each refill only
// inside T, else the slot kept.
// RUN: flexsn-opt %flexsn_src_root/examples/lif.mlir -convert-flexsn-to-cpu-kernels=prefetch=3 | FileCheck %s --check-prefix=IR
// IR: func.func @lif_inference
// IR: %[[P0:.*]] = scf.if %{{.*}} -> (f32)
// IR: %[[P1:.*]] = scf.if %{{.*}} -> (f32)
// IR: %[[P2:.*]] = scf.if %{{.*}} -> (f32)
// IR: %[[C3:.*]] = llvm.getelementptr
// IR: scf.for %[[IV:[a-z0-9_]+]] = %{{.*}} to %[[T:.*]] step %c3{{.*}} iter_args(%{{.*}} = %{{.*}}, %[[S0:.*]] = %[[P0]], %{{.*}} = %[[P1]], %{{.*}} = %[[P2]], %[[C:.*]] = %[[C3]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32, f32, f32, !llvm.ptr, !llvm.ptr, !llvm.ptr)
// IR: %[[B:.*]] = arith.subi %[[T]], %c5
// IR: %[[FULL:.*]] = arith.cmpi slt, %[[IV]], %[[B]]
// IR: scf.if %[[FULL]] -> (f32, f32, f32, f32, !llvm.ptr, !llvm.ptr, !llvm.ptr)
// IR-NOT: arith.cmpi
// IR-NOT: scf.if
// IR: llvm.load %[[C]]
// IR-NOT: arith.cmpi
// IR-NOT: scf.if
// IR: } else {
// IR: %[[A0:.*]] = arith.addi %[[IV]], %c3
// IR: %[[R0:.*]] = arith.cmpi slt, %[[A0]], %[[T]]
// IR: scf.if %[[R0]] -> (f32)
// IR: llvm.load %[[C]]
// IR: scf.yield %[[S0]]
// IR: %[[S1:.*]] = arith.addi %[[IV]], %c1_i64
// IR: %[[IN1:.*]] = arith.cmpi slt, %[[S1]], %[[T]]
// IR: scf.if %[[IN1]] -> (f32)
// IR: arith.cmpi slt
// IR: scf.if
// IR: scf.yield
// RUN: not flexsn-opt %flexsn_src_root/examples/lif.mlir -convert-flexsn-to-cpu-kernels=prefetch=0 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: prefetch must be 1 to 32, got 0
