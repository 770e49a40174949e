// The one-neuron-per-thread entries (scalar, deep) ask L2 for the reads of
// the steps `l2-prefetch` ahead of their slots, gated per launch by NCL <=
// 128 x %nsmid and per iteration by the steps lying inside T; the vector
// entry, a loop of depth 1 and l2-prefetch=0 have none. 32 is the default.
// The PTX assembles.
// RUN: flexsn-opt %s -convert-flexsn-to-gpu="l2-prefetch=32" | FileCheck %s
// RUN: flexsn-opt %s -convert-flexsn-to-gpu | FileCheck %s
// RUN: flexsn-opt %s -convert-flexsn-to-gpu="l2-prefetch=0" | FileCheck %s --check-prefix=OFF --implicit-check-not=prefetch.global --implicit-check-not=nsmid
// RUN: flexsn-opt %s -convert-flexsn-to-gpu="prefetch=1 l2-prefetch=32" | FileCheck %s --check-prefix=OFF --implicit-check-not=prefetch.global --implicit-check-not=nsmid
// RUN: not flexsn-opt %s -convert-flexsn-to-gpu="l2-prefetch=257" 2>&1 | FileCheck %s --check-prefix=RANGE

// CHECK-LABEL: gpu.module @lif_inference {
// CHECK-NOT: prefetch.global
// CHECK-LABEL: gpu.module @lif_inference_scalar {
// The gate: NCL (the last argument) against 128 threads per SM id.
// CHECK: gpu.func @lif_inference_scalar(%{{.*}}: i64, %[[NCL:.*]]: i64)
// CHECK-DAG: %[[C128:.*]] = arith.constant 128 : i64
// CHECK-DAG: %[[SMS:.*]] = nvvm.read.ptx.sreg.nsmid : i32
// CHECK: %[[SMS64:.*]] = arith.extui %[[SMS]] : i32 to i64
// CHECK: %[[MAX:.*]] = arith.muli %[[SMS64]], %[[C128]] : i64
// CHECK: %[[GATE:.*]] = arith.cmpi ule, %[[NCL]], %[[MAX]] : i64
// Each iteration (8 steps at this entry's depth): when iv < T - (2 x 8 +
// 32) and the gate holds, 8 prefetches, the first 32 steps past the
// cursor, then one stride each.
// CHECK: scf.for %[[IV:.*]] = %{{.*}} to %[[T:[^ ]*]] step %c8_i64
// CHECK: %[[LIMIT:.*]] = arith.subi %[[T]], %c48_i64 : i64
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[IV]], %[[LIMIT]] : i64
// CHECK: %[[ON:.*]] = arith.andi %[[IN]], %[[GATE]] : i1
// CHECK: scf.if %[[ON]] {
// CHECK-COUNT-8: llvm.inline_asm has_side_effects "prefetch.global.L2 [$0];", "l"
// CHECK-NOT: prefetch.global
// CHECK: }
// The deep entry (16 steps of f32 reads): 16 prefetches an iteration.
// CHECK-LABEL: gpu.module @lif_inference_deep {
// CHECK: nvvm.read.ptx.sreg.nsmid
// CHECK: step %c16_i64
// CHECK: arith.subi %{{.*}}, %c64_i64 : i64
// CHECK: scf.if
// CHECK-COUNT-16: prefetch.global.L2
// CHECK-NOT: prefetch.global
// CHECK: }

// OFF-LABEL: gpu.module @lif_inference_scalar {
// RUN: %if ptxas %{ flexsn-translate --flexsn-to-ptx --options='differentiate l2-prefetch=32' %s -o %t.ptx %}
// RUN: %if ptxas %{ FileCheck %s --input-file=%t.ptx --check-prefix=PTX %}
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t.ptx -o %t.cubin %}
// PTX: .entry lif_backward_scalar(
// PTX: %nsmid
// PTX: prefetch.global.L2
// RANGE: error: l2-prefetch must be 0 (none) to 256 steps, got 257

func.func @lif(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %h = arith.addf %vt, %xt : f32
    %sp = flexsn.spike %h surrogate <sigmoid> : f32
    %r = arith.subf %h, %sp : f32
    flexsn.yield %sp, %r : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
