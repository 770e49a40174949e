// Every example parses, verifies, and prints text that re-parses to the
// identical text.
// RUN: flexsn-opt %flexsn_src_root/examples/lif.mlir -o %t.lif && flexsn-opt %t.lif | diff %t.lif -
// RUN: flexsn-opt %flexsn_src_root/examples/lif_soft_detach.mlir -o %t.soft && flexsn-opt %t.soft | diff %t.soft -
// RUN: flexsn-opt %flexsn_src_root/examples/if.mlir -o %t.if && flexsn-opt %t.if | diff %t.if -
// RUN: flexsn-opt %flexsn_src_root/examples/plif.mlir -o %t.plif && flexsn-opt %t.plif | diff %t.plif -
// RUN: flexsn-opt %flexsn_src_root/examples/two_in_two_state.mlir -o %t.2in && flexsn-opt %t.2in | diff %t.2in -
// Canonicalization leaves every example valid and still a scan.
// RUN: flexsn-opt -canonicalize %flexsn_src_root/examples/two_in_two_state.mlir | FileCheck %s
// CHECK: flexsn.scan ins(%{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?x?xf32>) states
