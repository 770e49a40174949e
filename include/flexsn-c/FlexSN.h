/*===- FlexSN.h - C API of FlexSN-MLIR ----------------------------*- C -*-===*\
|*                                                                            *|
|* One shared library (libFlexSN.so) holds the compiler (MLIR/LLVM linked     *|
|* statically) and the runtimes; this header is all it exports.               *|
|*                                                                            *|
|* Version 3. A program is a flexsn module compiled once for a target (the    *|
|* CPU JIT, or CUDA for a chip); it owns every kernel of the module and the   *|
|* kernel manifest (JSON), which never depends on CUDA being installed. A     *|
|* kernel handle, fetched once per (program, kernel, device), launches with   *|
|* no lookup, hashing or allocation.                                          *|
|*                                                                            *|
|* Functions that can fail return 0 on success and non-zero on failure, with  *|
|* a message in *error (free it with flexsn_free) when error is not NULL.     *|
|* No function aborts on bad arguments. Every function is thread-safe.        *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef FLEXSN_C_FLEXSN_H
#define FLEXSN_C_FLEXSN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The API version this header describes; flexsn_api_version() returns the
 * library's. A caller refuses a library whose version differs. */
#define FLEXSN_API_VERSION 3

int flexsn_api_version(void);

/* "flexsn-mlir <version>, MLIR 22". */
const char *flexsn_version(void);

/* Frees a string the library returned. */
void flexsn_free(void *ptr);

/*--- Programs ---------------------------------------------------------------*/

typedef enum flexsn_target {
  FLEXSN_TARGET_CPU = 0,  /* JIT-compiled for this CPU */
  FLEXSN_TARGET_CUDA = 1, /* PTX for `chip`, loaded per device on demand */
  /* Not targets: they give the enum the range of a 32-bit int, so that a
     caller's unknown value reaches the library's check (an error) and is
     not undefined behaviour in C++. */
  FLEXSN_TARGET_MIN_ENUM_ = -2147483647 - 1,
  FLEXSN_TARGET_MAX_ENUM_ = 2147483647
} flexsn_target;

typedef struct flexsn_program flexsn_program;

/* Compiles flexsn IR (text) for `target`. `options`: space-separated
 * key=value words, all optional; the same options flexsn-translate's
 * --options and the flexsn-gpu-pipeline take (one PipelineOptions type):
 *   chip=sm_90  O=2  neurons-per-thread=4  block-size=256  prefetch=0
 *   cuda-home=PATH
 *   differentiate=1  (or `differentiate`: also the training kernels)
 *   save-ops=OP,OP   (with differentiate: saved intermediates; auto: a
 *                    minimum cut chooses them and, for a core with
 *                    states, adds the final-state pair F_forward_final /
 *                    F_backward_final)
 * A malformed or unknown word is an error naming it. Errors carry MLIR's
 * diagnostics with their source locations. */
int flexsn_program_create(const char *mlir_source, flexsn_target target,
                          const char *options, flexsn_program **program,
                          char **error);
/* Rebuilds a CUDA program from the PTX and manifest of one made by
 * flexsn_program_create (a compilation cache keeps both): no compilation.
 * Fails on a manifest that is not a CUDA manifest of version 4 or on PTX
 * that lacks one of its kernels' entries (checked by flexsn_kernel_get). */
int flexsn_program_load_cuda(const char *ptx, const char *manifest,
                             flexsn_program **program, char **error);
/* The kernel manifest (JSON, "flexsn-manifest" version 4): every kernel's
 * name, variant, launch geometry (for CUDA with more than one neuron per
 * thread, also its scalar entry and which entry a launch takes) and
 * arguments in launch order (role, meaning in the source function's terms,
 * dtype, shape). Valid until the program is destroyed. */
const char *flexsn_program_manifest(const flexsn_program *program);
/* PTX of every kernel (CUDA programs); "" for CPU programs. */
const char *flexsn_program_ptx(const flexsn_program *program);
flexsn_target flexsn_program_target(const flexsn_program *program);
/* Where a CPU program keeps its kernels' machine code across processes: a
 * directory (made on the first write), or NULL / "" for nowhere (the
 * default). A kernel's first flexsn_kernel_get then loads the object file
 * `dir`/cpu-<key>.o instead of optimizing and generating code, or writes
 * it after generating. The key is a SHA-256 of the kernel's lowered IR,
 * the host's target triple, CPU and features, LLVM's version, the vector
 * math library and the library's build: another machine or build gets its
 * own file. Files are written whole, then renamed (processes may share the
 * directory); a file that is not an object defining the kernel, or that
 * does not link, is compiled again and replaced; an unwritable directory
 * only costs the next process the compile. Applies to kernels fetched
 * after the call. Fails on a null or CUDA program. */
int flexsn_program_set_cpu_cache_dir(flexsn_program *program, const char *dir,
                                     char **error);
/* Destroys the program and its kernel handles. */
void flexsn_program_destroy(flexsn_program *program);

/*--- Kernels ----------------------------------------------------------------*/

typedef struct flexsn_kernel flexsn_kernel;

/* The kernel `name` of `program`, ready to launch: on the CPU (`device`
 * must be 0) or on CUDA device `device` (its primary context). A CPU
 * kernel is JIT-compiled by its first flexsn_kernel_get, alone (a JIT
 * failure is that call's error); the program's other kernels are not
 * compiled until asked for. A CUDA
 * kernel's entries (a vector and a scalar entry, see the manifest) are each
 * compiled by the driver and loaded on the first launch that takes it, from
 * a module holding that entry only: a PTX the driver rejects is reported by
 * that launch. The handle belongs to the program and stays valid until it
 * is destroyed; asking again returns the same handle. */
int flexsn_kernel_get(flexsn_program *program, const char *name, int device,
                      flexsn_kernel **kernel, char **error);
/* How many pointers a launch takes (the manifest's pointer arguments). */
size_t flexsn_kernel_num_pointers(const flexsn_kernel *kernel);
/* Pointer `index` of a launch, as the manifest gives it: its shape (0 [T,
 * NCL], 1 [NCL], 2 one element), its element size in bytes, whether the
 * kernel writes it, and whether it may be NULL (the kernel then reads
 * zeros). For a caller that binds pointers from a description it did not
 * make (the PyTorch operators binding a graph's recipe) and must check it
 * against the kernel. */
int flexsn_kernel_pointer(const flexsn_kernel *kernel, size_t index,
                          int *shape, unsigned *element_bytes, int *written,
                          int *optional, char **error);
/* CUDA: starts compiling, on a thread of the library, the entry a launch
 * at NCL neurons with aligned pointers would take, and returns at once; a
 * launch that needs it meanwhile waits for it. For a caller that knows a
 * launch is coming (a training step's backward while its forward runs).
 * Does nothing for a CPU kernel, an entry already loaded or NCL <= 0.
 * Compile errors are reported by the launch. */
int flexsn_kernel_preload(const flexsn_kernel *kernel, int64_t NCL,
                          char **error);

/* Runs the kernel over T steps and NCL neurons. `ptrs`: one pointer per
 * pointer argument in manifest order (host pointers on the CPU, device
 * pointers on CUDA); a pointer may be NULL where its buffer is empty, or
 * where the manifest marks it "optional", which the kernel then reads as
 * zeros: an initial state (init_state: the states start from zeros) or a
 * gradient (grad_output, grad_state_seq, grad_final_state of a backward).
 * Buffers of role sum_state must be zeroed by the caller. CPU: runs on
 * `threads` threads (0: every core) and returns when done; `stream` is
 * ignored; result buffers of 4 MiB or more are first advised onto
 * transparent huge pages (madvise, Linux; FLEXSN_HUGE_PAGES=0 in the
 * environment: not), which spares a freshly mapped buffer a page fault per
 * 4 KiB. CUDA: enqueues on `stream` (a CUstream; NULL: the legacy default
 * stream) and returns without waiting; `threads` is ignored. Fails (and
 * runs nothing) on a wrong pointer count, a NULL pointer to a non-empty,
 * non-optional buffer, T or NCL < 0, or sizes whose byte counts overflow. */
int flexsn_kernel_launch(const flexsn_kernel *kernel, void *const *ptrs,
                         size_t num_ptrs, int64_t T, int64_t NCL,
                         void *stream, unsigned threads, char **error);

/*--- CUDA devices (driver API, libcuda loaded at run time) ------------------*/

/* Number of CUDA devices. Fails cleanly with "no CUDA driver", "CUDA
 * driver too old" or the driver's error where that is so. */
int flexsn_cuda_device_count(int *count, char **error);
/* Compute capability (major * 10 + minor) and, when `description` is not
 * NULL, "NVIDIA H100 80GB HBM3, sm_90, driver 13.0" (free with
 * flexsn_free) of device `device`. */
int flexsn_cuda_device_info(int device, int *capability, char **description,
                            char **error);
/* Waits for device `device`; reports an earlier launch's failure. */
int flexsn_cuda_synchronize(int device, char **error);

#ifdef __cplusplus
}
#endif

#endif /* FLEXSN_C_FLEXSN_H */
