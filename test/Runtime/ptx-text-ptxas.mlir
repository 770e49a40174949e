// What the PTX text edits return assembles (hand-written inputs).
// REQUIRES: ptxas
// RUN: %ptxas -arch=sm_90 %S/Inputs/a.ptx -o %t.cubin
// RUN: flexsn-runtime-test extract %S/Inputs/a.ptx first > %t.first.ptx
// RUN: %ptxas -arch=sm_90 %t.first.ptx -o %t.cubin
// RUN: flexsn-runtime-test merge %S/Inputs/a.ptx %S/Inputs/b.ptx > %t.merged.ptx
// RUN: %ptxas -arch=sm_90 %t.merged.ptx -o %t.cubin
// RUN: flexsn-runtime-test merge %S/Inputs/a.ptx %S/Inputs/helper-again.ptx > %t.h.ptx
// RUN: %ptxas -arch=sm_90 %t.h.ptx -o %t.cubin
