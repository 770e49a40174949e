// libFlexSN.so through its C API v3 (test/CAPI/capi-test.c): CPU and CUDA
// programs, the manifest without CUDA, CPU launches against a hand-written
// LIF, argument checks (pointer count, NULL, T/NCL, overflow), operand
// numbering with an unused input, the CPU object cache, error messages;
// without a GPU the CUDA entry points fail cleanly.
// UNSUPPORTED: cuda
// Every error is a message, never a print: stderr is checked too.
// RUN: flexsn-capi-test %flexsn_src_root/examples/lif.mlir cpu 2>&1 | FileCheck %s --implicit-check-not="value invalid" --implicit-check-not="invalid value"
// CHECK: version: flexsn-mlir
// CHECK-NOT: FAIL
// CHECK: ok: a NULL grad_state_seq reads as zeros (same gradients)
// CHECK: ok: the kernel reads y as input #1 and q as param #1
// CHECK: ok: a new program's kernel from the cached object gives the same results
// CHECK: ok: a damaged cached object is compiled again
// CHECK: ok: a compile error names the problem without dumping the module
// CHECK: ok: load_cuda rebuilds the program from its PTX and manifest
// CHECK: ok: without a GPU, device_count fails cleanly
// CHECK: ok: without a GPU, kernel_get fails cleanly
// CHECK: ALL OK
