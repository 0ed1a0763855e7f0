// Decode version 1: one thread block per (sequence, head).
//
// The new token's query row q (64 values of one head) against the n cached rows of that
// head's K and V: s_j = q . k_j / sqrt(d), o = sum_j softmax(s)_j v_j. The block streams K
// and V once, in 16-byte vectors: a row of one head is 64 elements, so 16 threads hold a
// float32 row (4 elements each) and 8 threads a 16-bit row (8 each). A group of those
// threads takes one row per step; the block's groups take consecutive rows. Each group keeps
// an online softmax over the rows it saw (m: the running maximum of the scores, in log2
// units; l: the sum of 2^(s - m); acc: the sum of 2^(s - m) v), and at the end the block
// merges its groups' (m, l, acc) in shared memory.
//
// What limits it: B x H blocks, one per SM at most in use at batch 1 (12 of 132 SMs for
// GPT-2 small), and each thread has one K and one V vector in flight before it waits.
#include "decode_launch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

namespace decode_attention {
namespace {

constexpr int kThreads = 128;  // four warps per block
constexpr float kLog2e = 1.4426950408889634f;

// 16 bytes of T as floats: a float4, or eight 16-bit values as four pairs.
template <typename T>
struct Vector;

template <>
struct Vector<float> {
  static constexpr int kElements = 4;
  __device__ static void load(const float* p, float (&x)[kElements]) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
  }
  __device__ static float store_value(float x) { return x; }
};

template <>
struct Vector<__half> {
  static constexpr int kElements = 8;
  __device__ static void load(const __half* p, float (&x)[kElements]) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __half2* pairs = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(pairs[i]);
      x[2 * i] = f.x, x[2 * i + 1] = f.y;
    }
  }
  __device__ static __half store_value(float x) { return __float2half_rn(x); }
};

template <>
struct Vector<__nv_bfloat16> {
  static constexpr int kElements = 8;
  __device__ static void load(const __nv_bfloat16* p, float (&x)[kElements]) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(pairs[i]);
      x[2 * i] = f.x, x[2 * i + 1] = f.y;
    }
  }
  __device__ static __nv_bfloat16 store_value(float x) { return __float2bfloat16_rn(x); }
};

template <typename T>
struct Operands {
  const T* __restrict__ q;
  const T* __restrict__ k;
  const T* __restrict__ v;
  const int32_t* __restrict__ lengths;
  T* __restrict__ out;
  int64_t q_batch_stride, k_batch_stride, v_batch_stride;
  int k_row_stride, v_row_stride;  // within a sequence 32-bit offsets suffice (the glue checks)
  int cache_len;                   // S
  int num_heads;                   // H
  float score_scale;  // log2(e) / sqrt(d): scores in log2 units, exp2 instead of exp
};

// Grid: one block per (sequence b, head h), blockIdx.x = b * H + h.
template <typename T>
__global__ void __launch_bounds__(kThreads) decode_kernel(const Operands<T> a) {
  constexpr int kVec = Vector<T>::kElements;  // elements per 16-byte vector
  constexpr int kLanesPerRow = kHeadDim / kVec;  // threads holding one row: 16 or 8
  constexpr int kRowsPerWarp = 32 / kLanesPerRow;  // rows a warp takes per step: 2 or 4
  constexpr int kRowsPerStep = kThreads / kLanesPerRow;  // rows the block takes per step
  static_assert(kHeadDim % kVec == 0 && 32 % kLanesPerRow == 0,
                "a row must split evenly over lanes");

  const int b = blockIdx.x / a.num_heads, h = blockIdx.x % a.num_heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = threadIdx.x / kLanesPerRow;  // which of the step's rows this thread takes
  const int slice = threadIdx.x % kLanesPerRow;  // which 16 bytes of that row
  const int column = h * kHeadDim + slice * kVec;
  // n: rows this sequence attends to, lengths[b] clamped to the cache (the contract's rule).
  const int n = min(max(a.lengths[b], 0), a.cache_len);

  float q[kVec];
  Vector<T>::load(a.q + b * a.q_batch_stride + column, q);
#pragma unroll
  for (int i = 0; i < kVec; ++i) q[i] *= a.score_scale;

  const T* k_row = a.k + b * a.k_batch_stride + column;
  const T* v_row = a.v + b * a.v_batch_stride + column;
  float m = -INFINITY, l = 0.f, acc[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) acc[i] = 0.f;

  // The loop bound is the same for every lane of a warp (rows go to warps in blocks of
  // kRowsPerWarp), so the shuffles below always run with the whole warp.
  for (int first = warp * kRowsPerWarp; first < n; first += kRowsPerStep) {
    const int j = first + lane / kLanesPerRow;
    const bool valid = j < n;
    float k[kVec] = {}, v[kVec] = {};  // zeros past the length: never read from memory
    if (valid) {
      Vector<T>::load(k_row + j * a.k_row_stride, k);
      Vector<T>::load(v_row + j * a.v_row_stride, v);
    }
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kVec; ++i) s = fmaf(q[i], k[i], s);
#pragma unroll
    for (int offset = kLanesPerRow / 2; offset > 0; offset /= 2)
      s += __shfl_xor_sync(0xffffffffu, s, offset);  // the row's lanes hold the whole score
    if (valid) {
      const float m_new = fmaxf(m, s);
      const float rescale = exp2f(m - m_new);  // 0 on the first row (m = -inf)
      const float p = exp2f(s - m_new);
      l = l * rescale + p;
#pragma unroll
      for (int i = 0; i < kVec; ++i) acc[i] = fmaf(p, v[i], acc[i] * rescale);
      m = m_new;
    }
  }

  // Merge the block's groups: (m, l) per group and acc per group and column.
  __shared__ float group_m[kRowsPerStep], group_l[kRowsPerStep];
  __shared__ float group_acc[kRowsPerStep][kHeadDim];
  if (slice == 0) group_m[group] = m, group_l[group] = l;
#pragma unroll
  for (int i = 0; i < kVec; ++i) group_acc[group][slice * kVec + i] = acc[i];
  __syncthreads();  // every group's (m, l, acc) is in shared memory before any thread merges

  if (threadIdx.x < kHeadDim) {
    const int d = threadIdx.x;
    float m_all = -INFINITY;
    for (int g = 0; g < kRowsPerStep; ++g) m_all = fmaxf(m_all, group_m[g]);
    float l_all = 0.f, o = 0.f;
    for (int g = 0; g < kRowsPerStep; ++g) {
      // A group that saw no row has m = -inf and weighs nothing (also when all did: n = 0).
      const float w = group_m[g] == -INFINITY ? 0.f : exp2f(group_m[g] - m_all);
      l_all = fmaf(group_l[g], w, l_all);
      o = fmaf(group_acc[g][d], w, o);
    }
    a.out[static_cast<int64_t>(b) * a.num_heads * kHeadDim + h * kHeadDim + d] =
        Vector<T>::store_value(l_all > 0.f ? o / l_all : 0.f);
  }
}

template <typename T>
Operands<T> operands(const Args& args) {
  Operands<T> a{};
  a.q = static_cast<const T*>(args.q);
  a.k = static_cast<const T*>(args.k_cache);
  a.v = static_cast<const T*>(args.v_cache);
  a.lengths = args.lengths;
  a.out = static_cast<T*>(args.out);
  a.q_batch_stride = args.q_batch_stride;
  a.k_batch_stride = args.k_batch_stride;
  a.v_batch_stride = args.v_batch_stride;
  a.k_row_stride = static_cast<int>(args.k_row_stride);
  a.v_row_stride = static_cast<int>(args.v_row_stride);
  a.cache_len = static_cast<int>(args.cache_len);
  a.num_heads = static_cast<int>(args.num_heads);
  a.score_scale = kLog2e / sqrtf(static_cast<float>(kHeadDim));
  return a;
}

template <typename T>
cudaError_t launch_typed(const Args& args, const DeviceLimits& limits, cudaStream_t stream) {
  const LaunchConfig config = launch_config(args, limits);
  decode_kernel<T><<<config.grid, config.block, config.smem_bytes, stream>>>(operands<T>(args));
  return cudaGetLastError();
}

}  // namespace

Requirements requirements() { return Requirements{16}; }  // 16-byte vector loads

LaunchConfig launch_config(const Args& args, const DeviceLimits&) {
  return LaunchConfig{dim3(static_cast<unsigned>(args.batch * args.num_heads)), dim3(kThreads), 0};
}

size_t workspace_bytes(const Args&, const DeviceLimits&) { return 0; }

cudaError_t launch(const Args& args, const DeviceLimits& limits, cudaStream_t stream) {
  switch (args.dtype) {
    case ElementType::kFloat32:
      return launch_typed<float>(args, limits, stream);
    case ElementType::kFloat16:
      return launch_typed<__half>(args, limits, stream);
    case ElementType::kBFloat16:
      return launch_typed<__nv_bfloat16>(args, limits, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace decode_attention
