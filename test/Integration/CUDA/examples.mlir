// Every example on the GPU through the CUDA runtime, checked like the CPU
// tests: inference and final_state against the interpreter, the training
// forward against the interpreter, the backward (fed with what the forward
// kernel stored) against the reference adjoint. fp32 tolerance 1e-5, bf16
// 1e-2 (relative to max(|ref|, 1)).
// REQUIRES: cuda
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=inference --dtype=f32 --T=37 --ncl=4099 --seed=1 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=final_state --dtype=f32 --T=64 --ncl=4096 --seed=2 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=forward --dtype=f32 --T=5 --ncl=1000 --seed=3 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=backward --dtype=f32 --T=0 --ncl=7 --seed=4 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=backward --dtype=f32 --T=1 --ncl=1000 --seed=5 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=backward --dtype=f32 --T=5 --ncl=4099 --seed=6 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=backward --dtype=f32 --T=64 --ncl=4096 --seed=7 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=inference --dtype=bf16 --T=37 --ncl=4099 --seed=8 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=final_state --dtype=bf16 --T=64 --ncl=4096 --seed=9 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=forward --dtype=bf16 --T=5 --ncl=1000 --seed=10 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=backward --dtype=bf16 --T=0 --ncl=7 --seed=11 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=backward --dtype=bf16 --T=1 --ncl=1000 --seed=12 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=backward --dtype=bf16 --T=5 --ncl=4099 --seed=13 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=backward --dtype=bf16 --T=64 --ncl=4096 --seed=14 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=inference --dtype=f32 --T=37 --ncl=4099 --seed=15 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=final_state --dtype=f32 --T=64 --ncl=4096 --seed=16 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=forward --dtype=f32 --T=5 --ncl=1000 --seed=17 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=backward --dtype=f32 --T=0 --ncl=7 --seed=18 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=backward --dtype=f32 --T=1 --ncl=1000 --seed=19 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=backward --dtype=f32 --T=5 --ncl=4099 --seed=20 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=backward --dtype=f32 --T=64 --ncl=4096 --seed=21 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=inference --dtype=bf16 --T=37 --ncl=4099 --seed=22 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=final_state --dtype=bf16 --T=64 --ncl=4096 --seed=23 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=forward --dtype=bf16 --T=5 --ncl=1000 --seed=24 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=backward --dtype=bf16 --T=0 --ncl=7 --seed=25 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=backward --dtype=bf16 --T=1 --ncl=1000 --seed=26 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=backward --dtype=bf16 --T=5 --ncl=4099 --seed=27 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/lif_soft_detach.mlir --backend=cuda --variant=backward --dtype=bf16 --T=64 --ncl=4096 --seed=28 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=inference --dtype=f32 --T=37 --ncl=4099 --seed=29 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=final_state --dtype=f32 --T=64 --ncl=4096 --seed=30 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=forward --dtype=f32 --T=5 --ncl=1000 --seed=31 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=backward --dtype=f32 --T=0 --ncl=7 --seed=32 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=backward --dtype=f32 --T=1 --ncl=1000 --seed=33 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=backward --dtype=f32 --T=5 --ncl=4099 --seed=34 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=backward --dtype=f32 --T=64 --ncl=4096 --seed=35 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=inference --dtype=bf16 --T=37 --ncl=4099 --seed=36 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=final_state --dtype=bf16 --T=64 --ncl=4096 --seed=37 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=forward --dtype=bf16 --T=5 --ncl=1000 --seed=38 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=backward --dtype=bf16 --T=0 --ncl=7 --seed=39 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=backward --dtype=bf16 --T=1 --ncl=1000 --seed=40 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=backward --dtype=bf16 --T=5 --ncl=4099 --seed=41 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/if.mlir --backend=cuda --variant=backward --dtype=bf16 --T=64 --ncl=4096 --seed=42 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=inference --dtype=f32 --T=37 --ncl=4099 --seed=43 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=final_state --dtype=f32 --T=64 --ncl=4096 --seed=44 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=forward --dtype=f32 --T=5 --ncl=1000 --seed=45 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=backward --dtype=f32 --T=0 --ncl=7 --seed=46 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=backward --dtype=f32 --T=1 --ncl=1000 --seed=47 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=backward --dtype=f32 --T=5 --ncl=4099 --seed=48 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=backward --dtype=f32 --T=64 --ncl=4096 --seed=49 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=inference --dtype=bf16 --T=37 --ncl=4099 --seed=50 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=final_state --dtype=bf16 --T=64 --ncl=4096 --seed=51 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=forward --dtype=bf16 --T=5 --ncl=1000 --seed=52 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=backward --dtype=bf16 --T=0 --ncl=7 --seed=53 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=backward --dtype=bf16 --T=1 --ncl=1000 --seed=54 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=backward --dtype=bf16 --T=5 --ncl=4099 --seed=55 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --backend=cuda --variant=backward --dtype=bf16 --T=64 --ncl=4096 --seed=56 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=inference --dtype=f32 --T=37 --ncl=4099 --seed=57 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=final_state --dtype=f32 --T=64 --ncl=4096 --seed=58 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=forward --dtype=f32 --T=5 --ncl=1000 --seed=59 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=f32 --T=0 --ncl=7 --seed=60 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=f32 --T=1 --ncl=1000 --seed=61 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=f32 --T=5 --ncl=4099 --seed=62 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=f32 --T=64 --ncl=4096 --seed=63 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=inference --dtype=bf16 --T=37 --ncl=4099 --seed=64 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=final_state --dtype=bf16 --T=64 --ncl=4096 --seed=65 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=forward --dtype=bf16 --T=5 --ncl=1000 --seed=66 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=bf16 --T=0 --ncl=7 --seed=67 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=bf16 --T=1 --ncl=1000 --seed=68 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=bf16 --T=5 --ncl=4099 --seed=69 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=bf16 --T=64 --ncl=4096 --seed=70 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/test/Integration/Autodiff/surrogates.mlir --backend=cuda --variant=backward --T=16 --ncl=4099 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/test/Integration/Autodiff/smooth-f64.mlir --func=math_core --backend=cuda --variant=backward --T=5 --ncl=1000 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/test/Integration/Autodiff/piecewise.mlir --backend=cuda --variant=backward --T=5 --ncl=1000 --check | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/test/Integration/CPU/reverse-and-params.mlir --backend=cuda --func=rev --T=37 --ncl=4099 --check | FileCheck %s

// CHECK: backend=cuda
// CHECK-NOT: FAIL
// CHECK: check: ok
