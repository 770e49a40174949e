// The launch's block size (cuda::chooseScanBlockSize), on an H100's 132
// SMs with a largest block of 256; occupancy figures are blocks per SM of
// 256, 128, 64 and 32 threads.
//
// Without occupancy figures: halve while the grid has fewer than 2 blocks
// per SM (264). 65536 threads: 256 blocks of 256 -> 512 of 128.
// RUN: flexsn-runtime-test block 65536 256 132 | FileCheck %s --check-prefix=B128
// 1M threads: many blocks of 256.
// RUN: flexsn-runtime-test block 1048576 256 132 | FileCheck %s --check-prefix=B256
// A small NCL: the smallest block, to reach more SMs.
// RUN: flexsn-runtime-test block 1000 256 132 | FileCheck %s --check-prefix=B32
//
// With occupancy: two_in_two_state's scalar backward (84 registers: 2, 5,
// 10, 21 blocks per SM). At 69632 threads, 272 blocks of 256 fill 264
// slots and need a second wave; 544 of 128 fit 660 slots in one.
// RUN: flexsn-runtime-test block 69632 256 132 2 5 10 21 | FileCheck %s --check-prefix=B128
// Without the figures the old rule kept 256 there.
// RUN: flexsn-runtime-test block 69632 256 132 | FileCheck %s --check-prefix=B256
// Where every size takes the same waves, the old rule decides.
// RUN: flexsn-runtime-test block 65536 256 132 2 5 10 21 | FileCheck %s --check-prefix=B128
// RUN: flexsn-runtime-test block 1048576 256 132 8 16 32 32 | FileCheck %s --check-prefix=B256
// An unknown figure (0) leaves that size out of the wave count.
// RUN: flexsn-runtime-test block 69632 256 132 0 5 10 21 | FileCheck %s --check-prefix=B128
// B32: {{^32$}}
// B128: {{^128$}}
// B256: {{^256$}}
