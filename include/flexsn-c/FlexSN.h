/*===- FlexSN.h - C API of FlexSN-MLIR ----------------------------*- C -*-===*\
|*                                                                            *|
|* One shared library (libFlexSN.so) holds the compiler (MLIR/LLVM linked     *|
|* statically) and the runtimes; this header is all it exports. Functions     *|
|* that can fail return 0 on success and non-zero on failure, with a          *|
|* message in *error (free it with flexsn_free) when error is not NULL.       *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef FLEXSN_C_FLEXSN_H
#define FLEXSN_C_FLEXSN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version string of the library ("flexsn-mlir <version>, MLIR 22"). */
const char *flexsn_version(void);

/* Frees a string or buffer the library returned. */
void flexsn_free(void *ptr);

/*--- Compiler -------------------------------------------------------------*/

typedef struct flexsn_program flexsn_program;

/* Compiles flexsn IR (text) to PTX and a kernel manifest (JSON).
 * `options`: space-separated key=value pairs, all optional:
 *   chip=sm_90  neurons-per-thread=4  block-size=256  cuda-home=PATH
 *   differentiate=1 (also the training forward/backward kernels)
 *   save-ops=OP,OP  (with differentiate: saved intermediates)
 * Errors carry MLIR's diagnostics with their source locations. */
int flexsn_compile(const char *mlir_source, const char *options,
                   flexsn_program **program, char **error);
/* NUL-terminated PTX of every kernel; valid until the program is freed. */
const char *flexsn_program_ptx(const flexsn_program *program);
/* The kernel manifest (JSON, format "flexsn-manifest" version 2). */
const char *flexsn_program_manifest(const flexsn_program *program);
void flexsn_program_destroy(flexsn_program *program);

/*--- CPU backend (JIT) ----------------------------------------------------*/

typedef struct flexsn_cpu_kernels flexsn_cpu_kernels;

/* JIT-compiles the module's kernels for this CPU (same `options` keys as
 * flexsn_compile; only differentiate and save-ops apply). */
int flexsn_cpu_compile(const char *mlir_source, const char *options,
                       flexsn_cpu_kernels **kernels, char **error);
/* Runs kernel `name` with its pointer arguments in manifest order over T
 * steps and NCL neurons on `threads` threads (0: all). Buffers of role
 * sum_state must be zeroed by the caller. */
int flexsn_cpu_run(flexsn_cpu_kernels *kernels, const char *name,
                   void *const *ptrs, size_t num_ptrs, int64_t T, int64_t NCL,
                   unsigned threads, char **error);
void flexsn_cpu_destroy(flexsn_cpu_kernels *kernels);

/*--- CUDA backend (driver API, libcuda loaded at run time) ----------------*/

typedef struct flexsn_cuda_device flexsn_cuda_device;

/* Opens GPU `ordinal` (its primary context). Fails cleanly with "no CUDA
 * driver", "CUDA driver too old" or "no CUDA device" where that is so. */
int flexsn_cuda_open(int ordinal, flexsn_cuda_device **device, char **error);
/* "NVIDIA H100 80GB HBM3, sm_90, driver 13.0"; free with flexsn_free. */
char *flexsn_cuda_describe(const flexsn_cuda_device *device);
/* Compute capability as major * 10 + minor. */
int flexsn_cuda_capability(const flexsn_cuda_device *device);
/* Launches kernel `name` of `ptx` (loaded once per device and cached by its
 * hash) with `ptrs` (device pointers, manifest order), T and NCL on
 * `stream` (a CUstream; NULL: the default stream), with `block_size`
 * threads per block and `neurons_per_thread` from the manifest. Returns
 * without waiting. */
int flexsn_cuda_launch(flexsn_cuda_device *device, const char *ptx,
                       const char *name, const uint64_t *ptrs,
                       size_t num_ptrs, int64_t T, int64_t NCL,
                       unsigned block_size, unsigned neurons_per_thread,
                       void *stream, char **error);
/* Waits for the device; reports an earlier launch's failure. */
int flexsn_cuda_synchronize(flexsn_cuda_device *device, char **error);
void flexsn_cuda_close(flexsn_cuda_device *device);

#ifdef __cplusplus
}
#endif

#endif /* FLEXSN_C_FLEXSN_H */
