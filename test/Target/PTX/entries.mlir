// The runtime loads each kernel entry as its own module (the driver then
// compiles only the entries a program launches): every such module of the
// training kernels assembles alone and defines exactly its entry.
// REQUIRES: ptxas
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate' %flexsn_src_root/examples/two_in_two_state.mlir -o %t.all.ptx
// RUN: FileCheck %s --input-file=%t.all.ptx --check-prefix=ALL
// RUN: %ptxas -arch=sm_90 %t.all.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.all.ptx --check-prefix=ONCE
// ALL-COUNT-8: .visible .entry
// ALL-NOT: .visible .entry
// The entries are compiled as modules of their own and merged: one header,
// one definition of the zeros global the backward reads for absent
// gradients.
// ONCE: .version
// ONCE-NOT: .version
// ONCE: .global .align 16 .b8 __flexsn_zeros[64];
// ONCE-NOT: __flexsn_zeros[64]
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate' --ptx-entry=two_in_two_state_forward %flexsn_src_root/examples/two_in_two_state.mlir -o %t.fwd.ptx
// RUN: %ptxas -arch=sm_90 %t.fwd.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.fwd.ptx --check-prefix=FWD
// FWD: .target sm_90
// FWD-NOT: .entry
// FWD: .visible .entry two_in_two_state_forward(
// FWD-NOT: .entry
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate' --ptx-entry=two_in_two_state_backward_scalar %flexsn_src_root/examples/two_in_two_state.mlir -o %t.bwd.ptx
// RUN: %ptxas -arch=sm_90 %t.bwd.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.bwd.ptx --check-prefix=BWD
// BWD-NOT: .entry
// BWD: .visible .entry two_in_two_state_backward_scalar(
// BWD-NOT: .entry
// In bf16 storage the backward's 8 sequences are 16 bytes a step: its deep
// entry keeps 8 steps in flight (kDeepMinSteps), where the scalar entry
// keeps 5; in f32 (32 bytes a step, above) it has none.
// RUN: sed -e 's/xf32>/xbf16>/g' %flexsn_src_root/examples/two_in_two_state.mlir > %t.bf16.mlir
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate' --ptx-entry=two_in_two_state_backward_deep %t.bf16.mlir -o %t.deep.ptx
// RUN: %ptxas -arch=sm_90 %t.deep.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.deep.ptx --check-prefix=DEEP
// DEEP-NOT: .entry
// DEEP: .visible .entry two_in_two_state_backward_deep(
// DEEP-NOT: .entry
// RUN: flexsn-translate --flexsn-to-manifest --options='differentiate' %t.bf16.mlir | FileCheck %s --check-prefix=DEPTH
// DEPTH: "name": "two_in_two_state_backward"
// DEPTH: "deep_entry": "two_in_two_state_backward_deep"
// DEPTH-NEXT: "deep_prefetch": 8
// RUN: flexsn-translate --flexsn-to-manifest --options='differentiate' %flexsn_src_root/examples/two_in_two_state.mlir | FileCheck %s --check-prefix=DEPTH32
// DEPTH32: "name": "two_in_two_state_backward"
// DEPTH32-NOT: "deep_entry"
// A backward with a sum over neurons (workgroup memory, atomics) too.
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate' --ptx-entry=plif_backward %flexsn_src_root/examples/plif.mlir -o %t.plif.ptx
// RUN: %ptxas -arch=sm_90 %t.plif.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.plif.ptx --check-prefix=PLIF
// PLIF: .visible .entry plif_backward(
// PLIF: atom.global.add.f64
// RUN: not flexsn-translate --flexsn-to-ptx --ptx-entry=nope %flexsn_src_root/examples/lif.mlir 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: --ptx-entry: the PTX has no entry 'nope'
