// Without libdevice, a math op stays an external call: an error, not PTX.
// REQUIRES: ptxas
// RUN: not flexsn-translate --flexsn-to-ptx --cuda-home=%t.nonexistent %flexsn_src_root/examples/plif.mlir 2>&1 | FileCheck %s
// CHECK: error: the PTX calls 1 unresolved external function(s); is libdevice at {{.*}}nonexistent/nvvm/libdevice? Set CUDA_HOME.
// CHECK: note: .extern .func {{.*}}__nv_expf
