// The MUFU's exponential in its three forms, timed on one SM (development probe, not part of
// the study's build): how many cycles one warp instruction holds a sub-partition's MUFU for
//   f32     ex2.approx.ftz.f32     one MUFU.EX2 per 32 exponentials
//   f16x2   ex2.approx.f16x2       two MUFU.EX2.F16 (halves .H0 and .H1) and a PRMT per 64
//   bf16x2  ex2.approx.ftz.bf16x2  two MUFU.EX2.BF16 and a PRMT per 64
// Each thread runs kChains independent chains x <- 2^x - 1 (x stays in [0, 1)), so the
// MUFU, not its latency, sets the pace once enough warps run. One block of W warps (W / 4
// per sub-partition) runs on one SM; warp 0 reads clock64 around the loop.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a experiments/tools/mufu_probe.cu \
//     -o mufu_probe && ./mufu_probe
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>

constexpr int kChains = 8;
constexpr int kIterations = 4096;

enum class Form { kF32, kF16x2, kBf16x2 };

template <Form F>
__device__ __forceinline__ uint32_t step(uint32_t x) {
  uint32_t y;
  if constexpr (F == Form::kF32) {
    float f;
    asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(f) : "f"(__uint_as_float(x)));
    y = __float_as_uint(f - 1.0f);
  } else if constexpr (F == Form::kF16x2) {
    asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x));
    const __half2 h = __hsub2(*reinterpret_cast<__half2*>(&y), __float2half2_rn(1.0f));
    y = *reinterpret_cast<const uint32_t*>(&h);
  } else {
    asm volatile("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(y) : "r"(x));
    const __nv_bfloat162 h =
        __hsub2(*reinterpret_cast<__nv_bfloat162*>(&y), __float2bfloat162_rn(1.0f));
    y = *reinterpret_cast<const uint32_t*>(&h);
  }
  return y;
}

template <Form F>
__global__ void probe(uint32_t seed, uint32_t* sink, long long* cycles) {
  uint32_t x[kChains];
  for (int c = 0; c < kChains; ++c) x[c] = (seed + threadIdx.x * 7 + c) & 0x3e003e00u;
  __syncthreads();
  const long long start = clock64();
  for (int i = 0; i < kIterations; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) x[c] = step<F>(x[c]);
  }
  __syncthreads();  // every warp's chains done: the interval covers all of them
  const long long end = clock64();
  uint32_t all = 0;
  for (int c = 0; c < kChains; ++c) all ^= x[c];
  sink[threadIdx.x] = all;
  if (threadIdx.x == 0) *cycles = end - start;
}

template <Form F>
void run(const char* name, int mufu_per_step, uint32_t* sink, long long* cycles) {
  for (int warps : {4, 8, 12, 16}) {
    probe<F><<<1, warps * 32>>>(0x1234u, sink, cycles);
    long long host = 0;
    cudaMemcpy(&host, cycles, sizeof host, cudaMemcpyDeviceToHost);
    const double per_subpartition = double(warps) / 4 * kIterations * kChains * mufu_per_step;
    std::printf(
        "%-7s warps per SMSP %d: %.2f cycles per MUFU warp instruction, %.2f per "
        "32 exponentials\n",
        name, warps / 4, host / per_subpartition,
        host / per_subpartition * mufu_per_step / (F == Form::kF32 ? 1.0 : 2.0));
  }
}

int main() {
  uint32_t* sink;
  long long* cycles;
  cudaMalloc(&sink, 1024 * sizeof(uint32_t));
  cudaMalloc(&cycles, sizeof(long long));
  run<Form::kF32>("f32", 1, sink, cycles);
  run<Form::kF16x2>("f16x2", 2, sink, cycles);
  run<Form::kBf16x2>("bf16x2", 2, sink, cycles);
  const cudaError_t err = cudaDeviceSynchronize();
  std::printf("%s\n", cudaGetErrorString(err));
  return err == cudaSuccess ? 0 : 1;
}
