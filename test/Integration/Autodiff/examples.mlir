// Backward (BPTT) kernels of every example on the CPU, checked against the
// interpreter's independent reference adjoint, which reads the same stored
// forward state sequence: T in {0, 1, 5, 64}, f32 and bf16 storage, NCL odd
// and even. The training forward kernels are checked against the
// interpreter too.
// lif: LIF, hard reset
// lif_soft_detach: LIF, soft reset with detach_reset
// if: IF, final states only
// plif: PLIF, learnable scalar decay parameter (gradient summed over neurons in the kernel)
// two_in_two_state: the tutorial 2-in/2-state/2-out ATan neuron
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=backward --check --dtype=f32 --T=0 --ncl=7 --seed=1 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=backward --check --dtype=f32 --T=1 --ncl=1000 --seed=2 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=backward --check --dtype=f32 --T=5 --ncl=4099 --seed=3 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=backward --check --dtype=f32 --T=64 --ncl=257 --seed=4 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=backward --check --dtype=bf16 --T=0 --ncl=7 --seed=5 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=backward --check --dtype=bf16 --T=1 --ncl=1000 --seed=6 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=backward --check --dtype=bf16 --T=5 --ncl=4099 --seed=7 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=backward --check --dtype=bf16 --T=64 --ncl=257 --seed=8 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --variant=forward --check --T=5 --ncl=1001 --seed=9 | FileCheck %s --check-prefix=FWD
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --variant=backward --check --dtype=f32 --T=0 --ncl=7 --seed=10 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --variant=backward --check --dtype=f32 --T=1 --ncl=1000 --seed=11 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --variant=backward --check --dtype=f32 --T=5 --ncl=4099 --seed=12 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --variant=backward --check --dtype=f32 --T=64 --ncl=257 --seed=13 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --variant=backward --check --dtype=bf16 --T=0 --ncl=7 --seed=14 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --variant=backward --check --dtype=bf16 --T=1 --ncl=1000 --seed=15 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --variant=backward --check --dtype=bf16 --T=5 --ncl=4099 --seed=16 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --variant=backward --check --dtype=bf16 --T=64 --ncl=257 --seed=17 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --variant=forward --check --T=5 --ncl=1001 --seed=18 | FileCheck %s --check-prefix=FWD
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --variant=backward --check --dtype=f32 --T=0 --ncl=7 --seed=19 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --variant=backward --check --dtype=f32 --T=1 --ncl=1000 --seed=20 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --variant=backward --check --dtype=f32 --T=5 --ncl=4099 --seed=21 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --variant=backward --check --dtype=f32 --T=64 --ncl=257 --seed=22 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --variant=backward --check --dtype=bf16 --T=0 --ncl=7 --seed=23 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --variant=backward --check --dtype=bf16 --T=1 --ncl=1000 --seed=24 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --variant=backward --check --dtype=bf16 --T=5 --ncl=4099 --seed=25 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --variant=backward --check --dtype=bf16 --T=64 --ncl=257 --seed=26 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --variant=forward --check --T=5 --ncl=1001 --seed=27 | FileCheck %s --check-prefix=FWD
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=backward --check --dtype=f32 --T=0 --ncl=7 --seed=28 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=backward --check --dtype=f32 --T=1 --ncl=1000 --seed=29 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=backward --check --dtype=f32 --T=5 --ncl=4099 --seed=30 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=backward --check --dtype=f32 --T=64 --ncl=257 --seed=31 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=backward --check --dtype=bf16 --T=0 --ncl=7 --seed=32 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=backward --check --dtype=bf16 --T=1 --ncl=1000 --seed=33 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=backward --check --dtype=bf16 --T=5 --ncl=4099 --seed=34 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=backward --check --dtype=bf16 --T=64 --ncl=257 --seed=35 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --variant=forward --check --T=5 --ncl=1001 --seed=36 | FileCheck %s --check-prefix=FWD
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=backward --check --dtype=f32 --T=0 --ncl=7 --seed=37 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=backward --check --dtype=f32 --T=1 --ncl=1000 --seed=38 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=backward --check --dtype=f32 --T=5 --ncl=4099 --seed=39 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=backward --check --dtype=f32 --T=64 --ncl=257 --seed=40 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=backward --check --dtype=bf16 --T=0 --ncl=7 --seed=41 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=backward --check --dtype=bf16 --T=1 --ncl=1000 --seed=42 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=backward --check --dtype=bf16 --T=5 --ncl=4099 --seed=43 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=backward --check --dtype=bf16 --T=64 --ncl=257 --seed=44 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --variant=forward --check --T=5 --ncl=1001 --seed=45 | FileCheck %s --check-prefix=FWD

// CHECK: kernel {{.*}}_backward
// CHECK: grad_input #0 vs reference adjoint
// CHECK-NOT: FAIL
// CHECK: check: ok

// FWD: kernel {{.*}}_forward
// FWD: output #0
// FWD: state_seq #0
// FWD-NOT: FAIL
// FWD: check: ok
