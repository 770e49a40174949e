// staging_probe.cu - does staging a scan's reads through shared memory with
// the bulk copy engine (cp.async.bulk, sm_90) lift the small-NCL, long-T
// kernels that a register ring of reads leaves latency-bound?
//
// A question for issue 12 (bf16 at T=256 NCL=64K at 70-80% of a copy of its
// bytes), asked outside the compiler first: a standalone kernel with the
// shape of lif's backward (R sequences read, W written, one carried state,
// a sigmoid surrogate's arithmetic a step), one neuron per thread, in three
// forms that differ only in how the reads reach the thread:
//   reg<D>:    D steps of reads in registers (ld.global.nc), each slot
//              refilled after its step: what our scalar and deep entries do;
//   tma<S,G>:  S steps of the block's rows in a shared-memory ring, filled
//              by warp 0 with cp.async.bulk (one copy per sequence and
//              step, completing on the slot's mbarrier), refilled G steps
//              at a time behind a block barrier;
//   warp<S,G>: the same ring per warp, refilled by the warp itself behind
//              __syncwarp (no block barrier).
// Each form's results are checked against reg<8>'s; each is timed (CUDA
// events, median of 30) beside a device copy of the same bytes and a 2 GiB
// copy. -DPROBE_TRIVIAL_STEP replaces the step's arithmetic by four adds,
// so that the loads' cost shows without the step's latency chain.
// Results: bench/NOTES.md runs 166-169.
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90
//        [-DPROBE_TRIVIAL_STEP] -o staging_probe bench/staging_probe.cu
// Run:   ./staging_probe [T NCL ...]   (default: the issue's small shapes;
//        NCL a multiple of 128)

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                              \
  do {                                                                        \
    cudaError_t err_ = (x);                                                   \
    if (err_ != cudaSuccess) {                                                \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,         \
                   cudaGetErrorString(err_));                                 \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

constexpr int kR = 3; // sequences read a step (lif's backward: gs, gv, h)
constexpr int kW = 2; // sequences written a step
constexpr int kBlock = 128;

template <typename E> __device__ float toF(E v);
template <> __device__ float toF<float>(float v) { return v; }
template <> __device__ float toF<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename E> __device__ E fromF(float v);
template <> __device__ float fromF<float>(float v) { return v; }
template <> __device__ __nv_bfloat16 fromF<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

template <typename E> __device__ E loadNC(const E *p) { return __ldg(p); }

// One step of the model's arithmetic: a sigmoid surrogate's derivative on
// h, the carried gradient through the reset. Returns the step's outputs.
__device__ inline void step(float gs, float gv, float h, float &carry,
                            float &o0, float &o1) {
#ifdef PROBE_TRIVIAL_STEP
  carry = 0.5f * (gs + gv + h + carry);
  o0 = carry;
  o1 = gs * h;
  return;
#endif
  float sg = __fdividef(1.f, 1.f + __expf(-4.f * (h - 1.f)));
  float ds = 4.f * sg * (1.f - sg);
  float s = h >= 1.f ? 1.f : 0.f;
  float gh = gs * ds + (gv + carry) * (1.f - s) - carry * h * ds;
  carry = 0.5f * gh;
  o0 = 0.5f * gh;
  o1 = gh * ds;
}

template <typename E, int D>
__global__ void __launch_bounds__(kBlock)
    regRing(const E *__restrict__ in0, const E *__restrict__ in1,
            const E *__restrict__ in2, E *__restrict__ out0,
            E *__restrict__ out1, float *__restrict__ fin, int T, int ncl) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= ncl)
    return;
  // Cursors: each pointer walks its sequence a row (ncl elements) a step.
  const E *rd[kR] = {in0 + n, in1 + n, in2 + n};
  E *wr0 = out0 + n, *wr1 = out1 + n;
  E slot[D][kR];
#pragma unroll
  for (int j = 0; j < D; ++j)
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      slot[j][r] = j < T ? loadNC(rd[r]) : E(0.f);
      rd[r] += ncl;
    }
  float carry = 0.f;
  for (int t0 = 0; t0 < T; t0 += D) {
#pragma unroll
    for (int j = 0; j < D; ++j) {
      int t = t0 + j;
      if (t < T) {
        float o0, o1;
        step(toF(slot[j][0]), toF(slot[j][1]), toF(slot[j][2]), carry, o0,
             o1);
        *wr0 = fromF<E>(o0);
        *wr1 = fromF<E>(o1);
      }
      wr0 += ncl;
      wr1 += ncl;
      if (t + D < T)
#pragma unroll
        for (int r = 0; r < kR; ++r)
          slot[j][r] = loadNC(rd[r]);
#pragma unroll
      for (int r = 0; r < kR; ++r)
        rd[r] += ncl;
    }
  }
  fin[n] = carry;
}

__device__ inline unsigned smemAddr(const void *p) {
  return unsigned(__cvta_generic_to_shared(p));
}
__device__ inline void mbarInit(uint64_t *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smemAddr(bar)),
               "r"(count)
               : "memory");
}
__device__ inline void mbarExpect(uint64_t *bar, unsigned bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
          smemAddr(bar)),
      "r"(bytes)
      : "memory");
}
__device__ inline void bulkCopy(void *dst, const void *src, unsigned bytes,
                                uint64_t *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
               "bytes [%0], [%1], %2, [%3];" ::"r"(smemAddr(dst)),
               "l"(src), "r"(bytes), "r"(smemAddr(bar))
               : "memory");
}
__device__ inline void mbarWait(uint64_t *bar, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 "
                 "p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(smemAddr(bar)), "r"(parity)
                 : "memory");
}

// The consumer loop both rings share: steps in groups of G, each step
// waiting on its slot's barrier and reading element `idx` of its rows;
// after each group, `sync` (a barrier over the ring's users) and
// refill(first, count) for the steps S ahead. Returns the final carry.
template <typename E, int S, int G, typename Row, typename Sync,
          typename Refill>
__device__ float consumeRing(Row ring, uint64_t *full, int idx, int T,
                             int ncl, E *wr0, E *wr1, Sync sync,
                             Refill refill) {
  float carry = 0.f;
  for (int g0 = 0; g0 < T; g0 += G) {
#pragma unroll
    for (int j = 0; j < G; ++j) {
      int t = g0 + j;
      if (t < T) {
        int s = (g0 % S) + j;
        mbarWait(&full[s], (t / S) & 1);
        float o0, o1;
        step(toF(ring[s][0][idx]), toF(ring[s][1][idx]), toF(ring[s][2][idx]),
             carry, o0, o1);
        *wr0 = fromF<E>(o0);
        *wr1 = fromF<E>(o1);
      }
      wr0 += ncl;
      wr1 += ncl;
    }
    sync(); // every user of the ring is done with the group's slots
    if (g0 + S < T)
      refill(g0 + S, min(G, T - (g0 + S)));
  }
  return carry;
}

// S slots of kR rows of the block's kBlock elements; refilled G at a time.
constexpr unsigned kRingOffset = 4096; // room for up to 512 barriers
template <typename E, int S> constexpr unsigned tmaSmem() {
  return kRingOffset + S * kR * kBlock * sizeof(E);
}
template <typename E, int S, int G>
__global__ void __launch_bounds__(kBlock)
    tmaRing(const E *__restrict__ in0, const E *__restrict__ in1,
            const E *__restrict__ in2, E *__restrict__ out0,
            E *__restrict__ out1, float *__restrict__ fin, int T, int ncl) {
  static_assert(S % G == 0, "groups must tile the ring");
  // Dynamic shared memory: the S barriers, then the ring (128-aligned).
  extern __shared__ __align__(128) unsigned char smem[];
  uint64_t *full = reinterpret_cast<uint64_t *>(smem);
  auto ring = reinterpret_cast<E(*)[kR][kBlock]>(smem + kRingOffset);
  int base = blockIdx.x * kBlock;
  int n = base + threadIdx.x;
  constexpr unsigned rowBytes = kBlock * sizeof(E);
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s)
      mbarInit(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // Warp 0 refills steps [first, first + count): lane 0 arms each slot's
  // barrier with the bytes to come, then the lanes issue one bulk copy each
  // (a sequence of a step), in parallel.
  auto refill = [&](int first, int count) {
    int lane = threadIdx.x;
    if (lane == 0)
      for (int j = 0; j < count; ++j)
        mbarExpect(&full[(first + j) % S], kR * rowBytes);
    __syncwarp();
    for (int i = lane; i < count * kR; i += 32) {
      int t = first + i / kR, r = i % kR;
      const E *src = r == 0 ? in0 : r == 1 ? in1 : in2; // no local array
      bulkCopy(&ring[t % S][r][0], src + size_t(t) * ncl + base, rowBytes,
               &full[t % S]);
    }
  };
  if (threadIdx.x < 32)
    refill(0, min(S, T));
  float carry = consumeRing<E, S, G>(
      ring, full, threadIdx.x, T, ncl, out0 + n, out1 + n,
      [] { __syncthreads(); },
      [&](int first, int count) {
        if (threadIdx.x < 32)
          refill(first, count);
      });
  fin[n] = carry;
}

// The same ring per warp: each warp stages its own 32 neurons' rows (64
// bytes of bf16, 128 of f32, a sequence and step) and refills them itself
// behind __syncwarp: no block-wide barrier. Lane i < count * kR issues one
// bulk copy; lane 0 arms the barriers first.
template <typename E, int S, int G>
__global__ void __launch_bounds__(kBlock)
    tmaWarpRing(const E *__restrict__ in0, const E *__restrict__ in1,
                const E *__restrict__ in2, E *__restrict__ out0,
                E *__restrict__ out1, float *__restrict__ fin, int T,
                int ncl) {
  static_assert(S % G == 0 && G * kR <= 32, "groups must tile the ring");
  constexpr int kWarps = kBlock / 32;
  extern __shared__ __align__(128) unsigned char smem[];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint64_t *full = reinterpret_cast<uint64_t *>(smem) + warp * S;
  auto ring = reinterpret_cast<E(*)[kR][32]>(
                  smem + kRingOffset) + warp * S;
  int base = blockIdx.x * kBlock + warp * 32;
  int n = base + lane;
  constexpr unsigned rowBytes = 32 * sizeof(E);
  if (lane == 0) {
    for (int s = 0; s < S; ++s)
      mbarInit(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncwarp();
  auto refill = [&](int first, int count) {
    if (lane == 0)
      for (int j = 0; j < count; ++j)
        mbarExpect(&full[(first + j) % S], kR * rowBytes);
    __syncwarp();
    if (lane < count * kR) {
      int t = first + lane / kR, r = lane % kR;
      const E *src = r == 0 ? in0 : r == 1 ? in1 : in2;
      bulkCopy(&ring[t % S][r][0], src + size_t(t) * ncl + base, rowBytes,
               &full[t % S]);
    }
  };
  for (int t = 0; t < S && t < T; t += G)
    refill(t, min(G, T - t));
  float carry = consumeRing<E, S, G>(ring, full, lane, T, ncl, out0 + n,
                                     out1 + n, [] { __syncwarp(); }, refill);
  fin[n] = carry;
  (void)kWarps;
}
template <typename E, int S> constexpr unsigned warpSmem() {
  return kRingOffset + (kBlock / 32) * S * kR * 32 * sizeof(E);
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
  }
  template <typename F> float median(F f, int reps = 30) {
    f();
    f();
    CHECK(cudaDeviceSynchronize());
    std::vector<float> ms;
    for (int i = 0; i < reps; ++i) {
      CHECK(cudaEventRecord(a));
      f();
      CHECK(cudaEventRecord(b));
      CHECK(cudaEventSynchronize(b));
      float m;
      CHECK(cudaEventElapsedTime(&m, a, b));
      ms.push_back(m);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
};

template <typename E> struct Case {
  int T, ncl;
  E *in[kR], *out[kW];
  float *fin;
  std::vector<E> hostOut;
  std::vector<float> hostFin;
  char *copySrc, *copyDst;
  size_t bytes;
};

template <typename E> static const char *name();
template <> const char *name<float>() { return "f32 "; }
template <> const char *name<__nv_bfloat16>() { return "bf16"; }

template <typename E>
static void runCase(int T, int ncl, double bigCopyGBs, Timer &timer) {
  if (ncl % kBlock) {
    std::printf("skip NCL=%d: not a multiple of %d\n", ncl, kBlock);
    return;
  }
  size_t seq = size_t(T) * ncl;
  E *in[kR], *out[kW];
  float *fin;
  std::vector<E> host(seq);
  for (int r = 0; r < kR; ++r) {
    CHECK(cudaMalloc(&in[r], seq * sizeof(E)));
    for (size_t i = 0; i < seq; ++i)
      host[i] = E(float((i * 2654435761u + r * 97) % 1000) / 400.f - 0.5f);
    CHECK(cudaMemcpy(in[r], host.data(), seq * sizeof(E),
                     cudaMemcpyHostToDevice));
  }
  for (int w = 0; w < kW; ++w)
    CHECK(cudaMalloc(&out[w], seq * sizeof(E)));
  CHECK(cudaMalloc(&fin, ncl * sizeof(float)));
  size_t bytes = seq * sizeof(E) * (kR + kW) + size_t(ncl) * 4;
  char *cs, *cd;
  CHECK(cudaMalloc(&cs, bytes / 2));
  CHECK(cudaMalloc(&cd, bytes / 2));
  float copyMs = timer.median(
      [&] { CHECK(cudaMemcpyAsync(cd, cs, bytes / 2, cudaMemcpyDeviceToDevice)); });
  int grid = ncl / kBlock;
  std::vector<E> ref(seq), got(seq);
  std::vector<float> refFin(ncl), gotFin(ncl);
  auto report = [&](const char *what, auto launch, bool isRef) {
    CHECK(cudaMemset(out[0], 0, seq * sizeof(E)));
    launch();
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    auto &o = isRef ? ref : got;
    auto &f = isRef ? refFin : gotFin;
    CHECK(cudaMemcpy(o.data(), out[0], seq * sizeof(E), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(f.data(), fin, ncl * 4, cudaMemcpyDeviceToHost));
    bool same = true;
    if (!isRef)
      for (size_t i = 0; i < seq && same; ++i)
        same = float(o[i]) == float(ref[i]);
    if (!isRef)
      for (int i = 0; i < ncl && same; ++i)
        same = f[i] == refFin[i];
    float ms = timer.median(launch);
    std::printf("%s T=%-5d NCL=%-8d %-12s %8.4f ms  %5.1f%% of same-size "
                "copy  %5.1f%% of big copy  %s\n",
                name<E>(), T, ncl, what, ms, 100.0 * copyMs / ms,
                100.0 * (bytes / 1e9) / (ms * 1e-3) / bigCopyGBs,
                isRef ? "(reference)" : same ? "equal" : "MISMATCH");
  };
  report("reg<8>", [&] {
    regRing<E, 8><<<grid, kBlock>>>(in[0], in[1], in[2], out[0], out[1], fin,
                                    T, ncl);
  }, true);
  report("reg<16>", [&] {
    regRing<E, 16><<<grid, kBlock>>>(in[0], in[1], in[2], out[0], out[1], fin,
                                     T, ncl);
  }, false);
  report("reg<32>", [&] {
    regRing<E, 32><<<grid, kBlock>>>(in[0], in[1], in[2], out[0], out[1], fin,
                                     T, ncl);
  }, false);
  auto tma = [&](const char *what, auto kernel, unsigned smemBytes) {
    CHECK(cudaFuncSetAttribute(kernel,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(smemBytes)));
    report(what, [&] {
      kernel<<<grid, kBlock, smemBytes>>>(in[0], in[1], in[2], out[0], out[1],
                                          fin, T, ncl);
    }, false);
  };
  tma("tma<16,4>", tmaRing<E, 16, 4>, tmaSmem<E, 16>());
  tma("tma<32,8>", tmaRing<E, 32, 8>, tmaSmem<E, 32>());
  tma("tma<64,16>", tmaRing<E, 64, 16>, tmaSmem<E, 64>());
  tma("tma<64,8>", tmaRing<E, 64, 8>, tmaSmem<E, 64>());
  tma("warp<16,8>", tmaWarpRing<E, 16, 8>, warpSmem<E, 16>());
  tma("warp<32,8>", tmaWarpRing<E, 32, 8>, warpSmem<E, 32>());
  tma("warp<64,8>", tmaWarpRing<E, 64, 8>, warpSmem<E, 64>());
  std::printf("%s T=%-5d NCL=%-8d copy of the same %zu bytes: %.4f ms\n",
              name<E>(), T, ncl, bytes, copyMs);
  for (int r = 0; r < kR; ++r)
    CHECK(cudaFree(in[r]));
  for (int w = 0; w < kW; ++w)
    CHECK(cudaFree(out[w]));
  CHECK(cudaFree(fin));
  CHECK(cudaFree(cs));
  CHECK(cudaFree(cd));
}

int main(int argc, char **argv) {
  std::vector<std::pair<int, int>> shapes;
  for (int i = 1; i + 1 < argc; i += 2)
    shapes.push_back({std::atoi(argv[i]), std::atoi(argv[i + 1])});
  if (shapes.empty())
    shapes = {{256, 65536}, {32, 262144}, {1024, 16384}, {4, 4194304}};
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  Timer timer;
  size_t big = size_t(1) << 30;
  char *a, *b;
  CHECK(cudaMalloc(&a, big));
  CHECK(cudaMalloc(&b, big));
  float bigMs = timer.median(
      [&] { CHECK(cudaMemcpyAsync(b, a, big, cudaMemcpyDeviceToDevice)); });
  double bigGBs = 2.0 * big / 1e9 / (bigMs * 1e-3);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  std::printf("%s, %d SMs; 2 GiB copy %.0f GB/s; R=%d reads, W=%d writes a "
              "step, %d threads a block\n",
              prop.name, prop.multiProcessorCount, bigGBs, kR, kW, kBlock);
  for (auto [T, ncl] : shapes) {
    runCase<__nv_bfloat16>(T, ncl, bigGBs, timer);
    runCase<float>(T, ncl, bigGBs, timer);
  }
  return 0;
}
