/* Exercises libFlexSN.so through its C header only: compile to PTX and a
 * manifest, JIT and run on the CPU against a hand-written LIF, error paths,
 * and the CUDA entry points (mode "cuda": on a GPU; otherwise they must fail
 * cleanly). Usage: flexsn-capi-test FILE.mlir [cpu|cuda] */
#include "flexsn-c/FlexSN.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int failures = 0;
#define EXPECT(cond, what)                                                     \
  do {                                                                         \
    int ok_ = (cond);                                                          \
    printf("%s: %s\n", ok_ ? "ok" : "FAIL", what);                             \
    failures += !ok_;                                                          \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  const char *mode = argc > 2 ? argv[2] : "cpu";
  char *lif = readFile(argv[1]);
  char *error = NULL;
  printf("version: %s\n", flexsn_version());

  flexsn_program *program = NULL;
  int r = flexsn_compile(lif, "chip=sm_90 differentiate=1", &program, &error);
  EXPECT(r == 0, "compile lif with differentiate=1");
  if (r == 0) {
    EXPECT(strstr(flexsn_program_ptx(program), ".entry lif_backward") != NULL,
           "PTX holds lif_backward");
    EXPECT(strstr(flexsn_program_manifest(program),
                  "\"variant\": \"backward\"") != NULL,
           "manifest lists the backward");
  } else {
    printf("  %s\n", error);
  }

  r = flexsn_compile(lif, "chip=sm_90 frobnicate=2", &program, &error);
  EXPECT(r != 0 && strstr(error, "unknown or malformed option 'frobnicate=2'"),
         "unknown option is an error naming it");
  flexsn_free(error);
  error = NULL;
  r = flexsn_compile("func.func @f(", "", &program, &error);
  EXPECT(r != 0 && strstr(error, "<flexsn source>:1"),
         "malformed IR is an error with its location");
  if (error)
    printf("  (%.*s)\n", (int)strcspn(error, "\n"), error);
  flexsn_free(error);
  error = NULL;

  /* CPU: lif_inference on T=3, NCL=5 against a hand-written LIF. */
  flexsn_cpu_kernels *cpu = NULL;
  r = flexsn_cpu_compile(lif, "", &cpu, &error);
  EXPECT(r == 0, "cpu compile");
  enum { T = 3, N = 5 };
  float x[T * N], v0[N], s[T * N], v[T * N];
  for (int i = 0; i < T * N; ++i)
    x[i] = (float)((i * 37) % 11) / 3.0f - 0.5f;
  for (int n = 0; n < N; ++n)
    v0[n] = 0.1f * n;
  void *ptrs[] = {x, v0, s, v};
  r = flexsn_cpu_run(cpu, "lif_inference", ptrs, 4, T, N, 1, &error);
  EXPECT(r == 0, "cpu run lif_inference");
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
  r = flexsn_cpu_run(cpu, "nope", ptrs, 4, T, N, 1, &error);
  EXPECT(r != 0 && strstr(error, "no CPU kernel named 'nope'"),
         "unknown kernel is an error");
  flexsn_free(error);
  error = NULL;
  flexsn_cpu_destroy(cpu);

  flexsn_cuda_device *gpu = NULL;
  r = flexsn_cuda_open(0, &gpu, &error);
  if (strcmp(mode, "cuda") != 0) {
    EXPECT(r != 0 && (strstr(error, "no CUDA driver") ||
                      strstr(error, "no CUDA device") ||
                      strstr(error, "CUDA driver too old")),
           "without a GPU, cuda_open fails cleanly");
  } else {
    EXPECT(r == 0, "cuda open");
    if (r == 0) {
      char *d = flexsn_cuda_describe(gpu);
      printf("device: %s\n", d);
      flexsn_free(d);
      r = flexsn_cuda_launch(gpu, "not ptx at all", "k", NULL, 0, 1, 1, 256,
                             4, NULL, &error);
      EXPECT(r != 0 && strstr(error, "the driver rejected the PTX"),
             "garbage PTX is rejected with the driver's message");
      flexsn_free(error);
      error = NULL;
      r = flexsn_cuda_launch(gpu, flexsn_program_ptx(program), "nope", NULL,
                             0, 1, 1, 256, 4, NULL, &error);
      EXPECT(r != 0 && strstr(error, "no kernel 'nope'"),
             "unknown kernel is an error naming it");
      flexsn_free(error);
      error = NULL;
      flexsn_cuda_close(gpu);
    }
  }
  flexsn_program_destroy(program);
  free(lif);
  printf("%s\n", failures ? "SOME FAILED" : "ALL OK");
  return failures ? 1 : 0;
}
