// RUN: flexsn-opt %s -convert-flexsn-to-gpu -split-input-file -verify-diagnostics | FileCheck %s --implicit-check-not=flexsn.scan --implicit-check-not=flexsn.spike
// RUN: flexsn-opt %s -convert-flexsn-to-gpu="prefetch=1" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=P1 --implicit-check-not=flexsn.scan
// RUN: flexsn-opt %s -convert-flexsn-to-gpu="neurons-per-thread=1" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=W1 --implicit-check-not=flexsn.scan

// CHECK: module attributes {gpu.container_module}
// Each entry is a gpu.module of its own (lowered and compiled in parallel).
// CHECK: gpu.module @lif_inference
// CHECK: gpu.func @lif_inference(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[T:.*]]: i64, %[[NCL:.*]]: i64) kernel attributes {flexsn.variant = "inference"}
// The block size is a run-time value (the runtime chooses it).
// CHECK: gpu.block_id x
// CHECK: gpu.thread_id x
// CHECK: gpu.block_dim x
// The vector entry: the runtime launches it only when NCL is a multiple of
// 4 and the pointers are aligned, so it holds no run-time path choice.
// CHECK-NOT: llvm.ptrtoint
// Every read is an invariant load (ld.global.nc): a kernel never writes
// what it reads, and ptxas may move such loads across the stores.
// CHECK: llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
// Each sequence is a cursor in the global address space, advanced a step
// by an inline add.s64 (LLVM's strength reduction does not see through it).
// CHECK: llvm.addrspacecast %{{.*}} : !llvm.ptr to !llvm.ptr<1>
// By default the time loop keeps the reads of 8 steps in flight: one input
// at 4 lanes is 4 registers a step, 1 + 32 / 4 = 9, at most 8. A prologue
// loads steps 0 to 7 as vectors, each only inside T, still in the storage
// type; the loop advances 8 steps per iteration, carrying the 4 states, the
// 8 slots, the input's cursor and the two outputs' cursors.
// CHECK: scf.if %{{.*}} -> (vector<4xf32>)
// CHECK: llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// CHECK: llvm.inline_asm "add.s64 $0, $1, $2;", "=l,l,l" %{{.*}}, %{{.*}} : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>
// CHECK: scf.for {{.*}} step %c8_i64 iter_args({{.*}}) -> (f32, f32, f32, f32, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>)
// An iteration wholly inside T is unguarded: copy j computes step iv + j
// and stores through the output cursors, then refills its slot with step
// iv + j + 8 and advances the cursors.
// CHECK: arith.cmpi slt
// CHECK: scf.if %{{.*}} -> (f32, f32, f32, f32, vector<4xf32>
// CHECK-NOT: llvm.load
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
// CHECK: llvm.store
// CHECK-NEXT: llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// CHECK-NEXT: llvm.inline_asm "add.s64
// CHECK-NEXT: llvm.inline_asm "add.s64
// CHECK-NEXT: llvm.inline_asm "add.s64
// CHECK-NOT: llvm.load
// CHECK: llvm.store
// The last iterations: copy 0 runs, then refills only inside T; copies 1
// to 7 run and refill only inside T.
// CHECK: } else {
// CHECK-NOT: llvm.load
// CHECK: llvm.store
// CHECK: arith.cmpi slt
// CHECK-NEXT: scf.if %{{.*}} -> (vector<4xf32>)
// CHECK-NEXT: llvm.load %{{.*}} invariant
// CHECK: arith.cmpi slt
// CHECK-NEXT: scf.if %{{.*}} -> (f32, f32, f32, f32)
// CHECK: llvm.store
// CHECK: arith.cmpi slt
// CHECK-NEXT: scf.if %{{.*}} -> (vector<4xf32>)
// CHECK: gpu.return
// The scalar entry: thread g scans neuron g with scalar accesses (small
// NCL, odd NCL, unaligned pointers), 8 steps in flight (1 + 32 / 1).
// CHECK: gpu.module @lif_inference_scalar
// CHECK: gpu.func @lif_inference_scalar(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64) kernel attributes {flexsn.variant = "inference"}
// CHECK-NOT: vector<
// CHECK: llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK: scf.for {{.*}} step %c8_i64 iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>)
// CHECK: gpu.return
// CHECK: gpu.func @lif_final_state(
// CHECK: gpu.func @lif_final_state_scalar(
// W1: gpu.func @lif_inference(
// prefetch=1: the loop carries the 4 states only, and addresses row
// t * NCL of each sequence (no cursors).
// P1: scf.for %[[IV:.*]] = {{.*}} step %c1_i64 iter_args({{.*}}) -> (f32, f32, f32, f32)  : i64
// P1: arith.muli %[[IV]], %{{.*}} : i64
// P1: llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// W1-NOT: vector<
// W1-NOT: _scalar
// W1: gpu.func @lif_final_state(
// W1-NOT: _scalar
func.func @lif(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %one = arith.constant 1.0 : f32
    %h = arith.addf %vt, %xt : f32
    %hm = arith.subf %h, %one : f32
    %st = flexsn.spike %hm surrogate <atan> : f32
    %k = arith.subf %one, %st : f32
    %vn = arith.mulf %h, %k : f32
    flexsn.yield %st, %vn : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

func.func @no_lowering(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    // expected-error @+1 {{'ub.poison' op has no lowering to GPU kernels}}
    %p = ub.poison : f32
    flexsn.yield %p : f32
  }
  return %y : tensor<?x?xf32>
}

