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
// Two threads or more, each a chunk of several blocks of 256 neurons (the
// last chunk ending in a partial one), the scalar param's gradient summed
// over all: two chunks; four chunks of ten blocks (T x NCL / 32768 bounds
// five threads to four); four chunks of two blocks (seven threads, eight
// blocks):
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=37 --ncl=4099 --variant=backward --threads=2 --seed=77 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=bf16 --T=9 --ncl=5000 --variant=backward --threads=2 --seed=78 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=16 --ncl=10000 --variant=backward --threads=5 --seed=79 | FileCheck %s
// RUN: flexsn-run %flexsn_src_root/examples/plif.mlir --check --dtype=f32 --T=300 --ncl=2000 --variant=inference --threads=7 --seed=80 | FileCheck %s
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
