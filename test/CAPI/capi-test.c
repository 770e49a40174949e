/* Exercises libFlexSN.so through its C header only (API version 3):
 * programs for the CPU (no CUDA needed, not even for the manifest) and for
 * CUDA, kernel handles, CPU launches against a hand-written LIF, argument
 * checks (pointer count, NULL, T/NCL, overflow), operand numbering when an
 * input is unused, and the CUDA entry points (mode "cuda": on a GPU;
 * otherwise they must fail cleanly).
 * Usage: flexsn-capi-test FILE.mlir [cpu|cuda] */
#include "flexsn-c/FlexSN.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *readFile(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc(n + 1);
  if (fread(text, 1, n, f) != (size_t)n)
    n = 0;
  text[n] = '\0';
  fclose(f);
  return text;
}

/* Device memory for the CUDA launches, from the driver (dlopen: the test
 * builds and runs without CUDA), in device 0's primary context, the one
 * the library launches in. NULL when anything fails. */
static int (*memAlloc)(uint64_t *, size_t);
static int (*memFree)(uint64_t);

static void *cudaAlloc(size_t bytes) {
  if (!memAlloc) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return NULL;
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
    int (*get)(int *, int) = (int (*)(int *, int))dlsym(lib, "cuDeviceGet");
    int (*retain)(void **, int) =
        (int (*)(void **, int))dlsym(lib, "cuDevicePrimaryCtxRetain");
    int (*setCurrent)(void *) = (int (*)(void *))dlsym(lib, "cuCtxSetCurrent");
    int device = 0;
    void *context = NULL;
    if (!init || !get || !retain || !setCurrent || init(0) ||
        get(&device, 0) || retain(&context, device) || setCurrent(context))
      return NULL;
    memFree = (int (*)(uint64_t))dlsym(lib, "cuMemFree_v2");
    memAlloc = (int (*)(uint64_t *, size_t))dlsym(lib, "cuMemAlloc_v2");
    if (!memAlloc || !memFree)
      return NULL;
  }
  uint64_t ptr = 0;
  return memAlloc(&ptr, bytes) == 0 ? (void *)(uintptr_t)ptr : NULL;
}

static void cudaFree(void *ptr) {
  if (ptr && memFree)
    memFree((uint64_t)(uintptr_t)ptr);
}

static int failures = 0;
#define EXPECT(cond, what)                                                     \
  do {                                                                         \
    int ok_ = (cond);                                                          \
    printf("%s: %s\n", ok_ ? "ok" : "FAIL", what);                             \
    failures += !ok_;                                                          \
  } while (0)

/* Expects a failure whose message contains `needle`; frees the message. */
static void expectError(int r, char **error, const char *needle,
                        const char *what) {
  int ok = r != 0 && *error && strstr(*error, needle);
  EXPECT(ok, what);
  if (!ok && *error)
    printf("  got: %s\n", *error);
  flexsn_free(*error);
  *error = NULL;
}

/* `text` with its first `from` replaced by `to` (malloc'd), or NULL when
 * `text` does not hold `from`. */
static char *replaceFirst(const char *text, const char *from, const char *to) {
  const char *at = strstr(text, from);
  if (!at)
    return NULL;
  size_t head = (size_t)(at - text), fromLen = strlen(from),
         toLen = strlen(to), tailLen = strlen(at + fromLen);
  char *out = malloc(head + toLen + tailLen + 1);
  memcpy(out, text, head);
  memcpy(out + head, to, toLen);
  memcpy(out + head + toLen, at + fromLen, tailLen + 1);
  return out;
}

/* A core whose first input is unused: out = 2 * y. */
static const char *kUnusedInput =
    "func.func @k(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %p: tensor<?xf32>,"
    "             %q: tensor<?xf32>) -> tensor<?x?xf32> {\n"
    "  %o = flexsn.scan ins(%x, %y : tensor<?x?xf32>, tensor<?x?xf32>)"
    "      params(%p, %q : tensor<?xf32>, tensor<?xf32>) -> (tensor<?x?xf32>) {\n"
    "  ^bb0(%xt: f32, %yt: f32, %pt: f32, %qt: f32):\n"
    "    %two = arith.constant 2.0 : f32\n"
    "    %m = arith.mulf %yt, %two : f32\n"
    "    %r = arith.addf %m, %qt : f32\n"
    "    flexsn.yield %r : f32\n"
    "  }\n"
    "  return %o : tensor<?x?xf32>\n"
    "}\n";

static void testCPU(const char *lif) {
  char *error = NULL;
  flexsn_program *program = NULL;
  /* No CUDA toolkit is needed for a CPU program or its manifest. */
  int r = flexsn_program_create(lif, FLEXSN_TARGET_CPU,
                                "differentiate=1 cuda-home=/nonexistent",
                                &program, &error);
  EXPECT(r == 0, "cpu program of lif with differentiate=1, no CUDA");
  if (r != 0) {
    printf("  %s\n", error);
    return;
  }
  const char *manifest = flexsn_program_manifest(program);
  EXPECT(strstr(manifest, "\"version\": 4") &&
             strstr(manifest, "\"target\": \"cpu\"") &&
             strstr(manifest, "\"name\": \"lif_backward\"") &&
             strstr(manifest, "\"shape\": \"[T, NCL]\"") &&
             strstr(manifest, "\"bytes\": \"NCL * 4\"") &&
             strstr(manifest, "\"requires_grad\": [\n"),
         "manifest v4: target, every kernel, shapes, byte sizes, "
         "requires-grad mask");
  EXPECT(strcmp(flexsn_program_ptx(program), "") == 0 &&
             flexsn_program_target(program) == FLEXSN_TARGET_CPU,
         "a CPU program has no PTX");

  flexsn_kernel *k = NULL, *again = NULL;
  r = flexsn_kernel_get(program, "lif_inference", 0, &k, &error);
  EXPECT(r == 0 && flexsn_kernel_num_pointers(k) == 4,
         "kernel handle for lif_inference takes 4 pointers");
  flexsn_kernel_get(program, "lif_inference", 0, &again, &error);
  EXPECT(again == k, "asking again returns the same handle");
  {
    int shape = -1, written = -1, optional = -1;
    unsigned bytes = 0;
    r = flexsn_kernel_pointer(k, 0, &shape, &bytes, &written, &optional,
                              &error);
    EXPECT(r == 0 && shape == 0 && bytes == 4 && written == 0 && optional == 0,
           "pointer #0 of lif_inference: a [T, NCL] f32 input, read");
    expectError(flexsn_kernel_pointer(k, 4, &shape, &bytes, &written,
                                      &optional, &error),
                &error, "has 4 pointers, not #4",
                "a pointer past the kernel's is an error");
  }
  EXPECT(flexsn_kernel_preload(k, 1 << 20, &error) == 0,
         "preloading a CPU kernel does nothing");
  expectError(flexsn_kernel_preload(NULL, 1, &error), &error,
              "kernel must not be NULL", "preload of a NULL kernel");
  expectError(flexsn_kernel_get(program, "nope", 0, &again, &error), &error,
              "no kernel named 'nope' in the program (it has: lif_inference",
              "unknown kernel is an error listing the kernels");
  expectError(flexsn_kernel_get(program, "lif_inference", 1, &again, &error),
              &error, "a CPU program runs on device 0 only",
              "a CPU kernel on device 1 is an error");

  enum { T = 3, N = 5 };
  float x[T * N], v0[N], s[T * N], v[T * N];
  for (int i = 0; i < T * N; ++i)
    x[i] = (float)((i * 37) % 11) / 3.0f - 0.5f;
  for (int n = 0; n < N; ++n)
    v0[n] = 0.1f * n;
  void *ptrs[] = {x, v0, s, v};
  r = flexsn_kernel_launch(k, ptrs, 4, T, N, NULL, 1, &error);
  EXPECT(r == 0, "cpu launch of lif_inference");
  int same = 1;
  for (int n = 0; n < N; ++n) {
    float vt = v0[n];
    for (int t = 0; t < T; ++t) {
      float h = vt + (x[t * N + n] - vt) / 2.0f;
      float st = (h - 1.0f) >= 0.0f ? 1.0f : 0.0f;
      vt = h * (1.0f - st);
      same &= s[t * N + n] == st && v[t * N + n] == vt;
    }
  }
  EXPECT(same, "cpu results equal a hand-written LIF");
  {
    /* The initial states are optional: NULL starts from zeros. */
    float zeroState[N], s1[T * N], v1[T * N], s2[T * N], v2[T * N];
    for (int n = 0; n < N; ++n)
      zeroState[n] = 0.0f;
    void *zeroInit[] = {x, zeroState, s1, v1};
    void *nullInit[] = {x, NULL, s2, v2};
    r = flexsn_kernel_launch(k, zeroInit, 4, T, N, NULL, 1, &error);
    r = r ? r : flexsn_kernel_launch(k, nullInit, 4, T, N, NULL, 1, &error);
    int equal = r == 0;
    for (int i = 0; i < T * N; ++i)
      equal &= s1[i] == s2[i] && v1[i] == v2[i];
    EXPECT(equal, "a NULL init_state reads as zeros in the inference kernel");
  }

  /* The backward reads a NULL gradient (optional in the manifest) as
   * zeros: the same results as buffers of zeros. Pointers: x, grad_output,
   * grad_state_seq, state_seq, init_state, grad_input, grad_init_state. */
  {
    flexsn_kernel *bk = NULL;
    r = flexsn_kernel_get(program, "lif_backward", 0, &bk, &error);
    EXPECT(r == 0 && flexsn_kernel_num_pointers(bk) == 7 &&
               strstr(manifest, "\"optional\": true"),
           "lif_backward takes 7 pointers; its gradients are optional");
    float gs[T * N], zeros[T * N], gx1[T * N], gv1[N], gx2[T * N], gv2[N];
    for (int i = 0; i < T * N; ++i) {
      gs[i] = (float)((i * 13) % 7) / 7.0f - 0.4f;
      zeros[i] = 0.0f;
    }
    void *withZeros[] = {x, gs, zeros, v, v0, gx1, gv1};
    void *withNull[] = {x, gs, NULL, v, v0, gx2, gv2};
    r = flexsn_kernel_launch(bk, withZeros, 7, T, N, NULL, 1, &error);
    r = r ? r : flexsn_kernel_launch(bk, withNull, 7, T, N, NULL, 1, &error);
    int equal = r == 0;
    for (int i = 0; i < T * N; ++i)
      equal &= gx1[i] == gx2[i];
    for (int n = 0; n < N; ++n)
      equal &= gv1[n] == gv2[n];
    EXPECT(equal, "a NULL grad_state_seq reads as zeros (same gradients)");
    /* A NULL init_state (optional: the initial states are zeros) read as
     * the lagged operand's row before t = 0: the same gradients as a
     * buffer of zeros. */
    float zeroState[N], gx3[T * N], gv3[N], gx4[T * N], gv4[N];
    for (int n = 0; n < N; ++n)
      zeroState[n] = 0.0f;
    void *zeroInit[] = {x, gs, NULL, v, zeroState, gx3, gv3};
    void *nullInit[] = {x, gs, NULL, v, NULL, gx4, gv4};
    r = flexsn_kernel_launch(bk, zeroInit, 7, T, N, NULL, 1, &error);
    r = r ? r : flexsn_kernel_launch(bk, nullInit, 7, T, N, NULL, 1, &error);
    equal = r == 0;
    for (int i = 0; i < T * N; ++i)
      equal &= gx3[i] == gx4[i];
    for (int n = 0; n < N; ++n)
      equal &= gv3[n] == gv4[n];
    EXPECT(equal, "a NULL init_state reads as zeros in the backward");
    void *noInput[] = {NULL, gs, NULL, v, v0, gx2, gv2};
    expectError(flexsn_kernel_launch(bk, noInput, 7, T, N, NULL, 1, &error),
                &error, "pointer #0 of kernel 'lif_backward' is NULL",
                "a NULL input (not optional) is still an error");
  }

  /* Argument checks: nothing runs, the outputs stay as they were. */
  for (int i = 0; i < T * N; ++i)
    s[i] = -7.0f;
  void *many[9] = {x, v0, s, v, x, x, x, x, x};
  expectError(flexsn_kernel_launch(k, many, 0, T, N, NULL, 1, &error), &error,
              "takes 4 pointers, got 0", "0 pointers for 4 is an error");
  expectError(flexsn_kernel_launch(k, many, 5, T, N, NULL, 1, &error), &error,
              "takes 4 pointers, got 5", "5 pointers for 4 is an error");
  expectError(flexsn_kernel_launch(k, many, 9, T, N, NULL, 1, &error), &error,
              "takes 4 pointers, got 9", "9 pointers for 4 is an error");
  void *withNull[] = {x, v0, NULL, v};
  expectError(flexsn_kernel_launch(k, withNull, 4, T, N, NULL, 1, &error),
              &error, "pointer #2 of kernel 'lif_inference' is NULL",
              "a NULL pointer to a non-empty buffer is an error");
  expectError(flexsn_kernel_launch(k, NULL, 4, T, N, NULL, 1, &error), &error,
              "ptrs must not be NULL", "a NULL pointer array is an error");
  expectError(flexsn_kernel_launch(k, ptrs, 4, -1, N, NULL, 1, &error),
              &error, "T and NCL must be >= 0", "T < 0 is an error");
  expectError(flexsn_kernel_launch(k, ptrs, 4, T, -5, NULL, 1, &error),
              &error, "T and NCL must be >= 0", "NCL < 0 is an error");
  expectError(flexsn_kernel_launch(k, ptrs, 4, 4611686018427387904LL, 4, NULL,
                                   1, &error),
              &error, "overflows 64 bits",
              "T * NCL * 4 bytes overflowing is an error");
  expectError(flexsn_kernel_launch(NULL, ptrs, 4, T, N, NULL, 1, &error),
              &error, "kernel must not be NULL", "a NULL kernel is an error");
  int untouched = 1;
  for (int i = 0; i < T * N; ++i)
    untouched &= s[i] == -7.0f;
  EXPECT(untouched, "rejected launches wrote nothing");

  /* T = 0: the final-state kernel copies the initial states through. */
  flexsn_kernel *fin = NULL;
  r = flexsn_kernel_get(program, "lif_final_state", 0, &fin, &error);
  float vfinal[N] = {0};
  void *finPtrs[] = {NULL, v0, NULL, vfinal};
  r = r ? r : flexsn_kernel_launch(fin, finPtrs, 4, 0, N, NULL, 1, &error);
  EXPECT(r == 0 && memcmp(vfinal, v0, sizeof(v0)) == 0,
         "T = 0: final states equal initial states, empty sequences may be "
         "NULL");
  if (r)
    printf("  %s\n", error);
  {
    flexsn_program *loaded = NULL;
    expectError(flexsn_program_load_cuda(".entry x", flexsn_program_manifest(program), &loaded, &error),
                &error, "not a CUDA program's",
                "load_cuda refuses a CPU program's manifest");
  }
  flexsn_program_destroy(program);

  /* An unused first input keeps its place: input #0 is x, input #1 is y,
   * param #1 is q, whatever canonicalization drops. */
  r = flexsn_program_create(kUnusedInput, FLEXSN_TARGET_CPU, "", &program,
                            &error);
  EXPECT(r == 0, "cpu program whose first input and first param are unused");
  if (r != 0) {
    printf("  %s\n", error);
    return;
  }
  manifest = flexsn_program_manifest(program);
  const char *in0 = strstr(manifest, "\"meaning\": \"input\"");
  EXPECT(in0 && strstr(in0, "\"meaning_index\": 0") &&
             strstr(manifest, "\"meaning\": \"param\""),
         "manifest lists input #0 (x) and the params as written");
  r = flexsn_kernel_get(program, "k_inference", 0, &k, &error);
  EXPECT(r == 0 && flexsn_kernel_num_pointers(k) == 5,
         "k_inference takes x, y, p, q and the output");
  float xs[2] = {100.0f, 200.0f}, ys[2] = {1.0f, 2.0f}, ps[1] = {50.0f},
        qs[1] = {0.5f}, out[2] = {0};
  void *kp[] = {xs, ys, ps, qs, out};
  r = r ? r : flexsn_kernel_launch(k, kp, 5, 2, 1, NULL, 1, &error);
  EXPECT(r == 0 && out[0] == 2.5f && out[1] == 4.5f,
         "the kernel reads y as input #1 and q as param #1: out = 2*y + q");
  flexsn_program_destroy(program);
}

/* save-ops=auto: for lif the compiler saves h and adds the final-state
 * pair. Its forward gives the sequence forward's outputs, saved values and
 * last state; its backward, seeded with a final state's gradient, gives
 * the sequence backward's gradients for a state-sequence gradient that is
 * zero but in its last row. Pointers (from the manifest): lif_forward x,
 * v0, s, h, vseq; lif_forward_final x, v0, s, h, vT; lif_backward h, gs,
 * gvseq, gx, gv0; lif_backward_final h, gs, gvT, gx, gv0. */
static void testFinalPair(const char *lif) {
  char *error = NULL;
  flexsn_program *program = NULL;
  int r = flexsn_program_create(lif, FLEXSN_TARGET_CPU,
                                "differentiate save-ops=auto", &program,
                                &error);
  EXPECT(r == 0, "cpu program of lif with save-ops=auto");
  if (r != 0) {
    printf("  %s\n", error);
    flexsn_free(error);
    return;
  }
  const char *manifest = flexsn_program_manifest(program);
  EXPECT(strstr(manifest, "\"name\": \"lif_forward_final\"") &&
             strstr(manifest, "\"name\": \"lif_backward_final\"") &&
             strstr(manifest, "\"meaning\": \"grad_final_state\""),
         "save-ops=auto: the manifest lists the final-state pair");
  flexsn_kernel *sf = NULL, *ff = NULL, *sb = NULL, *fb = NULL;
  r = flexsn_kernel_get(program, "lif_forward", 0, &sf, &error);
  r = r ? r : flexsn_kernel_get(program, "lif_forward_final", 0, &ff, &error);
  r = r ? r : flexsn_kernel_get(program, "lif_backward", 0, &sb, &error);
  r = r ? r : flexsn_kernel_get(program, "lif_backward_final", 0, &fb, &error);
  EXPECT(r == 0 && flexsn_kernel_num_pointers(ff) == 5 &&
             flexsn_kernel_num_pointers(fb) == 5 &&
             flexsn_kernel_num_pointers(sb) == 5,
         "the final-state pair's kernels take 5 pointers each; the sequence "
         "backward reads neither x nor the state sequence");
  if (r != 0) {
    printf("  %s\n", error);
    flexsn_free(error);
    flexsn_program_destroy(program);
    return;
  }
  enum { T = 6, N = 37 };
  float x[T * N], v0[N], s1[T * N], h1[T * N], vseq[T * N], s2[T * N],
      h2[T * N], vT[N];
  for (int i = 0; i < T * N; ++i)
    x[i] = (float)((i * 7) % 11) / 4.0f - 0.5f;
  for (int n = 0; n < N; ++n)
    v0[n] = (float)(n % 5) / 5.0f - 0.3f;
  void *seqArgs[] = {x, v0, s1, h1, vseq};
  void *finArgs[] = {x, v0, s2, h2, vT};
  r = flexsn_kernel_launch(sf, seqArgs, 5, T, N, NULL, 1, &error);
  r = r ? r : flexsn_kernel_launch(ff, finArgs, 5, T, N, NULL, 1, &error);
  int equal = r == 0;
  for (int i = 0; i < T * N; ++i)
    equal &= s1[i] == s2[i] && h1[i] == h2[i];
  for (int n = 0; n < N; ++n)
    equal &= vT[n] == vseq[(T - 1) * N + n];
  EXPECT(equal, "the final forward writes the sequence forward's outputs, "
                "saved h and last state");
  float gs[T * N], gvT[N], gvseq[T * N], gx1[T * N], gv1[N], gx2[T * N],
      gv2[N];
  for (int i = 0; i < T * N; ++i) {
    gs[i] = (float)((i * 13) % 7) / 7.0f - 0.4f;
    gvseq[i] = 0.0f;
  }
  for (int n = 0; n < N; ++n)
    gvT[n] = gvseq[(T - 1) * N + n] = (float)(n % 3) - 1.0f;
  void *seqBack[] = {h1, gs, gvseq, gx1, gv1};
  void *finBack[] = {h2, gs, gvT, gx2, gv2};
  r = flexsn_kernel_launch(sb, seqBack, 5, T, N, NULL, 1, &error);
  r = r ? r : flexsn_kernel_launch(fb, finBack, 5, T, N, NULL, 1, &error);
  equal = r == 0;
  for (int i = 0; i < T * N; ++i)
    equal &= gx1[i] == gx2[i];
  for (int n = 0; n < N; ++n)
    equal &= gv1[n] == gv2[n];
  EXPECT(equal, "the final backward from grad_final_state equals the "
                "sequence backward from its last row");
  if (r != 0) {
    printf("  %s\n", error);
    flexsn_free(error);
  }
  flexsn_program_destroy(program);
}

static void testErrors(const char *lif) {
  char *error = NULL;
  flexsn_program *program = NULL;
  expectError(flexsn_program_create(lif, FLEXSN_TARGET_CPU, "frobnicate=2",
                                    &program, &error),
              &error, "unknown option 'frobnicate'",
              "unknown option is an error naming it");
  expectError(flexsn_program_create(lif, FLEXSN_TARGET_CUDA, "chip=x86_64",
                                    &program, &error),
              &error, "chip 'x86_64' is not an NVIDIA GPU architecture",
              "a chip that is not sm_XX is an error");
  expectError(flexsn_program_create(lif, FLEXSN_TARGET_CPU, "O=abc",
                                    &program, &error),
              &error, "'O=abc': O takes an unsigned integer",
              "a malformed value is an error naming it (not a print)");
  expectError(flexsn_program_create(lif, FLEXSN_TARGET_CPU,
                                    "differentiate=maybe", &program, &error),
              &error, "'differentiate=maybe'", "a malformed flag is an error");
  expectError(flexsn_program_create(lif, FLEXSN_TARGET_CUDA, "block-size=100",
                                    &program, &error),
              &error, "block-size=100: a multiple of 32",
              "a block size that is not a multiple of 32 is an error");
  expectError(flexsn_program_create(lif, FLEXSN_TARGET_CPU, "save-ops=math.exp",
                                    &program, &error),
              &error, "save-ops needs differentiate",
              "save-ops without differentiate is an error");
  expectError(flexsn_program_create("func.func @f(", FLEXSN_TARGET_CPU, "",
                                    &program, &error),
              &error, "<flexsn source>:1",
              "malformed IR is an error with its location");
  {
    /* A compile error is its message and location, not a dump of the
     * lowered module (math.exp needs libdevice, absent here). */
    const char *withExp =
        "func.func @e(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {\n"
        "  %o = flexsn.scan ins(%x : tensor<?x?xf32>) -> (tensor<?x?xf32>) {\n"
        "  ^bb0(%xt: f32):\n"
        "    %e = math.exp %xt : f32\n"
        "    flexsn.yield %e : f32\n"
        "  }\n"
        "  return %o : tensor<?x?xf32>\n"
        "}\n";
    int r = flexsn_program_create(withExp, FLEXSN_TARGET_CUDA,
                                  "cuda-home=/nonexistent", &program, &error);
    EXPECT(r != 0 && error && strstr(error, "/nonexistent") &&
               !strstr(error, "see current operation") &&
               !strstr(error, "llvm.func"),
           "a compile error names the problem without dumping the module");
    if (error && (r == 0 || strstr(error, "see current operation")))
      printf("  got: %.300s\n", error);
    flexsn_free(error);
    error = NULL;
  }
  expectError(flexsn_program_create(lif, (flexsn_target)7, "", &program,
                                    &error),
              &error, "unknown target 7", "an unknown target is an error");
  expectError(flexsn_program_create(NULL, FLEXSN_TARGET_CPU, "", &program,
                                    &error),
              &error, "mlir_source must not be NULL",
              "a NULL source is an error");
  EXPECT(program == NULL, "failed creations return no program");
}

static void testCUDA(const char *lif, int onGPU) {
  char *error = NULL;
  flexsn_program *program = NULL;
  int r = flexsn_program_create(lif, FLEXSN_TARGET_CUDA,
                                "chip=sm_90 differentiate=1", &program, &error);
  EXPECT(r == 0, "cuda program of lif with differentiate=1");
  if (r != 0) {
    printf("  %s\n", error);
    return;
  }
  EXPECT(strstr(flexsn_program_ptx(program), ".entry lif_backward") &&
             strstr(flexsn_program_manifest(program), "\"chip\": \"sm_90\"") &&
             strstr(flexsn_program_manifest(program), "\"block_size\": 256"),
         "PTX holds lif_backward; the manifest gives chip and geometry");
  expectError(flexsn_program_set_cpu_cache_dir(program, "/tmp", &error),
              &error, "not a CPU program",
              "a CPU object cache for a CUDA program is an error");

  /* A compilation cache rebuilds the program from its PTX and manifest. */
  flexsn_program *loaded = NULL;
  r = flexsn_program_load_cuda(flexsn_program_ptx(program),
                               flexsn_program_manifest(program), &loaded,
                               &error);
  EXPECT(r == 0 && strcmp(flexsn_program_manifest(loaded),
                          flexsn_program_manifest(program)) == 0 &&
             flexsn_program_target(loaded) == FLEXSN_TARGET_CUDA,
         "load_cuda rebuilds the program from its PTX and manifest");
  flexsn_program_destroy(loaded);
  expectError(flexsn_program_load_cuda(flexsn_program_ptx(program), "{oops",
                                       &loaded, &error),
              &error, "the manifest is not JSON", "load_cuda: bad JSON");
  expectError(flexsn_program_load_cuda(
                  flexsn_program_ptx(program),
                  "{\"format\": \"flexsn-manifest\", \"version\": 2}", &loaded,
                  &error),
              &error, "version is not 4", "load_cuda: an old manifest");
  expectError(flexsn_program_load_cuda("", flexsn_program_manifest(program),
                                       &loaded, &error),
              &error, "no kernel entry", "load_cuda: empty PTX");
  {
    /* lif reads 4 bytes a step: its inference has a deep entry (16 steps
       of reads in flight), whose name and depth come together. */
    const char *manifest = flexsn_program_manifest(program);
    EXPECT(strstr(manifest, "\"deep_entry\": \"lif_inference_deep\"") &&
               strstr(manifest, "\"deep_prefetch\": 16"),
           "the manifest names lif_inference's deep entry and its depth");
    char *noDepth = replaceFirst(manifest, "\"deep_prefetch\": 16",
                                 "\"deep_prefetch_\": 16");
    char *tooDeep = replaceFirst(manifest, "\"deep_prefetch\": 16",
                                 "\"deep_prefetch\": 33");
    EXPECT(noDepth && tooDeep, "manifests to corrupt");
    if (noDepth)
      expectError(flexsn_program_load_cuda(flexsn_program_ptx(program),
                                           noDepth, &loaded, &error),
                  &error, "deep_entry and deep_prefetch come together",
                  "load_cuda: a deep entry without its depth");
    if (tooDeep)
      expectError(flexsn_program_load_cuda(flexsn_program_ptx(program),
                                           tooDeep, &loaded, &error),
                  &error, "deep_prefetch 33 is not 1 to 32",
                  "load_cuda: a deep entry deeper than 32 steps");
    free(noDepth);
    free(tooDeep);
  }

  int count = 0;
  r = flexsn_cuda_device_count(&count, &error);
  flexsn_kernel *k = NULL;
  if (!onGPU) {
    EXPECT(r != 0 && (strstr(error, "no CUDA driver") ||
                      strstr(error, "CUDA driver too old")),
           "without a GPU, device_count fails cleanly");
    flexsn_free(error);
    error = NULL;
    expectError(flexsn_kernel_get(program, "lif_inference", 0, &k, &error),
                &error, "CUDA", "without a GPU, kernel_get fails cleanly");
    flexsn_program_destroy(program);
    return;
  }
  EXPECT(r == 0 && count >= 1, "device_count sees a GPU");
  int capability = 0;
  char *description = NULL;
  r = flexsn_cuda_device_info(0, &capability, &description, &error);
  EXPECT(r == 0 && capability >= 70, "device_info");
  if (r == 0)
    printf("device: %s\n", description);
  flexsn_free(description);
  r = flexsn_kernel_get(program, "lif_inference", 0, &k, &error);
  EXPECT(r == 0 && flexsn_kernel_num_pointers(k) == 4,
         "cuda kernel handle for lif_inference");
  if (r == 0) {
    void *none[4] = {0};
    expectError(flexsn_kernel_launch(k, none, 3, 1, 1, NULL, 0, &error),
                &error, "takes 4 pointers, got 3",
                "wrong pointer count on CUDA is an error");
    r = flexsn_kernel_launch(k, none, 4, 0, 0, NULL, 0, &error);
    EXPECT(r == 0, "an empty launch (NCL = 0) does nothing");
    EXPECT(flexsn_cuda_synchronize(0, &error) == 0, "synchronize");
    /* A preload compiles the vector entry in the background; the launch
       that follows waits for it and runs. */
    int64_t n = (int64_t)1 << 22;
    void *bufs[4] = {0};
    int allocated = 1;
    for (int i = 0; i < 4; ++i) {
      bufs[i] = cudaAlloc((size_t)n * 4);
      allocated &= bufs[i] != NULL;
    }
    EXPECT(flexsn_kernel_preload(k, n, &error) == 0 &&
               flexsn_kernel_preload(k, n, &error) == 0,
           "preload the vector entry (twice: the second finds it on its way)");
    if (allocated) {
      r = flexsn_kernel_launch(k, bufs, 4, 1, n, NULL, 0, &error);
      EXPECT(r == 0 && flexsn_cuda_synchronize(0, &error) == 0,
             "a launch after the preload runs");
    }
    for (int i = 0; i < 4; ++i)
      cudaFree(bufs[i]);
  }
  /* Entries are found when the handle is made, compiled at first launch. */
  flexsn_program *bad = NULL;
  r = flexsn_program_load_cuda(
      "//\n.version 8.0\n.target sm_90\n.address_size 64\n"
      ".visible .entry other(\n)\n{\n\tret;\n}\n",
      flexsn_program_manifest(program), &bad, &error);
  EXPECT(r == 0, "load_cuda of a PTX without lif's entries");
  if (r == 0)
    expectError(flexsn_kernel_get(bad, "lif_inference", 0, &k, &error),
                &error, "no kernel entry 'lif_inference' in the PTX",
                "a kernel whose entry the PTX lacks is an error");
  flexsn_program_destroy(bad);
  r = flexsn_program_load_cuda(
      "//\n.version 8.0\n.target sm_90\n.address_size 64\n"
      ".visible .entry lif_inference(\n)\n{\n\tnot ptx;\n}\n"
      ".visible .entry lif_inference_scalar(\n)\n{\n\tret;\n}\n"
      ".visible .entry lif_inference_deep(\n)\n{\n\tret;\n}\n",
      flexsn_program_manifest(program), &bad, &error);
  EXPECT(r == 0, "load_cuda of a PTX the driver will reject");
  if (r == 0) {
    r = flexsn_kernel_get(bad, "lif_inference", 0, &k, &error);
    EXPECT(r == 0, "its handle (nothing compiled yet)");
    /* Never dereferenced: the entry fails to compile before any launch. */
    void *four[4] = {(void *)0x100000, (void *)0x200000, (void *)0x300000,
                     (void *)0x400000};
    int64_t big = (int64_t)1 << 24;
    if (r == 0)
      expectError(flexsn_kernel_launch(k, four, 4, 0, big, NULL, 0, &error),
                  &error, "the driver rejected the PTX",
                  "the first launch of a bad entry reports the driver's log");
  }
  flexsn_program_destroy(bad);
  expectError(flexsn_cuda_device_info(count, &capability, NULL, &error),
              &error, "no CUDA device", "a device past the last is an error");
  flexsn_program_destroy(program);
}

/* Calls `act` (when not NULL) on the path of each file in `dir` whose name
 * starts with `prefix` and ends with `suffix`, names starting with '.' left
 * out; returns how many there were. */
static int eachFile(const char *dir, const char *prefix, const char *suffix,
                    void (*act)(const char *path)) {
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  int n = 0;
  size_t np = strlen(prefix), ns = strlen(suffix);
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (e->d_name[0] == '.' || len < np + ns ||
        strncmp(e->d_name, prefix, np) != 0 ||
        strcmp(e->d_name + len - ns, suffix) != 0)
      continue;
    ++n;
    if (act) {
      char path[512];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      act(path);
    }
  }
  closedir(d);
  return n;
}

/* The cpu-*.o files in `dir`. */
static int countObjects(const char *dir) {
  return eachFile(dir, "cpu-", ".o", NULL);
}

static void damageFile(const char *path) {
  FILE *f = fopen(path, "wb");
  if (f) {
    fputs("not an object file", f);
    fclose(f);
  }
}

static void removeFile(const char *path) { remove(path); }

/* Runs lif_inference of a new CPU program whose kernels are cached in
 * `dir` on a fixed input; 0 when it ran, with the spikes in `s`. */
static int cachedRun(const char *lif, const char *dir, float *s) {
  enum { T = 3, N = 5 };
  char *error = NULL;
  flexsn_program *program = NULL;
  flexsn_kernel *k = NULL;
  float x[T * N], v[T * N];
  for (int i = 0; i < T * N; ++i)
    x[i] = (float)((i * 29) % 13) / 4.0f - 0.5f;
  void *ptrs[] = {x, NULL, s, v};
  int r = flexsn_program_create(lif, FLEXSN_TARGET_CPU, "", &program, &error);
  r = r ? r : flexsn_program_set_cpu_cache_dir(program, dir, &error);
  r = r ? r : flexsn_kernel_get(program, "lif_inference", 0, &k, &error);
  r = r ? r : flexsn_kernel_launch(k, ptrs, 4, T, N, NULL, 1, &error);
  if (r)
    printf("  %s\n", error ? error : "?");
  flexsn_free(error);
  flexsn_program_destroy(program);
  return r;
}

static void testCPUCache(const char *lif) {
  char *error = NULL;
  expectError(flexsn_program_set_cpu_cache_dir(NULL, "/tmp", &error), &error,
              "null program", "a cache directory for a NULL program");
  char dir[] = "/tmp/flexsn-capi-XXXXXX";
  if (!mkdtemp(dir)) {
    EXPECT(0, "a temporary directory for the CPU object cache");
    return;
  }
  float first[15], second[15];
  int r = cachedRun(lif, dir, first);
  EXPECT(r == 0 && countObjects(dir) == 1,
         "a CPU kernel's first fetch writes its object file to the cache");
  r = r ? r : cachedRun(lif, dir, second);
  EXPECT(r == 0 && countObjects(dir) == 1 &&
             memcmp(first, second, sizeof first) == 0,
         "a new program's kernel from the cached object gives the same "
         "results");
  /* An unusable file is compiled again and replaced. */
  eachFile(dir, "cpu-", "", damageFile);
  r = cachedRun(lif, dir, second);
  EXPECT(r == 0 && memcmp(first, second, sizeof first) == 0,
         "a damaged cached object is compiled again");
  eachFile(dir, "", "", removeFile);
  rmdir(dir);
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  const char *mode = argc > 2 ? argv[2] : "cpu";
  char *lif = readFile(argv[1]);
  if (!lif)
    return 2;
  printf("version: %s\n", flexsn_version());
  EXPECT(flexsn_api_version() == FLEXSN_API_VERSION,
         "library and header agree on the API version");
  testCPU(lif);
  testCPUCache(lif);
  testFinalPair(lif);
  testErrors(lif);
  testCUDA(lif, strcmp(mode, "cuda") == 0);
  free(lif);
  printf("%s\n", failures ? "SOME FAILED" : "ALL OK");
  return failures ? 1 : 0;
}
