// What Hopper's warpgroup MMA (wgmma) offers a float32-exact attention kernel, measured
// before one is written: are the fragment layouts and shared-memory descriptors what we
// read in the PTX ISA, and how fast does wgmma run TF32 next to mma.sync?
//
// Build and run on an H100 or H200 (sm_90a: wgmma does not exist in plain sm_90 code):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a \
//        -o /tmp/wgmma_tf32_probe experiments/tools/wgmma_tf32_probe.cu && /tmp/wgmma_tf32_probe
// It exits non-zero if a layout check fails.
//
// Part 1, layouts. One warpgroup (4 warps, 128 threads) computes D = A B with one
// wgmma.m64n64k8 (A 64 x 8, B 8 x 64, TF32, float32 D) from small integers, so every
// product and sum is exact, and compares D with the host's product element by element.
// The layouts under test, with w = warp of the warpgroup, g = lane / 4, t = lane % 4:
//   A in registers (4 x b32):  a0 = A[16w + g][t], a1 = A[16w + g + 8][t],
//                              a2 = A[16w + g][t + 4], a3 = A[16w + g + 8][t + 4]
//   D (32 floats, 8 slices j of 8 columns): d[4j] = D[16w + g][8j + 2t],
//     d[4j + 1] = D[16w + g][8j + 2t + 1], d[4j + 2] = D[16w + g + 8][8j + 2t],
//     d[4j + 3] = D[16w + g + 8][8j + 2t + 1]
// i.e. each warp's 16 rows in mma.m16n8k8's layout. B (and A, when it is in shared
// memory) is K-major: each of its 64 rows (n, or m) holds its 8 k values contiguously.
//   - No swizzle: "core matrices" of 8 rows x 16 bytes (4 TF32), each 128 contiguous
//     bytes. Two byte offsets in the descriptor place them: between the two core
//     matrices of a row group along k, and between row groups of 8. Both readings of
//     which field is which are tried, and the one that computes the product is reported.
//   - 128-byte swizzle: rows of 128 bytes (32 TF32 of k); in row r the 16-byte chunk c
//     is stored at chunk c ^ (r % 8); 8 rows make a 1,024-byte atom, atoms of 8 rows
//     follow each other (stride 1,024 bytes). A k step of 8 TF32 inside the atom moves
//     the descriptor's start address by 32 bytes; all four are tried.
//
// Part 2, rates. Many warpgroups (or warps) issue nothing but tensor-core instructions:
// wgmma m64nNk8 TF32 with A from registers or shared memory, for N = 64 and 128, and
// mma.sync m16n8k8 TF32. TFLOP/s = instructions x 2 m n k / time.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ != 900 || !defined(__CUDA_ARCH_FEAT_SM90_ALL))
#error "build for sm_90a: -gencode=arch=compute_90a,code=sm_90a (wgmma is not in plain sm_90)"
#endif

#define CUDA_CHECK(call)                                                                 \
  do {                                                                                   \
    cudaError_t err_ = (call);                                                           \
    if (err_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      std::exit(2);                                                                      \
    }                                                                                    \
  } while (0)

namespace {

constexpr int kM = 64;  // rows of a wgmma (one warpgroup)
constexpr int kK = 8;   // TF32 k per instruction
constexpr int kThreads = 128;

// The 64-bit shared-memory matrix descriptor: start address, "leading" and "stride"
// byte offsets (each >> 4 in 14 bits), swizzle mode in bits 62-63 (0 none, 1 128-byte).
__device__ uint64_t descriptor(const void* smem,
                               uint32_t lead_bytes,
                               uint32_t stride_bytes,
                               uint32_t swizzle) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         static_cast<uint64_t>((lead_bytes & 0x3FFFF) >> 4) << 16 |
         static_cast<uint64_t>((stride_bytes & 0x3FFFF) >> 4) << 32 |
         static_cast<uint64_t>(swizzle) << 62;
}

__device__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ void wgmma_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
// Shared memory written by ordinary stores is read by wgmma through the async proxy.
__device__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#define D32(d)                                                                                    \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define D32_TEXT                                                                           \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"

// D (64 x 64) += A B, A from registers.
__device__ void wgmma_n64_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b_desc) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 " D32_TEXT
               ", {%32, %33, %34, %35}, %36, 1, 1, 1;\n"
               : D32(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
}

// D (64 x 64) += A B, A from shared memory.
__device__ void wgmma_n64_ss(float (&d)[32], uint64_t a_desc, uint64_t b_desc) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 " D32_TEXT
               ", %32, %33, 1, 1, 1;\n"
               : D32(d)
               : "l"(a_desc), "l"(b_desc));
}

// ---------------------------------------------------------------------------------------
// Part 1: layouts
// ---------------------------------------------------------------------------------------

// How a K-major 64-row operand with 8 k values is laid out in shared memory.
enum class Layout { kCoreLeadK, kCoreLeadRows, kSwizzle128 };

// Byte offset of element (row, k) of a 64 x 8 operand, k < 8. For kSwizzle128 the 8 k
// values are k step `step` (0..3) of a 32-wide swizzled row: chunk 2 step + k / 4.
__host__ __device__ int operand_offset(Layout layout, int row, int k, int step) {
  switch (layout) {
    case Layout::kCoreLeadK:     // core matrix (row / 8, k / 4); along k 128 B apart,
    case Layout::kCoreLeadRows:  // row groups 256 B apart (same bytes, other descriptor)
      return (row / 8) * 256 + (k / 4) * 128 + (row % 8) * 16 + (k % 4) * 4;
    case Layout::kSwizzle128: {
      const int chunk = 2 * step + k / 4;
      return (row / 8) * 1024 + (row % 8) * 128 + ((chunk ^ (row % 8)) * 16) + (k % 4) * 4;
    }
  }
  return 0;
}

__device__ uint64_t operand_descriptor(Layout layout, const char* base, int step) {
  switch (layout) {
    case Layout::kCoreLeadK:  // leading = along k, stride = between row groups
      return descriptor(base, 128, 256, 0);
    case Layout::kCoreLeadRows:  // the other reading
      return descriptor(base, 256, 128, 0);
    case Layout::kSwizzle128:  // leading unused for K-major swizzled; stride = 8 rows
      return descriptor(base + 32 * step, 16, 1024, 1);
  }
  return 0;
}

// Bytes one operand tile of the layout occupies.
constexpr int kOperandBytes = 8 * 1024;  // 64 rows x 128 B (the swizzled case; more than enough)

// a: 64 x 8 row-major, b: 64 x 8 (row n holds B[k][n] for k = 0..7, i.e. B^T), d: 64 x 64.
__global__ void layout_kernel(
    const float* a, const float* b, float* d, Layout layout, int step, bool a_in_smem) {
  __shared__ __align__(1024) char a_s[kOperandBytes];
  __shared__ __align__(1024) char b_s[kOperandBytes];
  const int tid = threadIdx.x;
  for (int i = tid; i < kM * kK; i += kThreads) {
    const int row = i / kK, k = i % kK;
    *reinterpret_cast<float*>(b_s + operand_offset(layout, row, k, step)) = b[i];
    *reinterpret_cast<float*>(a_s + operand_offset(layout, row, k, step)) = a[i];
  }
  fence_proxy_async();  // the stores above are read by wgmma (async proxy)
  __syncthreads();      // guards a_s, b_s: every thread's stores are in place

  const int w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int r0 = 16 * w + g;
  float acc[32];
  for (float& x : acc) x = 0.0f;
  const uint64_t b_desc = operand_descriptor(layout, b_s, step);
  wgmma_fence();
  if (a_in_smem) {
    wgmma_n64_ss(acc, operand_descriptor(layout, a_s, step), b_desc);
  } else {
    const uint32_t frag[4] = {
        __float_as_uint(a[r0 * kK + t]), __float_as_uint(a[(r0 + 8) * kK + t]),
        __float_as_uint(a[r0 * kK + t + 4]), __float_as_uint(a[(r0 + 8) * kK + t + 4])};
    wgmma_n64_rs(acc, frag, b_desc);
  }
  wgmma_commit();
  wgmma_wait_all();
  for (int j = 0; j < 8; ++j) {
    d[r0 * 64 + 8 * j + 2 * t] = acc[4 * j];
    d[r0 * 64 + 8 * j + 2 * t + 1] = acc[4 * j + 1];
    d[(r0 + 8) * 64 + 8 * j + 2 * t] = acc[4 * j + 2];
    d[(r0 + 8) * 64 + 8 * j + 2 * t + 1] = acc[4 * j + 3];
  }
}

// Runs one layout case; returns the number of wrong elements of D (0 = the layouts hold).
int check_layout(const char* name, Layout layout, int step, bool a_in_smem) {
  std::vector<float> a(kM * kK), b(64 * kK), d(kM * 64, NAN), ref(kM * 64, 0.0f);
  uint32_t seed = 12345u + 977u * static_cast<uint32_t>(step) + (a_in_smem ? 7u : 0u);
  auto next = [&] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<int>(seed >> 27) - 16;
  };
  for (float& x : a) x = static_cast<float>(next());  // integers in [-16, 15]: exact in TF32
  for (float& x : b) x = static_cast<float>(next());
  for (int m = 0; m < kM; ++m)
    for (int n = 0; n < 64; ++n)
      for (int k = 0; k < kK; ++k) ref[m * 64 + n] += a[m * kK + k] * b[n * kK + k];
  float *a_d, *b_d, *d_d;
  CUDA_CHECK(cudaMalloc(&a_d, a.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&b_d, b.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_d, d.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(a_d, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(b_d, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(d_d, 0xff, d.size() * sizeof(float)));  // NaN: an unwritten D shows
  layout_kernel<<<1, kThreads>>>(a_d, b_d, d_d, layout, step, a_in_smem);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(d.data(), d_d, d.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(a_d));
  CUDA_CHECK(cudaFree(b_d));
  CUDA_CHECK(cudaFree(d_d));
  int wrong = 0, first = -1;
  for (int i = 0; i < kM * 64; ++i)
    if (!(d[i] == ref[i])) {
      if (first < 0) first = i;
      ++wrong;
    }
  std::printf("  %-44s A in %-9s k step %d: %s", name, a_in_smem ? "smem" : "registers", step,
              wrong ? "WRONG" : "exact");
  if (wrong)
    std::printf(" (%d of 4096 differ; first D[%d][%d] = %g, expected %g)", wrong, first / 64,
                first % 64, d[first], ref[first]);
  std::printf("\n");
  return wrong;
}

// ---------------------------------------------------------------------------------------
// Part 2: rates
// ---------------------------------------------------------------------------------------

constexpr int kBatch = 16;  // instructions between commit and wait

// D (64 x 128) += A B, A from shared memory: the wider instruction, for comparison.
__device__ void wgmma_n128_ss(float (&d)[64], uint64_t a_desc, uint64_t b_desc) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
      "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "
      "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 1, 1, 1;\n"
      : D32(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]),
        "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),
        "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),
        "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]),
        "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a_desc), "l"(b_desc));
}

enum class Rate { kWgmma64Regs, kWgmma64Smem, kWgmma128Smem, kMmaSync };

// Every warpgroup issues iters x kBatch tensor-core instructions on shared-memory operands
// it never changes (their values do not matter for the rate; they are zero).
template <Rate kRate>
__global__ void __launch_bounds__(kThreads) rate_kernel(int iters, float* sink) {
  __shared__ __align__(1024) char a_s[kOperandBytes];
  __shared__ __align__(1024) char b_s[2 * kOperandBytes];  // up to 128 rows for N = 128
  for (int i = threadIdx.x; i < kOperandBytes / 4; i += kThreads) {
    reinterpret_cast<float*>(a_s)[i] = 0.0f;
    reinterpret_cast<float*>(b_s)[i] = 0.0f;
    reinterpret_cast<float*>(b_s + kOperandBytes)[i] = 0.0f;
  }
  fence_proxy_async();  // the zeros are read by wgmma
  __syncthreads();      // guards a_s, b_s
  float total = 0.0f;
  if constexpr (kRate == Rate::kMmaSync) {
    // mma.sync m16n8k8: 8 independent accumulators per warp, so no instruction waits for
    // the previous one's result.
    float c[8][4] = {};
    const uint32_t a[4] = {threadIdx.x, 1u, 2u, 3u}, b0 = 5u, b1 = 7u;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        float(&acc)[4] = c[i % 8];
        asm volatile(
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, "
            "%7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
      }
    }
    for (auto& s : c)
      for (float x : s) total += x;
  } else if constexpr (kRate == Rate::kWgmma128Smem) {
    float acc[64] = {};
    const uint64_t a_desc = descriptor(a_s, 16, 1024, 1), b_desc = descriptor(b_s, 16, 1024, 1);
    for (int it = 0; it < iters; ++it) {
      wgmma_fence();
#pragma unroll
      for (int i = 0; i < kBatch; ++i) wgmma_n128_ss(acc, a_desc, b_desc);
      wgmma_commit();
      wgmma_wait_all();
    }
    for (float x : acc) total += x;
  } else {
    // One accumulator for every instruction, as in a K loop: consecutive wgmma into the
    // same D are chained inside the tensor core.
    float acc[32] = {};
    const uint64_t a_desc = descriptor(a_s, 16, 1024, 1), b_desc = descriptor(b_s, 16, 1024, 1);
    const uint32_t frag[4] = {0u, 0u, 0u, 0u};
    for (int it = 0; it < iters; ++it) {
      wgmma_fence();
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        if constexpr (kRate == Rate::kWgmma64Regs)
          wgmma_n64_rs(acc, frag, b_desc);
        else
          wgmma_n64_ss(acc, a_desc, b_desc);
      }
      wgmma_commit();
      wgmma_wait_all();
    }
    for (float x : acc) total += x;
  }
  if (total == 12345.0f) sink[threadIdx.x] = total;  // never true: keeps the work alive
}

template <Rate kRate>
double tflops(const char* name,
              int blocks_per_sm,
              double flop_per_instruction,
              double instructions_per_block_iter,
              int sms) {
  const int iters = 4096;
  float* sink;
  CUDA_CHECK(cudaMalloc(&sink, kThreads * sizeof(float)));
  const int blocks = sms * blocks_per_sm;
  rate_kernel<kRate><<<blocks, kThreads>>>(64, sink);  // warm-up (clocks, code load)
  CUDA_CHECK(cudaGetLastError());
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  float best_ms = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    CUDA_CHECK(cudaEventRecord(start));
    rate_kernel<kRate><<<blocks, kThreads>>>(iters, sink);
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    best_ms = ms < best_ms ? ms : best_ms;
  }
  CUDA_CHECK(cudaFree(sink));
  const double flop =
      static_cast<double>(blocks) * iters * instructions_per_block_iter * flop_per_instruction;
  const double rate = flop / (best_ms * 1e-3) / 1e12;
  std::printf("  %-40s %2d blocks/SM: %7.1f TFLOP/s (best of 5, %.3f ms)\n", name, blocks_per_sm,
              rate, best_ms);
  return rate;
}

}  // namespace

int main() {
  int device = 0;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("# wgmma TF32 probe on %s (%d SMs, compute capability %d.%d)\n", prop.name,
              prop.multiProcessorCount, prop.major, prop.minor);
  if (prop.major != 9) {
    std::fprintf(stderr, "wgmma needs a Hopper GPU (compute capability 9.0)\n");
    return 2;
  }

  std::printf("\nPart 1: layouts (exact integer products; 'exact' = all 4096 elements of D)\n");
  int failures = 0;
  const int lead_k = check_layout("no swizzle, leading = along k", Layout::kCoreLeadK, 0, false);
  const int lead_rows =
      check_layout("no swizzle, leading = between row groups", Layout::kCoreLeadRows, 0, false);
  failures += (lead_k != 0 && lead_rows != 0);  // one of the two readings must hold
  for (int step = 0; step < 4; ++step) {
    failures += check_layout("128-byte swizzle", Layout::kSwizzle128, step, false) != 0;
    failures += check_layout("128-byte swizzle", Layout::kSwizzle128, step, true) != 0;
  }

  std::printf("\nPart 2: tensor-core rates, TF32 (operands constant, no other work)\n");
  const int sms = prop.multiProcessorCount;
  const double wg64 = 2.0 * 64 * 64 * 8, wg128 = 2.0 * 64 * 128 * 8, mma = 2.0 * 16 * 8 * 8;
  for (int per_sm : {1, 2}) {
    tflops<Rate::kWgmma64Regs>("wgmma m64n64k8, A registers", per_sm, wg64, kBatch, sms);
    tflops<Rate::kWgmma64Smem>("wgmma m64n64k8, A shared memory", per_sm, wg64, kBatch, sms);
    tflops<Rate::kWgmma128Smem>("wgmma m64n128k8, A shared memory", per_sm, wg128, kBatch, sms);
  }
  for (int per_sm : {2, 4})  // 4 warps per block, each issuing kBatch per iteration
    tflops<Rate::kMmaSync>("mma.sync m16n8k8 (4 warps/block)", per_sm, mma, 4.0 * kBatch, sms);

  std::printf("\n%s\n", failures ? "LAYOUT CHECK FAILED" : "layouts: all checks exact");
  return failures ? 1 : 0;
}
