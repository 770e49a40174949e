// RUN: flexsn-opt %s -convert-flexsn-to-gpu | FileCheck %s
// The default prefetch depth also bounds the unrolled body: slots x lanes x
// body ops stay within 1024 op copies (compile time grows with them). This
// body is 128 ops (126 + spike + yield): the vector entry (4 lanes) keeps 2
// slots instead of the 8 its one input allows, the scalar entry 8.
// CHECK: gpu.func @big_inference(
// CHECK: scf.for {{.*}} step %c2_i64
// CHECK: gpu.func @big_inference_scalar(
// CHECK: scf.for {{.*}} step %c8_i64
func.func @big(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %c0 = arith.addf %vt, %xt : f32
    %c1 = arith.mulf %c0, %vt : f32
    %c2 = arith.addf %c1, %c0 : f32
    %c3 = arith.mulf %c2, %c1 : f32
    %c4 = arith.addf %c3, %c2 : f32
    %c5 = arith.mulf %c4, %c3 : f32
    %c6 = arith.addf %c5, %c4 : f32
    %c7 = arith.mulf %c6, %c5 : f32
    %c8 = arith.addf %c7, %c6 : f32
    %c9 = arith.mulf %c8, %c7 : f32
    %c10 = arith.addf %c9, %c8 : f32
    %c11 = arith.mulf %c10, %c9 : f32
    %c12 = arith.addf %c11, %c10 : f32
    %c13 = arith.mulf %c12, %c11 : f32
    %c14 = arith.addf %c13, %c12 : f32
    %c15 = arith.mulf %c14, %c13 : f32
    %c16 = arith.addf %c15, %c14 : f32
    %c17 = arith.mulf %c16, %c15 : f32
    %c18 = arith.addf %c17, %c16 : f32
    %c19 = arith.mulf %c18, %c17 : f32
    %c20 = arith.addf %c19, %c18 : f32
    %c21 = arith.mulf %c20, %c19 : f32
    %c22 = arith.addf %c21, %c20 : f32
    %c23 = arith.mulf %c22, %c21 : f32
    %c24 = arith.addf %c23, %c22 : f32
    %c25 = arith.mulf %c24, %c23 : f32
    %c26 = arith.addf %c25, %c24 : f32
    %c27 = arith.mulf %c26, %c25 : f32
    %c28 = arith.addf %c27, %c26 : f32
    %c29 = arith.mulf %c28, %c27 : f32
    %c30 = arith.addf %c29, %c28 : f32
    %c31 = arith.mulf %c30, %c29 : f32
    %c32 = arith.addf %c31, %c30 : f32
    %c33 = arith.mulf %c32, %c31 : f32
    %c34 = arith.addf %c33, %c32 : f32
    %c35 = arith.mulf %c34, %c33 : f32
    %c36 = arith.addf %c35, %c34 : f32
    %c37 = arith.mulf %c36, %c35 : f32
    %c38 = arith.addf %c37, %c36 : f32
    %c39 = arith.mulf %c38, %c37 : f32
    %c40 = arith.addf %c39, %c38 : f32
    %c41 = arith.mulf %c40, %c39 : f32
    %c42 = arith.addf %c41, %c40 : f32
    %c43 = arith.mulf %c42, %c41 : f32
    %c44 = arith.addf %c43, %c42 : f32
    %c45 = arith.mulf %c44, %c43 : f32
    %c46 = arith.addf %c45, %c44 : f32
    %c47 = arith.mulf %c46, %c45 : f32
    %c48 = arith.addf %c47, %c46 : f32
    %c49 = arith.mulf %c48, %c47 : f32
    %c50 = arith.addf %c49, %c48 : f32
    %c51 = arith.mulf %c50, %c49 : f32
    %c52 = arith.addf %c51, %c50 : f32
    %c53 = arith.mulf %c52, %c51 : f32
    %c54 = arith.addf %c53, %c52 : f32
    %c55 = arith.mulf %c54, %c53 : f32
    %c56 = arith.addf %c55, %c54 : f32
    %c57 = arith.mulf %c56, %c55 : f32
    %c58 = arith.addf %c57, %c56 : f32
    %c59 = arith.mulf %c58, %c57 : f32
    %c60 = arith.addf %c59, %c58 : f32
    %c61 = arith.mulf %c60, %c59 : f32
    %c62 = arith.addf %c61, %c60 : f32
    %c63 = arith.mulf %c62, %c61 : f32
    %c64 = arith.addf %c63, %c62 : f32
    %c65 = arith.mulf %c64, %c63 : f32
    %c66 = arith.addf %c65, %c64 : f32
    %c67 = arith.mulf %c66, %c65 : f32
    %c68 = arith.addf %c67, %c66 : f32
    %c69 = arith.mulf %c68, %c67 : f32
    %c70 = arith.addf %c69, %c68 : f32
    %c71 = arith.mulf %c70, %c69 : f32
    %c72 = arith.addf %c71, %c70 : f32
    %c73 = arith.mulf %c72, %c71 : f32
    %c74 = arith.addf %c73, %c72 : f32
    %c75 = arith.mulf %c74, %c73 : f32
    %c76 = arith.addf %c75, %c74 : f32
    %c77 = arith.mulf %c76, %c75 : f32
    %c78 = arith.addf %c77, %c76 : f32
    %c79 = arith.mulf %c78, %c77 : f32
    %c80 = arith.addf %c79, %c78 : f32
    %c81 = arith.mulf %c80, %c79 : f32
    %c82 = arith.addf %c81, %c80 : f32
    %c83 = arith.mulf %c82, %c81 : f32
    %c84 = arith.addf %c83, %c82 : f32
    %c85 = arith.mulf %c84, %c83 : f32
    %c86 = arith.addf %c85, %c84 : f32
    %c87 = arith.mulf %c86, %c85 : f32
    %c88 = arith.addf %c87, %c86 : f32
    %c89 = arith.mulf %c88, %c87 : f32
    %c90 = arith.addf %c89, %c88 : f32
    %c91 = arith.mulf %c90, %c89 : f32
    %c92 = arith.addf %c91, %c90 : f32
    %c93 = arith.mulf %c92, %c91 : f32
    %c94 = arith.addf %c93, %c92 : f32
    %c95 = arith.mulf %c94, %c93 : f32
    %c96 = arith.addf %c95, %c94 : f32
    %c97 = arith.mulf %c96, %c95 : f32
    %c98 = arith.addf %c97, %c96 : f32
    %c99 = arith.mulf %c98, %c97 : f32
    %c100 = arith.addf %c99, %c98 : f32
    %c101 = arith.mulf %c100, %c99 : f32
    %c102 = arith.addf %c101, %c100 : f32
    %c103 = arith.mulf %c102, %c101 : f32
    %c104 = arith.addf %c103, %c102 : f32
    %c105 = arith.mulf %c104, %c103 : f32
    %c106 = arith.addf %c105, %c104 : f32
    %c107 = arith.mulf %c106, %c105 : f32
    %c108 = arith.addf %c107, %c106 : f32
    %c109 = arith.mulf %c108, %c107 : f32
    %c110 = arith.addf %c109, %c108 : f32
    %c111 = arith.mulf %c110, %c109 : f32
    %c112 = arith.addf %c111, %c110 : f32
    %c113 = arith.mulf %c112, %c111 : f32
    %c114 = arith.addf %c113, %c112 : f32
    %c115 = arith.mulf %c114, %c113 : f32
    %c116 = arith.addf %c115, %c114 : f32
    %c117 = arith.mulf %c116, %c115 : f32
    %c118 = arith.addf %c117, %c116 : f32
    %c119 = arith.mulf %c118, %c117 : f32
    %c120 = arith.addf %c119, %c118 : f32
    %c121 = arith.mulf %c120, %c119 : f32
    %c122 = arith.addf %c121, %c120 : f32
    %c123 = arith.mulf %c122, %c121 : f32
    %c124 = arith.addf %c123, %c122 : f32
    %c125 = arith.mulf %c124, %c123 : f32
    %st = flexsn.spike %c125 surrogate <atan> : f32
    flexsn.yield %st, %c124 : f32, f32
  }
  return %s, %v : tensor<?x?xf32>, tensor<?x?xf32>
}
