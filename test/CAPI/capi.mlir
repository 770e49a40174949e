// libFlexSN.so through its C API (test/CAPI/capi-test.c): compile, manifest,
// CPU JIT run against a hand-written LIF, error messages; without a GPU the
// CUDA entry points fail cleanly.
// UNSUPPORTED: cuda
// RUN: flexsn-capi-test %flexsn_src_root/examples/lif.mlir cpu | FileCheck %s
// CHECK: version: flexsn-mlir
// CHECK-NOT: FAIL
// CHECK: ok: without a GPU, cuda_open fails cleanly
// CHECK: ALL OK
