// Every example's PTX assembles with ptxas and calls no unresolved function.
// REQUIRES: ptxas
// RUN: flexsn-translate --flexsn-to-ptx %flexsn_src_root/examples/lif.mlir -o %t.lif.ptx
// RUN: %ptxas -arch=sm_90 %t.lif.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.lif.ptx --check-prefix=LIF --implicit-check-not=.extern
// RUN: flexsn-translate --flexsn-to-ptx %flexsn_src_root/examples/if.mlir -o %t.if.ptx
// RUN: %ptxas -arch=sm_90 %t.if.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.if.ptx --check-prefix=ANY --implicit-check-not=.extern
// RUN: flexsn-translate --flexsn-to-ptx %flexsn_src_root/examples/plif.mlir -o %t.plif.ptx
// RUN: %ptxas -arch=sm_90 %t.plif.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.plif.ptx --check-prefix=ANY --implicit-check-not=.extern
// RUN: flexsn-translate --flexsn-to-ptx %flexsn_src_root/examples/lif_soft_detach.mlir -o %t.soft.ptx
// RUN: %ptxas -arch=sm_90 %t.soft.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.soft.ptx --check-prefix=ANY --implicit-check-not=.extern
// RUN: flexsn-translate --flexsn-to-ptx %flexsn_src_root/examples/two_in_two_state.mlir -o %t.2in.ptx
// RUN: %ptxas -arch=sm_90 %t.2in.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.2in.ptx --check-prefix=ANY --implicit-check-not=.extern
// sm_80 and one neuron per thread also assemble.
// RUN: flexsn-translate --flexsn-to-ptx --options='chip=sm_80 neurons-per-thread=1' %flexsn_src_root/examples/two_in_two_state.mlir -o %t.80.ptx
// RUN: %ptxas -arch=sm_80 %t.80.ptx -o %t.cubin
// Training kernels (flexsn-differentiate) of every example assemble too.
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate' %flexsn_src_root/examples/lif.mlir -o %t.dlif.ptx
// RUN: %ptxas -arch=sm_90 %t.dlif.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.dlif.ptx --check-prefix=TRAIN --implicit-check-not=.extern
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate' %flexsn_src_root/examples/plif.mlir -o %t.dplif.ptx
// RUN: %ptxas -arch=sm_90 %t.dplif.ptx -o %t.cubin
// RUN: FileCheck %s --input-file=%t.dplif.ptx --check-prefix=TRAIN --implicit-check-not=.extern
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate' %flexsn_src_root/examples/if.mlir -o %t.dif.ptx
// RUN: %ptxas -arch=sm_90 %t.dif.ptx -o %t.cubin
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate' %flexsn_src_root/examples/lif_soft_detach.mlir -o %t.dsoft.ptx
// RUN: %ptxas -arch=sm_90 %t.dsoft.ptx -o %t.cubin
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate' %flexsn_src_root/examples/two_in_two_state.mlir -o %t.d2in.ptx
// RUN: %ptxas -arch=sm_90 %t.d2in.ptx -o %t.cubin
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate save-ops=flexsn.spike' %flexsn_src_root/examples/lif.mlir -o %t.dsave.ptx
// RUN: %ptxas -arch=sm_90 %t.dsave.ptx -o %t.cubin
// RUN: flexsn-translate --flexsn-to-ptx --options='differentiate chip=sm_80' %flexsn_src_root/test/Integration/Autodiff/surrogates.mlir -o %t.dsur.ptx
// RUN: %ptxas -arch=sm_80 %t.dsur.ptx -o %t.cubin
// TRAIN-DAG: .entry {{[a-z_]+}}_forward(
// TRAIN-DAG: .entry {{[a-z_]+}}_backward(
// RUN: FileCheck %s --input-file=%t.80.ptx --check-prefix=SM80 --implicit-check-not=.extern
// LIF: .target sm_90
// LIF: .visible .entry lif_inference(
// LIF: ld.global.v4.b32
// LIF: st.global.v4.b32
// LIF: .visible .entry lif_final_state(
// ANY: .visible .entry {{.*}}_inference(
// ANY: .visible .entry {{.*}}_final_state(
// SM80: .target sm_80
// SM80-NOT: .v4.
