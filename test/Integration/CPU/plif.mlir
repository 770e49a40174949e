// CPU execution of examples/plif.mlir checked against the reference
// interpreter: T in {0, 1, 37, 64}, NCL in {1, 1000, 4099}, f32 and bf16
// storage, both variants.
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=0 --ncl=1 --variant=inference --seed=1 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=0 --ncl=1000 --variant=final_state --seed=1000 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=0 --ncl=4099 --variant=inference --seed=4099 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=1 --ncl=1 --variant=final_state --seed=8 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=1 --ncl=1000 --variant=inference --seed=1007 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=1 --ncl=4099 --variant=final_state --seed=4106 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=37 --ncl=1 --variant=final_state --seed=260 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=37 --ncl=1000 --variant=inference --seed=1259 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=37 --ncl=4099 --variant=final_state --seed=4358 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=64 --ncl=1 --variant=inference --seed=449 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=64 --ncl=1000 --variant=final_state --seed=1448 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=64 --ncl=4099 --variant=inference --seed=4547 | FileCheck %s
// Two threads, each a chunk of several blocks of 256 neurons and a partial
// one, the scalar param's gradient summed over both:
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=37 --ncl=4099 --variant=backward --threads=2 --seed=77 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=9 --ncl=1000 --variant=backward --threads=2 --seed=78 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=0 --ncl=1 --variant=inference --seed=1 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=0 --ncl=1000 --variant=final_state --seed=1000 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=0 --ncl=4099 --variant=inference --seed=4099 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=1 --ncl=1 --variant=final_state --seed=8 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=1 --ncl=1000 --variant=inference --seed=1007 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=1 --ncl=4099 --variant=final_state --seed=4106 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=37 --ncl=1 --variant=final_state --seed=260 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=37 --ncl=1000 --variant=inference --seed=1259 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=37 --ncl=4099 --variant=final_state --seed=4358 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=64 --ncl=1 --variant=inference --seed=449 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=64 --ncl=1000 --variant=final_state --seed=1448 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=64 --ncl=4099 --variant=inference --seed=4547 | FileCheck %s
// CHECK: check: ok
