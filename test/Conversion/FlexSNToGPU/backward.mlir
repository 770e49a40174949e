// The backward kernel of PLIF on the GPU: the lagged state sequence is read
// through a pointer select (row t-1, or the initial state at t = 0); the
// scalar parameter's gradient is summed per thread (f32), widened, summed
// across the block in f64 (gpu.all_reduce, lowered here to shuffles and
// workgroup memory) and added to an f64 buffer with one atomic per block:
// the error does not grow with the number of blocks.
// RUN: flexsn-opt %flexsn_src_root/examples/plif.mlir --canonicalize --flexsn-differentiate --convert-flexsn-to-gpu | FileCheck %s
// RUN: flexsn-opt %flexsn_src_root/examples/plif.mlir --canonicalize --flexsn-differentiate --convert-flexsn-to-cpu-kernels | FileCheck %s --check-prefix=CPU

// CHECK-LABEL: gpu.func @plif_backward(
// CHECK-SAME: workgroup(%{{.*}} : memref<32xf64, #gpu.address_space<workgroup>>)
// CHECK-SAME: flexsn.variant = "backward"
// CHECK: llvm.select %{{.*}}, %{{.*}}, %{{.*}} : i1, !llvm.ptr
// CHECK: arith.extf %{{.*}} : f32 to f64
// CHECK: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK: llvm.atomicrmw fadd %{{.*}}, %{{.*}} monotonic : !llvm.ptr, f64

// On the CPU each call (a chunk of neurons) adds its share atomically.
// CPU-LABEL: func.func @plif_backward(
// CPU: llvm.select %{{.*}}, %{{.*}}, %{{.*}} : i1, !llvm.ptr
// CPU: scf.yield
// CPU: llvm.atomicrmw fadd %{{.*}}, %{{.*}} monotonic : !llvm.ptr, f64
