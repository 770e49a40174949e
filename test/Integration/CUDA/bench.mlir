// flexsn-run --bench on the GPU: the entry and launch shape, the 2 x 1 GiB
// copy's bandwidth, the kernel's median against that floor, and against a
// copy of the kernel's own bytes timed the same way (issue 12's "% of a
// device copy of the same bytes": the same launch and ramp-up costs).
// REQUIRES: cuda
// RUN: flexsn-run %flexsn_src_root/examples/lif.mlir --backend=cuda --variant=inference --dtype=bf16 --T=4 --ncl=65536 --bench --reps=3 | FileCheck %s

// The launch picks the entry by NCL and the device's SMs (at NCL=64K on an
// H100: the scalar entry, one neuron a thread).
// CHECK: bench: entry lif_inference{{(_scalar|_deep)?}} ({{[0-9]}} neuron(s) per thread, blocks of {{[0-9]+}} threads
// CHECK: bench: copy {{[0-9]+}} GB/s (device-to-device, 2 x 1 GiB, median of {{[0-9]+}})
// CHECK: bench: kernel median {{[0-9.]+}} ms over {{[0-9]+}} runs, 1703936 bytes (floor {{[0-9.]+}} ms), {{[0-9]+}} GB/s, {{[0-9]+}}% of copy
// CHECK: bench: same-size copy median {{[0-9.]+}} ms (851968 bytes copied, the kernel's bytes moved); kernel at {{[0-9]+}}% of a same-size copy
