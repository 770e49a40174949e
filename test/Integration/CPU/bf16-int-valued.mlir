// A bf16 store of an integer-valued step: the canonicalizer folds
// truncf(sitofp) into one integer-to-bf16 conversion (sitofp / uitofp to
// bf16), which LLVM lowers to a call of __truncsfbf2 on x86 CPUs without
// AVX512-BF16 (the JIT could not load such a kernel: a 2-core AMD EPYC,
// flexsn-fuzz seed 11 core #0). The CPU pipeline converts through f32
// instead, and arith-expand rounds to bf16 with integer ops: no bf16
// conversion reaches the back end, and every variant matches the
// interpreter. The pipelined loop (prefetch=3) carries its reads across
// blocks as i16 bits, not as bf16 values, which the back end would keep
// promoted and round through the same call (flexsn-fuzz seed 11 core #13
// at --prefetch=3, a bf16 input yielded unchanged).
// RUN: flexsn-run %s --func=ints --T=3 --ncl=7 --check | FileCheck %s
// RUN: flexsn-run %s --func=ints --variant=final_state --T=3 --ncl=7 --check | FileCheck %s
// RUN: flexsn-run %s --func=ints --variant=backward --T=3 --ncl=7 --check | FileCheck %s
// RUN: flexsn-run %s --func=ints --prefetch=3 --T=7 --ncl=7 --check | FileCheck %s
// RUN: flexsn-opt %s --flexsn-cpu-pipeline | FileCheck %s --check-prefix=IR
// RUN: flexsn-opt %s --flexsn-cpu-pipeline=prefetch=3 | FileCheck %s --check-prefix=IR
// CHECK: check: ok
// IR-NOT: truncsfbf2
// IR-NOT: to bf16
// IR-NOT: -> bf16
func.func @ints(%x: tensor<?x?xbf16>, %v0: tensor<?xf32>)
    -> (tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xf32>) {
  %a, %b, %v = flexsn.scan ins(%x : tensor<?x?xbf16>) states(%v0 : tensor<?xf32>)
      -> (tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %h = arith.addf %xt, %vt : f32
    %lo = arith.constant -1.0e+06 : f32
    %hi = arith.constant 1.0e+06 : f32
    %c0 = arith.minimumf %h, %hi : f32
    %c1 = arith.maximumf %c0, %lo : f32
    %i = arith.fptosi %c1 : f32 to i32
    %r = arith.sitofp %i : i32 to f32
    %one = arith.constant 1.0 : f32
    %fire = arith.cmpf oge, %h, %one : f32
    %s = arith.uitofp %fire : i1 to f32
    %half = arith.constant 0.5 : f32
    %nv = arith.mulf %h, %half : f32
    flexsn.yield %r, %s, %nv : f32, f32, f32
  }
  return %a, %b, %v : tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xf32>
}
