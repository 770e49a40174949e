// expm1 and log1p keep their digits near 0 on the CPU: (expm1(1e-6 x)) * 1e6
// and (log1p(1e-6 x)) * 1e6 are x to f32 precision. MLIR 22's math-to-llvm
// writes them as exp(x) - 1 and log(1 + x), 2% off here; the CPU lowering
// calls libm's expm1f/log1pf (and expm1/log1p for f64).
// RUN: flexsn-run %s --func=em --T=2 --ncl=64 --check | FileCheck %s
// RUN: flexsn-run %s --func=em64 --T=2 --ncl=64 --check | FileCheck %s
// RUN: flexsn-opt %s --flexsn-cpu-pipeline | FileCheck %s --check-prefix=IR
// CHECK: check: ok
// IR-DAG: llvm.func @expm1f(f32) -> f32
// IR-DAG: llvm.func @log1pf(f32) -> f32
// IR-DAG: llvm.func @expm1(f64) -> f64
// IR-DAG: llvm.func @log1p(f64) -> f64
func.func @em(%x: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %y, %z = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32):
    %s = arith.constant 1.0e-6 : f32
    %b = arith.constant 1.0e6 : f32
    %a = arith.mulf %xt, %s : f32
    %e = math.expm1 %a : f32
    %r = arith.mulf %e, %b : f32
    %l = math.log1p %a : f32
    %q = arith.mulf %l, %b : f32
    flexsn.yield %r, %q : f32, f32
  }
  return %y, %z : tensor<?x?xf32>, tensor<?x?xf32>
}
func.func @em64(%x: tensor<?x?xf64>) -> (tensor<?x?xf64>, tensor<?x?xf64>) {
  %y, %z = flexsn.scan ins(%x : tensor<?x?xf64>) -> (tensor<?x?xf64>, tensor<?x?xf64>) {
  ^bb0(%xt: f64):
    %s = arith.constant 1.0e-12 : f64
    %b = arith.constant 1.0e12 : f64
    %a = arith.mulf %xt, %s : f64
    %e = math.expm1 %a : f64
    %r = arith.mulf %e, %b : f64
    %l = math.log1p %a : f64
    %q = arith.mulf %l, %b : f64
    flexsn.yield %r, %q : f64, f64
  }
  return %y, %z : tensor<?x?xf64>, tensor<?x?xf64>
}
