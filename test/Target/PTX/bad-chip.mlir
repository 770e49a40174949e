// A chip that is not an NVIDIA architecture is refused by name (LLVM would
// take any string and fail later with "Minimum NVVM target SM version").
// RUN: not flexsn-translate --flexsn-to-ptx --options='chip=x86_64' %flexsn_src_root/examples/lif.mlir 2>&1 | FileCheck %s --implicit-check-not="see current operation"
// RUN: not flexsn-translate --flexsn-to-ptx --options='chip=sm_' %flexsn_src_root/examples/lif.mlir 2>&1 | FileCheck %s
// CHECK: chip '{{.*}}' is not an NVIDIA GPU architecture (sm_XX
// RUN: flexsn-translate --flexsn-to-ptx --options='chip=sm_90a' %flexsn_src_root/examples/lif.mlir | FileCheck %s --check-prefix=OK
// OK: .target sm_90a
