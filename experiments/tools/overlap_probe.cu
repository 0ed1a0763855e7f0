// Do Hopper's tensor cores and its multi-function unit (MUFU, which computes exp2) work at
// the same time? At d = 64 an attention tile costs the tensor cores about as many cycles as
// its exponentials cost the MUFU (issue 18), and ncu on h08 at B=8, T=4096 reads the tensor
// pipe 49.9% busy and the MUFU 52.6%: together about 100%, as if the two never overlapped.
// If the hardware cannot overlap them, no schedule can beat the sum, and cuDNN, FA3 and h08
// sit on it; if it can, the kernels' schedules are what keep them apart.
//
// Build and run on an H100 or H200 (sm_90a):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a \
//        -o /tmp/overlap_probe experiments/tools/overlap_probe.cu && /tmp/overlap_probe
//
// One block per SM (a grid of the SM count; 100 KB of shared memory keeps a second block
// off), two warpgroups. Warpgroup 0 issues tensor work, warpgroup 1 a stream of one other
// unit's instructions; each part runs alone and then both at once, and the kernel's time is
// taken with CUDA events (median of 5 launches after a warm-up):
//   tensor SS: wgmma m64n128k16 bf16, A and B from shared memory (h08's Q K^T), 4 per group,
//              at most one group in flight behind the one being issued;
//   tensor RS: wgmma m64n64k16 bf16, A from registers (h08's P V), 8 per group;
//   MUFU:      16 independent chains x <- 2^-x per thread (one MUFU.EX2 each);
//   FMA:       16 independent chains x <- x a + b per thread (one FFMA each).
// overlap = (alone_tensor + alone_other - both) / min(alone_tensor, alone_other):
// 1 when the shorter part hides entirely under the longer, 0 when they add up.
// A second kernel (queue_probe, below) asks how many wgmma a warpgroup can issue before an
// issue waits for the tensor cores.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "wgmma exists only in the arch-specific target sm_90a"
#endif

#define CHECK(call)                                                                      \
  do {                                                                                   \
    cudaError_t err_ = (call);                                                           \
    if (err_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

namespace {

constexpr int kThreads = 256;  // two warpgroups
constexpr int kAtomBytes = 1024;  // 8 rows of 128 bytes: the 128-byte swizzle's atom
constexpr int kATileBytes = 64 * 128;  // A: 64 rows of 64 bf16
constexpr int kBTileBytes = 128 * 128;  // B: 128 rows of 64 bf16
constexpr int kSmemBytes = 100 * 1024;  // over half of the SM's 228 KB: one block per SM
constexpr int kChains = 16;  // independent chains per thread of the other unit's stream

enum Part : unsigned { kTensorSS = 1, kTensorRS = 2, kMufu = 4, kFma = 8 };

#define PROBE_D128                                                                              \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
  "%56, %57, %58, %59, %60, %61, %62, %63}"
#define PROBE_D64                                                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define PROBE_OPERANDS_8(d, o)                                                                    \
  "+f"(d[o + 0]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), \
      "+f"(d[o + 6]), "+f"(d[o + 7])
#define PROBE_OPERANDS_32(d) \
  PROBE_OPERANDS_8(d, 0), PROBE_OPERANDS_8(d, 8), PROBE_OPERANDS_8(d, 16), PROBE_OPERANDS_8(d, 24)
#define PROBE_OPERANDS_64(d)                                                     \
  PROBE_OPERANDS_8(d, 0), PROBE_OPERANDS_8(d, 8), PROBE_OPERANDS_8(d, 16),       \
      PROBE_OPERANDS_8(d, 24), PROBE_OPERANDS_8(d, 32), PROBE_OPERANDS_8(d, 40), \
      PROBE_OPERANDS_8(d, 48), PROBE_OPERANDS_8(d, 56)

// D += A B, m64n128k16, A and B K-major in shared memory with the 128-byte swizzle.
__device__ void wgmma_ss(float (&d)[64], uint64_t a_desc, uint64_t b_desc) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " PROBE_D128
               ", %64, %65, 1, 1, 1, 0, 0;\n"
               : PROBE_OPERANDS_64(d)
               : "l"(a_desc), "l"(b_desc)
               : "memory");
}
// D += A B, m64n64k16, A from registers, B N-major in shared memory (transposed).
__device__ void wgmma_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b_desc) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " PROBE_D64
               ", {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
               : PROBE_OPERANDS_32(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc)
               : "memory");
}
__device__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ void wgmma_wait_one() {
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}
__device__ void wgmma_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}

// A shared-memory descriptor (128-byte swizzle, atoms of 1,024 bytes).
__device__ uint64_t descriptor(uint32_t start) {
  return static_cast<uint64_t>((start & 0x3FFFF) >> 4) |
         static_cast<uint64_t>(kAtomBytes >> 4) << 16 |
         static_cast<uint64_t>(kAtomBytes >> 4) << 32 | static_cast<uint64_t>(1) << 62;
}

__global__ void __launch_bounds__(kThreads, 1)
    probe(unsigned parts, int tensor_groups, int other_steps, float* sink) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* smem = smem_raw + (kAtomBytes - base % kAtomBytes) % kAtomBytes;
  // Operands: small bf16 values, so that the tensor cores see ordinary data.
  __nv_bfloat16* tile = reinterpret_cast<__nv_bfloat16*>(smem);
  for (int x = threadIdx.x; x < (kATileBytes + kBTileBytes) / 2; x += kThreads)
    tile[x] = __float2bfloat16(static_cast<float>((x * 7) % 13 - 6) / 64.0f);
  __syncthreads();
  const uint32_t a_smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t b_smem = a_smem + kATileBytes;
  const int wg = threadIdx.x / 128;
  float result = 0.0f;
  if (wg == 0 && (parts & (kTensorSS | kTensorRS))) {
    if (parts & kTensorSS) {
      float d[64] = {};
      for (int group = 0; group < tensor_groups; ++group) {
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < 4; ++k)
          wgmma_ss(d, descriptor(a_smem + 32 * k), descriptor(b_smem + 32 * k));
        wgmma_commit();
        wgmma_wait_one();  // at most one group in flight behind this one
      }
      wgmma_wait_all();
      for (float x : d) result += x;
    } else {
      float d[32] = {};
      const uint32_t a[4] = {0x3f803f80u ^ (threadIdx.x & 7u), 0x3f803f80u, 0x3f803f80u,
                             0x3f803f80u};  // about 1.0 in bf16
      for (int group = 0; group < tensor_groups; ++group) {
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < 8; ++k) wgmma_rs(d, a, descriptor(b_smem + 2 * kAtomBytes * k));
        wgmma_commit();
        wgmma_wait_one();
      }
      wgmma_wait_all();
      for (float x : d) result += x;
    }
  }
  if (wg == 1 && (parts & (kMufu | kFma))) {
    float x[kChains];
#pragma unroll
    for (int c = 0; c < kChains; ++c) x[c] = 0.5f + 0.01f * c + 1e-4f * threadIdx.x;
    if (parts & kMufu) {
      for (int step = 0; step < other_steps; ++step)
#pragma unroll
        for (int c = 0; c < kChains; ++c)
          asm volatile("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(x[c]) : "f"(-x[c]));
    } else {
      for (int step = 0; step < other_steps; ++step)
#pragma unroll
        for (int c = 0; c < kChains; ++c)
          asm volatile("fma.rn.f32 %0, %0, %1, %2;\n" : "+f"(x[c]) : "f"(0.999f), "f"(1e-3f));
    }
#pragma unroll
    for (int c = 0; c < kChains; ++c) result += x[c];
  }
  if (result == 12345.0f) sink[blockIdx.x] = result;  // keeps the work; never true in practice
}

// How far ahead of the tensor cores can one warpgroup issue? It issues kQueueGroups groups
// of 4 wgmma m64n128k16 (about 256 cycles of tensor work each) back to back, with no wait
// between them, and thread 0 reads the SM's clock after each commit. If an issue returned at
// once, the readings would be a few cycles apart; where they are about 256 apart, each issue
// waited for the tensor cores to take it.
// With kRegisterA, each group is 8 wgmma m64n64k16 with A from registers (P V's form, the
// same work as 4 m64n128k16): does the queue count instructions or work?
constexpr int kQueueGroups = 12;
template <bool kRegisterA>
__global__ void __launch_bounds__(128, 1) queue_probe(long long* clocks) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* smem = smem_raw + (kAtomBytes - base % kAtomBytes) % kAtomBytes;
  __nv_bfloat16* tile = reinterpret_cast<__nv_bfloat16*>(smem);
  for (int x = threadIdx.x; x < (kATileBytes + kBTileBytes) / 2; x += 128)
    tile[x] = __float2bfloat16(static_cast<float>((x * 7) % 13 - 6) / 64.0f);
  __syncthreads();
  const uint32_t a_smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t b_smem = a_smem + kATileBytes;
  float d[64] = {};
  float d32[32] = {};
  const uint32_t a_regs[4] = {0x3f803f80u ^ (threadIdx.x & 7u), 0x3f803f80u, 0x3f803f80u,
                              0x3f803f80u};
  long long at[kQueueGroups + 1];
  at[0] = clock64();
#pragma unroll
  for (int group = 0; group < kQueueGroups; ++group) {
    wgmma_fence();
    if constexpr (kRegisterA) {
#pragma unroll
      for (int k = 0; k < 8; ++k) wgmma_rs(d32, a_regs, descriptor(b_smem + 2 * kAtomBytes * k));
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k)
        wgmma_ss(d, descriptor(a_smem + 32 * k), descriptor(b_smem + 32 * k));
    }
    wgmma_commit();
    at[group + 1] = clock64();
  }
  wgmma_wait_all();
  const long long done = clock64();
  float sum = 0.0f;
  for (float x : d) sum += x;
  for (float x : d32) sum += x;
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    for (int g = 0; g <= kQueueGroups; ++g) clocks[g] = at[g] - at[0];
    clocks[kQueueGroups + 1] = done - at[0];
    clocks[kQueueGroups + 2] = static_cast<long long>(sum);  // keeps the products
  }
}

float time_ms(unsigned parts, int sms, int tensor_groups, int other_steps, float* sink) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  probe<<<sms, kThreads, kSmemBytes>>>(parts, tensor_groups, other_steps, sink);  // warm-up
  CHECK(cudaGetLastError());
  std::vector<float> ms;
  for (int rep = 0; rep < 5; ++rep) {
    CHECK(cudaEventRecord(start));
    probe<<<sms, kThreads, kSmemBytes>>>(parts, tensor_groups, other_steps, sink);
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float t = 0.0f;
    CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  return ms[ms.size() / 2];
}

}  // namespace

int main() {
  int device = 0, sms = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, device));
  CHECK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  float* sink = nullptr;
  CHECK(cudaMalloc(&sink, sizeof(float) * sms));
  std::printf("%s, %d SMs; one block of two warpgroups per SM; median of 5 launches, ms\n",
              prop.name, sms);
  // Sizes that make each part alone take about the same time: a group of 4 m64n128k16 is
  // 1.05 MFLOP (about 256 cycles at 4,096 FLOP per cycle), and 16 exponentials per thread of
  // one warpgroup 2,048 (128 cycles at 16 per cycle); RS groups of 8 m64n64k16, the same FLOP.
  const int groups = 4000, mufu_steps = 2 * groups, fma_steps = 2 * groups;
  struct Pair {
    const char* name;
    unsigned tensor, other;
    int other_steps;
  };
  const Pair pairs[] = {{"tensor SS + MUFU", kTensorSS, kMufu, mufu_steps},
                        {"tensor RS + MUFU", kTensorRS, kMufu, mufu_steps},
                        {"tensor SS + FMA", kTensorSS, kFma, fma_steps}};
  for (const Pair& p : pairs) {
    const float t = time_ms(p.tensor, sms, groups, p.other_steps, sink);
    const float o = time_ms(p.other, sms, groups, p.other_steps, sink);
    const float both = time_ms(p.tensor | p.other, sms, groups, p.other_steps, sink);
    const double tflops = 2.0 * 64 * 128 * 64 * groups * sms / (t * 1e-3) / 1e12;
    std::printf(
        "%-18s tensor alone %.3f (%.0f TFLOP/s), other alone %.3f, both %.3f: overlap %.2f\n",
        p.name, t, tflops, o, both, (t + o - both) / std::min(t, o));
  }
  // The queue: one block of one warpgroup per SM, every SM busy; block 0's clock readings.
  long long* clocks = nullptr;
  CHECK(cudaMalloc(&clocks, sizeof(long long) * (kQueueGroups + 3)));
  const auto queue = [&](auto kernel, const char* what) {
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    for (int rep = 0; rep < 2; ++rep)
      kernel<<<sms, 128, kSmemBytes>>>(clocks);  // the second is read
    CHECK(cudaGetLastError());
    std::vector<long long> host(kQueueGroups + 3);
    CHECK(cudaMemcpy(host.data(), clocks, sizeof(long long) * host.size(), cudaMemcpyDeviceToHost));
    std::printf(
        "issue of %d back-to-back groups of %s (cycles from the first issue to the return of"
        " each commit): ",
        kQueueGroups, what);
    for (int g = 1; g <= kQueueGroups; ++g) std::printf("%lld ", host[g]);
    std::printf("; all complete at %lld\n", host[kQueueGroups + 1]);
  };
  queue(queue_probe<false>, "4 wgmma m64n128k16, A from shared memory");
  queue(queue_probe<true>, "8 wgmma m64n64k16, A from registers");
  CHECK(cudaFree(clocks));
  CHECK(cudaFree(sink));
  return 0;
}
