// The PTX text edits of the CUDA runtime (PTXText.h), on hand-written PTX:
// comments holding braces, a .func helper, a nested scope in an entry.
//
// One entry's module keeps every module-scope statement but the other
// entries.
// RUN: flexsn-runtime-test extract %S/Inputs/a.ptx first | FileCheck %s --check-prefix=FIRST
// FIRST: .version 8.0
// FIRST: .global .align 16 .b8 zeros[64];
// FIRST: a block comment with { braces }
// FIRST: .func (.param .b32 ret) helper(
// FIRST: .visible .entry first(
// FIRST: { // a nested scope
// FIRST: mov.b32 %inner, 1;
// FIRST-NOT: .entry second
// RUN: flexsn-runtime-test extract %S/Inputs/a.ptx second | FileCheck %s --check-prefix=SECOND
// SECOND: helper(
// SECOND-NOT: .entry first
// SECOND: .visible .entry second(
//
// No such entry, unbalanced braces: no result.
// RUN: not flexsn-runtime-test extract %S/Inputs/a.ptx third 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not flexsn-runtime-test extract %S/Inputs/unbalanced.ptx open 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: none
//
// Merged: the header once, the shared global once, every entry.
// RUN: flexsn-runtime-test merge %S/Inputs/a.ptx %S/Inputs/b.ptx > %t.ptx
// RUN: FileCheck %s --input-file=%t.ptx --check-prefix=MERGE
// RUN: FileCheck %s --input-file=%t.ptx --check-prefix=ONCE
// MERGE: .version 8.0
// MERGE: .visible .entry first(
// MERGE: .visible .entry second(
// MERGE: .visible .entry third(
// ONCE: .version
// ONCE-NOT: .version
// ONCE: zeros[64]
// ONCE-NOT: zeros[64]
//
// Different headers, a variable declared two ways, an entry twice: no
// result.
// RUN: not flexsn-runtime-test merge %S/Inputs/a.ptx %S/Inputs/other-target.ptx 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not flexsn-runtime-test merge %S/Inputs/a.ptx %S/Inputs/other-zeros.ptx 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not flexsn-runtime-test merge %S/Inputs/a.ptx %S/Inputs/first-again.ptx 2>&1 | FileCheck %s --check-prefix=NONE
//
// A .func defined again with another body (LLVM optimizes a libdevice
// helper per entry): the later module's definition, declaration and calls
// take a new name; other identifiers that contain the name stay.
// RUN: flexsn-runtime-test merge %S/Inputs/a.ptx %S/Inputs/helper-again.ptx > %t.h.ptx
// RUN: FileCheck %s --input-file=%t.h.ptx --check-prefix=RENAME
// RENAME: .func (.param .b32 ret) helper(
// RENAME: ld.param.b32 %r1, [x];   // a { in a comment
// RENAME: .func (.param .b32 ret) helper_m1_1(
// RENAME-NEXT: .param .b32 x
// RENAME-NEXT: )
// RENAME-NEXT: ;
// RENAME: .func (.param .b32 ret) helper_m1_1(
// RENAME: add.s32
// RENAME: .visible .entry fourth(
// RENAME: .reg .b32 %helper_count;
// RENAME: call.uni (retval0), helper_m1_1, (param0);
