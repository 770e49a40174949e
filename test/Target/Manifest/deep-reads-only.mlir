// A kernel that writes no sequence (final states of a scan without
// outputs: chunk guesses, transfer functions) keeps twice the deep entry's
// bytes of reads in flight: the same 4 bytes a step take 32 steps there
// and 16 in the kernel that also writes the state sequence.
// RUN: flexsn-translate --flexsn-to-manifest %s | FileCheck %s
// CHECK: "name": "integrate_inference"
// CHECK: "deep_entry": "integrate_inference_deep"
// CHECK-NEXT: "deep_prefetch": 16
// CHECK: "name": "integrate_final_state"
// CHECK: "deep_entry": "integrate_final_state_deep"
// CHECK-NEXT: "deep_prefetch": 32
// With an output, the final-state kernel writes it: 16 steps.
// RUN: flexsn-translate --flexsn-to-manifest %flexsn_src_root/examples/lif.mlir | FileCheck %s --check-prefix=OUT
// OUT: "name": "lif_final_state"
// OUT: "deep_prefetch": 16
func.func @integrate(%x: tensor<?x?xf32>, %v0: tensor<?xf32>) -> tensor<?x?xf32> {
  %v = flexsn.scan ins(%x : tensor<?x?xf32>) states(%v0 : tensor<?xf32>) -> (tensor<?x?xf32>) {
  ^bb0(%xt: f32, %vt: f32):
    %h = arith.addf %vt, %xt : f32
    flexsn.yield %h : f32
  }
  return %v : tensor<?x?xf32>
}
