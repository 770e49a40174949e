// flexsn-run refuses sizes and tolerances it cannot honour, with a message
// and exit status 2: T * NCL that wraps 64 bits, a negative or NaN
// tolerance.
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --T=4611686018427387904 --ncl=4 2>&1 | FileCheck %s --check-prefix=OVERFLOW
// OVERFLOW: overflows 64-bit buffer sizes
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --T=4 --ncl=4 --check --tolerance=-1 2>&1 | FileCheck %s --check-prefix=TOL
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --T=4 --ncl=4 --check --tolerance=nan 2>&1 | FileCheck %s --check-prefix=TOL
// TOL: --tolerance must be a finite number >= 0
// An op name in save-ops that no dialect registers is an error.
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --T=4 --ncl=4 --variant=backward --save-ops=math.nope 2>&1 | FileCheck %s --check-prefix=SAVE
// SAVE: save-ops names 'math.nope', which is neither 'auto' nor a registered operation
// --help lists the tools' own options, not LLVM's (those stay reachable
// through --help-hidden).
// RUN: flexsn-run --help | FileCheck %s --check-prefix=HELP --implicit-check-not=devirt
// HELP: flexsn-run options:
// HELP: --prefetch=<uint> {{.*}}1-32
// RUN: flexsn-fuzz --help | FileCheck %s --check-prefix=FUZZHELP --implicit-check-not=devirt
// FUZZHELP: flexsn-fuzz options:
// FUZZHELP: --count
// The compilation's flags are PipelineOptions', checked by its validate().
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --prefetch=40 2>&1 | FileCheck %s --check-prefix=PF
// PF: flexsn-run: error: --prefetch=40: 0 (chosen per kernel) to 32 steps
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --neurons-per-thread=3 2>&1 | FileCheck %s --check-prefix=NPT
// NPT: flexsn-run: error: --neurons-per-thread=3: 1, 2, 4 or 8
// RUN: not flexsn-run %flexsn_src_root/examples/lif.mlir --block-size=100 2>&1 | FileCheck %s --check-prefix=BS
// BS: flexsn-run: error: --block-size=100: a multiple of 32 from 32 to 1024
