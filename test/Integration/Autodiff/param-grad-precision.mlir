// A scalar param's gradient sums over every neuron: the CPU kernel
// accumulates a chunk's neurons in f64 and rounds once, so the error no
// longer grows with NCL (at NCL = 10^6 the f32 running sum was 2.4e-5 off,
// failing the check's 1e-5; now about 4e-7).
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --T=2 --ncl=1000000 --variant=backward --threads=1 --seed=6 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --T=2 --ncl=1000000 --variant=backward --threads=2 --seed=6 | FileCheck %s
// CHECK: grad_param #0 vs reference adjoint
// CHECK-SAME: ok
// CHECK: check: ok
