// Without a GPU, --backend=cuda fails cleanly: no crash, a message that
// says what is missing, exit status 2.
// UNSUPPORTED: cuda
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --check 2>&1 | FileCheck %s
// CHECK: flexsn-run: error: {{no CUDA driver|no CUDA device|CUDA driver too old}}
