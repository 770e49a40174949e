// flexsn-translate's --options are the pipeline options (PipelineOptions),
// parsed and checked as the C API parses them: each error names the word.
// RUN: not flexsn-translate --flexsn-to-ptx --options='frobnicate=2' %s 2>&1 | FileCheck %s --check-prefix=UNKNOWN --implicit-check-not="see current operation"
// UNKNOWN: error: --options: unknown option 'frobnicate' (the options: chip, O, neurons-per-thread, block-size, prefetch, l2-prefetch, cuda-home, differentiate, transfer, save-ops
// RUN: not flexsn-translate --flexsn-to-manifest --options='block-size=abc' %s 2>&1 | FileCheck %s --check-prefix=NUMBER --implicit-check-not="value invalid"
// NUMBER: error: --options: 'block-size=abc': block-size takes an unsigned integer
// RUN: not flexsn-translate --flexsn-to-manifest --options='block-size=100' %s 2>&1 | FileCheck %s --check-prefix=RANGE
// RANGE: error: --options: block-size=100: a multiple of 32 from 32 to 1024
// RUN: not flexsn-translate --flexsn-to-manifest --options='neurons-per-thread=3' %s 2>&1 | FileCheck %s --check-prefix=NPT
// NPT: error: --options: neurons-per-thread=3: 1, 2, 4 or 8
// RUN: not flexsn-translate --flexsn-to-manifest --options='O=4' %s 2>&1 | FileCheck %s --check-prefix=OPT
// OPT: error: --options: O=4: the PTX optimization level is 0, 1, 2 or 3
// RUN: not flexsn-translate --flexsn-to-manifest --options='prefetch=33' %s 2>&1 | FileCheck %s --check-prefix=PREFETCH
// PREFETCH: error: --options: prefetch=33: 0 (chosen per kernel) to 32 steps
// RUN: not flexsn-translate --flexsn-to-manifest --options='l2-prefetch=257' %s 2>&1 | FileCheck %s --check-prefix=L2
// L2: error: --options: l2-prefetch=257: 0 (none) to 256 steps
// RUN: not flexsn-translate --flexsn-to-cpu-manifest --options='save-ops=flexsn.spike' %s 2>&1 | FileCheck %s --check-prefix=SAVE
// SAVE: error: --options: save-ops needs differentiate
// RUN: not flexsn-translate --flexsn-to-cpu-manifest --options='differentiate=maybe' %s 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: error: --options: 'differentiate=maybe': differentiate is true, false, 1 or 0
// RUN: not flexsn-translate --flexsn-to-cpu-manifest --options='chip' %s 2>&1 | FileCheck %s --check-prefix=VALUE
// VALUE: error: --options: 'chip' takes a value: chip=...
// RUN: not flexsn-translate --flexsn-to-cpu-manifest --options='transfer=maybe' %s 2>&1 | FileCheck %s --check-prefix=TFLAG
// TFLAG: error: --options: 'transfer=maybe': transfer is true, false, 1 or 0
// @f resets through its spike: no transfer function; its backward has one.
// RUN: not flexsn-translate --flexsn-to-cpu-manifest --options='transfer' %s 2>&1 | FileCheck %s --check-prefix=NOTAFFINE
// NOTAFFINE: error: flexsn-affine-transfer (replace): no scan updates its states affinely
// NOTAFFINE-NEXT: @f: state #0 is not affine in the states ('flexsn.spike' of a value that depends on the states)
// RUN: flexsn-translate --flexsn-to-cpu-manifest --options='differentiate transfer=1' %s | FileCheck %s --check-prefix=TRANSFER
// TRANSFER-NOT: "name": "f_inference"
// TRANSFER: "name": "f_backward_transfer_final_state"
// TRANSFER-NOT: "name": "f_forward
// Words may be separated by several spaces; a flag may be given as 1.
// RUN: flexsn-translate --flexsn-to-cpu-manifest --options='  differentiate=1   save-ops=flexsn.spike ' %s | FileCheck %s --check-prefix=OK
// OK: "name": "f_backward"
func.func @f(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %h = arith.addf %vt, %xt : f32
    %sp = flexsn.spike %h surrogate <sigmoid> : f32
    %r = arith.subf %h, %sp : f32
    flexsn.yield %sp, %r : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
