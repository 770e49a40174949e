// Without libdevice, a math op stays an external call: an error, not PTX.
// REQUIRES: ptxas
// RUN: not flexsn-translate --flexsn-to-ptx --options='cuda-home=%t.nonexistent' %flexsn_src_root/examples/plif.mlir 2>&1 | FileCheck %s
// CHECK: error: the PTX calls 1 unresolved external function(s); is libdevice at {{.*}}nonexistent/nvvm/libdevice? Set CUDA_HOME.
// CHECK: note: .extern .func {{.*}}__nv_expf

// The error is the message and the location, without a note that dumps the
// lowered module.
// RUN: not flexsn-translate --flexsn-to-ptx --options='cuda-home=/nonexistent' %flexsn_src_root/examples/plif.mlir 2>&1 | FileCheck %s --check-prefix=QUIET --implicit-check-not="see current operation"
// QUIET: error: CUDA path: /nonexistent does not exist
