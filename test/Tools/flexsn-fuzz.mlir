// flexsn-fuzz: a short clean run prints one summary line; the same seed
// gives the same cores (the counts repeat); with a tolerance of 0 the
// ulp-level differences of f32 math count as mismatches, which exercises
// the failure path: a minimized core with a RUN line, exit 1. The kernels
// run include the transfer functions of every scan proven affine (the
// backward scans of every core with states) and each core's inference
// and final-state kernels reading chunks side by side (flexsn.chunk_width),
// and training kernels reading chunks side by side, with the chunk repair
// kernels of its inference, final-state and training forward kernels.
// RUN: flexsn-fuzz --count=40 --seed=11 --out=%t.ok | FileCheck %s --check-prefix=OK
// RUN: flexsn-fuzz --count=40 --seed=11 --out=%t.ok | FileCheck %s --check-prefix=OK
// OK: flexsn-fuzz: 40 cores (seed 11, #0-#39, cpu), 479 kernels run, 0 mismatches, 0 errors, 0 crashes;
// OK-SAME: : ok
// RUN: rm -rf %t.bad && not flexsn-fuzz --count=6 --seed=3 --tolerance=0 --out=%t.bad > %t.summary 2> %t.err
// RUN: FileCheck %s --check-prefix=BAD < %t.summary
// RUN: FileCheck %s --check-prefix=ERR < %t.err
// RUN: cat %t.bad/*.mlir | FileCheck %s --check-prefix=FILE
// BAD: mismatches
// BAD-SAME: FAIL
// ERR: flexsn-fuzz: core #{{[0-9]+}}: mismatch in
// ERR: written to
// FILE: // flexsn-fuzz --seed=3 --first={{[0-9]+}} --count=1: mismatch
// FILE: // {{RUN}}: flexsn-run %s --backend=cpu --variant=
// FILE-SAME: --tolerance=0
// FILE: func.func @core(
// With --prefetch the kernels run the pipelined loop, and a reproducer
// says so.
// RUN: flexsn-fuzz --count=20 --seed=11 --prefetch=3 --out=%t.p | FileCheck %s --check-prefix=POK
// POK: flexsn-fuzz: 20 cores (seed 11, #0-#19, cpu), 247 kernels run, 0 mismatches, 0 errors, 0 crashes;
// RUN: rm -rf %t.pbad && not flexsn-fuzz --count=6 --seed=3 --tolerance=0 --prefetch=3 --out=%t.pbad > /dev/null 2>&1
// RUN: cat %t.pbad/*.mlir | FileCheck %s --check-prefix=PFILE
// PFILE: // {{RUN}}: flexsn-run %s --backend=cpu
// PFILE-SAME: --prefetch=3 --check
// The auto saving policy (a minimum cut), same cores:
// RUN: flexsn-fuzz --count=20 --seed=11 --save-ops=auto --out=%t.a | FileCheck %s --check-prefix=AOK
// (247 kernels, plus the final-state pair of the 13 cores that have one
// and its transfer functions)
// AOK: flexsn-fuzz: 20 cores (seed 11, #0-#19, cpu), 342 kernels run, 0 mismatches, 0 errors, 0 crashes;
// RUN: not flexsn-fuzz --prefetch=33 --count=1 --out=%t.p9 2>&1 | FileCheck %s --check-prefix=P9
// P9: flexsn-fuzz: --prefetch=33: 0 (chosen per kernel) to 32 steps
// RUN: not flexsn-fuzz --l2-prefetch=257 --count=1 --out=%t.l2 2>&1 | FileCheck %s --check-prefix=L2
// L2: flexsn-fuzz: --l2-prefetch=257: 0 (none) to 256 steps
// FILE: flexsn.scan
// RUN: not flexsn-fuzz --count=1 --out=/dev/null/x 2>&1 | FileCheck %s --check-prefix=DIR
// DIR: flexsn-fuzz: error: cannot create '/dev/null/x'
