// The deep entry (one neuron per thread, 64 bytes of reads in flight a
// thread, and at least 8 steps within 128 bytes: lif 16 f32 or 32 bf16
// steps, two_in_two_state 16 bf16 steps, its bf16 backward 8 steps of its
// 8 sequences) on the GPU: launches with at most 512 neurons per SM and
// T >= 4 depths take it, with T not a multiple of the depth included, and
// it gives the interpreter's results; a shorter T, a large NCL, lif's
// backward and two_in_two_state in f32 (8 and 32 bytes a step) take the
// other entries (NCL 81923: over 512 neurons per SM on GPUs of up to 160
// SMs).
// REQUIRES: cuda
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=inference --dtype=f32 --T=200 --ncl=1000 --seed=1 --check | FileCheck %s --check-prefix=LIF-INF
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=final_state --dtype=bf16 --T=130 --ncl=4099 --seed=2 --check | FileCheck %s --check-prefix=LIF-FS
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=forward --dtype=bf16 --T=128 --ncl=33 --seed=3 --check | FileCheck %s --check-prefix=LIF-FWD
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=forward --dtype=bf16 --T=127 --ncl=33 --seed=4 --check | FileCheck %s --check-prefix=SHORT
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=inference --dtype=bf16 --T=128 --ncl=81923 --seed=5 --check | FileCheck %s --check-prefix=LARGE
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=backward --dtype=bf16 --T=300 --ncl=500 --seed=6 --check | FileCheck %s --check-prefix=BWD
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=inference --dtype=bf16 --T=100 --ncl=777 --seed=7 --check | FileCheck %s --check-prefix=TWO
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=final_state --dtype=f32 --T=100 --ncl=777 --seed=8 --check | FileCheck %s --check-prefix=TWO32
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=forward --dtype=f32 --T=64 --ncl=65 --seed=9 --check | FileCheck %s --check-prefix=PLIF
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=bf16 --T=77 --ncl=1001 --seed=10 --check | FileCheck %s --check-prefix=TWO-BWD
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=f32 --T=32 --ncl=4099 --seed=11 --check | FileCheck %s --check-prefix=TWO-BWD32
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=bf16 --T=31 --ncl=1001 --seed=12 --check | FileCheck %s --check-prefix=TWO-BWD-SHORT
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=bf16 --T=40 --ncl=81923 --seed=13 --check | FileCheck %s --check-prefix=TWO-BWD-LARGE

// LIF-INF: entry=lif_inference_deep
// LIF-FS: entry=lif_final_state_deep
// LIF-FWD: entry=lif_forward_deep
// SHORT: entry=lif_forward_scalar
// LARGE: entry=lif_inference_scalar
// BWD: entry=lif_backward_scalar
// TWO: entry=two_in_two_state_inference_deep
// TWO32: entry=two_in_two_state_final_state_scalar
// PLIF: entry=plif_forward_deep
// TWO-BWD: entry=two_in_two_state_backward_deep
// TWO-BWD32: entry=two_in_two_state_backward_scalar
// TWO-BWD-SHORT: entry=two_in_two_state_backward_scalar
// TWO-BWD-LARGE: entry=two_in_two_state_backward_scalar
// Each line's verdict:
// LIF-INF: check: ok
// LIF-FS: check: ok
// LIF-FWD: check: ok
// SHORT: check: ok
// LARGE: check: ok
// BWD: check: ok
// TWO: check: ok
// TWO32: check: ok
// PLIF: check: ok
// TWO-BWD: check: ok
// TWO-BWD32: check: ok
// TWO-BWD-SHORT: check: ok
// TWO-BWD-LARGE: check: ok
