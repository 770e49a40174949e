// The chunk repair kernel of a forward scan with flexsn.chunk_width W:
// thread g < W repeatedly finds the first chunk of neuron g whose start
// differs bit for bit from the end of the chunk before, stores that end
// as its start and reruns it in place.
// A reverse scan (the backward) and a scan without the attribute have none.
// RUN: flexsn-opt %s --convert-flexsn-to-gpu --split-input-file | FileCheck %s
// RUN: flexsn-opt %s --flexsn-differentiate --convert-flexsn-to-gpu --split-input-file | FileCheck %s --check-prefix=TRAIN
// RUN: flexsn-translate --flexsn-to-manifest %s --split-input-file | FileCheck %s --check-prefix=MANIFEST
// RUN: flexsn-translate --flexsn-to-cpu-manifest %s --split-input-file | FileCheck %s --check-prefix=CPU

// CHECK-LABEL: gpu.func @lif_final_state_repair(
// CHECK-SAME: %[[X:[a-z0-9]+]]: !llvm.ptr, %[[START:[a-z0-9]+]]: !llvm.ptr, %[[S:[a-z0-9]+]]: !llvm.ptr, %[[END:[a-z0-9]+]]: !llvm.ptr, %[[T:[a-z0-9]+]]: i64, %[[NCL:[a-z0-9]+]]: i64)
// CHECK: %[[W:.*]] = arith.constant 64 : i64
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[G:.*]], %[[W]] : i64
// CHECK: scf.if %[[IN]] {
// CHECK: %[[CHUNKS:.*]] = arith.divui %[[NCL]], %[[W]] : i64
// Rounds from chunk 1: each searches for the first chunk from there whose
// start differs from the end before it, 32 chunks an iteration (their
// loads independent)...
// CHECK: scf.while (%[[FROM:.*]] = %c1_i64) : (i64) -> i64 {
// CHECK: scf.while (%{{.*}} = %[[FROM]], %{{.*}} = %[[CHUNKS]]) : (i64, i64) -> (i64, i64) {
// CHECK-COUNT-32: arith.cmpi ne, %{{.*}}, %{{.*}} : i32
// CHECK: scf.condition
// ...then stores that end as the chunk's start and reruns it in place.
// CHECK: } do {
// CHECK: ^bb0(%[[C:.*]]: i64):
// CHECK: %[[SA:.*]] = llvm.getelementptr %[[START]]
// CHECK: %[[E:.*]] = llvm.load
// CHECK: llvm.store %[[E]], %[[SA]]
// CHECK: scf.for
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr
// CHECK: %[[NEXT:.*]] = arith.addi %[[C]], %c1_i64 : i64
// CHECK: scf.yield %[[NEXT]] : i64
// CHECK: gpu.return
// TRAIN: gpu.func @lif_forward_repair(
// TRAIN-NOT: gpu.func @lif_backward_repair(
// MANIFEST: "name": "lif_inference_repair"
// MANIFEST-NEXT: "source": "lif"
// MANIFEST-NEXT: "variant": "inference"
// MANIFEST-NEXT: "repairs": "lif_inference"
// MANIFEST: "neurons_per_thread": 1
// MANIFEST-NOT: "scalar_entry"
// MANIFEST: "args"
// MANIFEST: "name": "lif_final_state_repair"
// MANIFEST-NOT: "name": "plain_{{.*}}_repair"
// The CPU kernels have them too (one neuron of the range a time), and
// flexsn-run --repair checks one as chunked_time uses it: the kernel from
// random starts (a guess), again from the chunk ends it gave, then the
// repair, against the interpreter's sequential scan of the chunks.
// CPU: "name": "lif_inference_repair"
// CPU-NEXT: "source": "lif"
// CPU-NEXT: "variant": "inference"
// CPU-NEXT: "repairs": "lif_inference"
// RUN: flexsn-opt %s --convert-flexsn-to-cpu-kernels --split-input-file | FileCheck %s --check-prefix=CPUK
// CPUK-LABEL: func.func @lif_inference_repair(
// CPUK: %[[W:.*]] = arith.constant 64 : i64
// CPUK: %[[END:.*]] = arith.minsi %{{.*}}, %[[W]] : i64
// CPUK: scf.for %{{.*}} = %{{.*}} to %[[END]]
// CPUK: scf.while
// RUN: flexsn-run %s --func=lif --backend=cpu --repair --T=16 --ncl=256 --check | FileCheck %s --check-prefix=RAN
// RUN: flexsn-run %s --func=lif --backend=cpu --variant=final_state --repair --T=16 --ncl=256 --check | FileCheck %s --check-prefix=RAN
// RUN: flexsn-run %s --func=lif --backend=cpu --dtype=bf16 --repair --T=9 --ncl=192 --check | FileCheck %s --check-prefix=RAN
// RUN: flexsn-run %s --func=lif --backend=cpu --variant=forward --repair --T=16 --ncl=256 --check | FileCheck %s --check-prefix=RAN
// RUN: flexsn-run %s --func=lif --backend=cpu --variant=forward_final --save-ops=auto --repair --T=16 --ncl=256 --check | FileCheck %s --check-prefix=RAN
// RAN: kernel lif_{{.*}}_repair: T={{[0-9]+}} NCL={{[0-9]+}} backend=cpu
// RAN: init_state #0 (repaired chunks)
// RAN: check: ok
// A repair wants the attribute dividing NCL, and is checked, not timed:
// RUN: not flexsn-run %s --func=lif --backend=cpu --repair --T=16 --ncl=100 --check 2>&1 | FileCheck %s --check-prefix=NODIV
// NODIV: has no chunk repair kernel for a inference run at NCL=100
// RUN: not flexsn-run %s --func=plain --backend=cpu --repair --T=16 --ncl=128 --check 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not flexsn-run %s --func=lif --backend=cpu --variant=backward --repair --T=16 --ncl=128 --check 2>&1 | FileCheck %s --check-prefix=BWD
// BWD: 'lif' has no chunk repair kernel for a backward run
// NONE: 'plain' has no chunk repair kernel
// RUN: not flexsn-run %s --func=lif --backend=cpu --repair --bench --T=16 --ncl=128 2>&1 | FileCheck %s --check-prefix=BENCH
// BENCH: a chunk repair kernel is checked, not timed
func.func @lif(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) attributes {flexsn.chunk_width = 64 : i64} -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c2 = arith.constant 2.0 : f32
    %c1 = arith.constant 1.0 : f32
    %d = arith.subf %xt, %vt : f32
    %q = arith.divf %d, %c2 : f32
    %h = arith.addf %vt, %q : f32
    %hm = arith.subf %h, %c1 : f32
    %st = flexsn.spike %hm surrogate <sigmoid, alpha = 4.0> : f32
    %ns = arith.subf %c1, %st : f32
    %vn = arith.mulf %h, %ns : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// CHECK-NOT: gpu.func @plain_inference_repair(
func.func @plain(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %o, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c = arith.constant 0.5 : f32
    %d = arith.mulf %vt, %c : f32
    %n = arith.addf %d, %xt : f32
    flexsn.yield %n, %n : f32, f32
  }
  return %o, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
