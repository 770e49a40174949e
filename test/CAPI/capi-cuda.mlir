// The C API's CUDA entry points on a GPU: open, describe, PTX the driver
// rejects, unknown kernel.
// REQUIRES: cuda
// RUN: flexsn-capi-test %flexsn_src_root/examples/lif.mlir cuda | FileCheck %s
// CHECK: device: NVIDIA
// CHECK-NOT: FAIL
// CHECK: ALL OK
