// The L2 prefetch of the one-neuron-per-thread entries (l2-prefetch steps
// ahead of the slots, at launches of at most 128 threads per SM) on the
// GPU: forward and reverse scans, lagged reads, bf16 and f32, T long enough
// for the prefetching iterations and T just past them give the
// interpreter's results with the prefetch (--l2-prefetch=32, 256) and
// without (0, the default).
// REQUIRES: cuda
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=inference --dtype=bf16 --T=1000 --ncl=2000 --seed=1 --l2-prefetch=32 --check | FileCheck %s --check-prefix=DEEP
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=final_state --dtype=f32 --T=97 --ncl=1000 --seed=2 --l2-prefetch=32 --check | FileCheck %s --check-prefix=DEEPFS
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=backward --dtype=bf16 --T=301 --ncl=3001 --seed=3 --l2-prefetch=32 --check | FileCheck %s --check-prefix=BWD
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=backward --dtype=f32 --T=49 --ncl=64 --seed=4 --l2-prefetch=32 --check | FileCheck %s --check-prefix=BWD32
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=bf16 --T=300 --ncl=999 --seed=5 --l2-prefetch=32 --check | FileCheck %s --check-prefix=TWO
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=forward --dtype=bf16 --T=250 --ncl=999 --seed=6 --l2-prefetch=32 --check | FileCheck %s --check-prefix=TWOF
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=backward --dtype=f32 --T=200 --ncl=333 --seed=7 --l2-prefetch=32 --check | FileCheck %s --check-prefix=PLIF
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=inference --dtype=bf16 --T=1000 --ncl=2000 --seed=1 --l2-prefetch=0 --check | FileCheck %s --check-prefix=DEEP
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=backward --dtype=bf16 --T=301 --ncl=3001 --seed=3 --l2-prefetch=256 --check | FileCheck %s --check-prefix=BWD

// DEEP: entry=lif_inference_deep
// DEEPFS: entry=lif_final_state_deep
// BWD: entry=lif_backward_scalar
// BWD32: entry=lif_backward_scalar
// TWO: entry=two_in_two_state_backward_scalar
// TWOF: entry=two_in_two_state_forward_deep
// PLIF: entry=plif_backward_scalar
// Each line's verdict:
// DEEP: check: ok
// DEEPFS: check: ok
// BWD: check: ok
// BWD32: check: ok
// TWO: check: ok
// TWOF: check: ok
// PLIF: check: ok
