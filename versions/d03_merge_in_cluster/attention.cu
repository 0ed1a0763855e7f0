// Decode version 3: the pieces of a head merged in the same launch, through a cluster.
//
// Version 2 cut each (sequence, head) into `splits` pieces, one block each, and merged them
// in a second kernel that waited for the whole first one. Here a head's pieces are the
// blocks of one thread-block cluster (sm_90): each block keeps its piece's (m, l, acc) in
// its own shared memory, the cluster synchronises, and block 0 of the cluster reads the
// others' through distributed shared memory and writes the output. No workspace, no second
// launch. A portable cluster holds at most 8 blocks, so a head has at most 8 pieces.
//
// Version 2's split, unchanged: pieces of `split_rows` cached rows, planned on the host from
// (B, H, S, SM count) for about kTargetBlocksPerSM blocks per SM; the merge is
// m = max_s m_s, l = sum_s l_s 2^(m_s - m), o = sum_s acc_s 2^(m_s - m) / l, and a piece
// past a sequence's length has m = -inf and weighs nothing.
//
// Version 1's notes, unchanged below the split:
// The new token's query row q (64 values of one head) against the n cached rows of that
// head's K and V: s_j = q . k_j / sqrt(d), o = sum_j softmax(s)_j v_j. The block streams K
// and V once, in 16-byte vectors: a row of one head is 64 elements, so 16 threads hold a
// float32 row (4 elements each) and 8 threads a 16-bit row (8 each). A group of those
// threads takes one row per step; the block's groups take consecutive rows. Each group keeps
// an online softmax over the rows it saw (m: the running maximum of the scores, in log2
// units; l: the sum of 2^(s - m); acc: the sum of 2^(s - m) v), and at the end the block
// merges its groups' (m, l, acc) in shared memory.
//
// What limits it now: each thread has one K and one V vector in flight before it waits (a
// block of 128 threads, 4 KB of K and V in float32, 2 KB in 16 bits), and at batch 1 the 8
// pieces of 12 heads make 96 blocks for 132 SMs.
#include "decode_launch.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
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
  int splits;  // pieces per (sequence, head): the cluster's size
  int split_rows;  // cached rows per piece (the last may hold fewer)
};

constexpr int kTargetBlocksPerSM = 4;  // d01's blocks are small: 128 threads, 4 KB of shared memory
constexpr int kMinRowsPerSplit = 64;  // a shorter piece costs more in its merge than it saves
constexpr int kMaxSplits = 8;  // the largest portable cluster

// Grid: (sequences x heads, pieces) in clusters of (1, splits): block (b * H + h, s), rank s
// of its cluster, takes piece s of head h of sequence b, rows [s * split_rows,
// min((s + 1) * split_rows, n)).
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
  const int begin = blockIdx.y * a.split_rows, end = min(begin + a.split_rows, n);

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
  for (int first = begin + warp * kRowsPerWarp; first < end; first += kRowsPerStep) {
    const int j = first + lane / kLanesPerRow;
    const bool valid = j < end;
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
  __shared__ float piece_m, piece_l, piece_acc[kHeadDim];  // this block's piece, read by block 0
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
    if (d == 0) piece_m = m_all, piece_l = l_all;
    piece_acc[d] = o;
  }
  // Every block's piece (m, l, acc) is in its shared memory, and visible to the cluster,
  // before block 0 reads them (release/acquire at cluster scope).
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  cluster.sync();
  if (cluster.block_rank() == 0 && threadIdx.x < kHeadDim) {
    const int d = threadIdx.x;
    float m_all = -INFINITY;
    for (int s = 0; s < a.splits; ++s) m_all = fmaxf(m_all, *cluster.map_shared_rank(&piece_m, s));
    float l_all = 0.f, o = 0.f;
    for (int s = 0; s < a.splits; ++s) {
      const float m = *cluster.map_shared_rank(&piece_m, s);
      const float w =
          m == -INFINITY ? 0.f : exp2f(m - m_all);  // a piece past the length weighs nothing
      l_all = fmaf(*cluster.map_shared_rank(&piece_l, s), w, l_all);
      o = fmaf(cluster.map_shared_rank(piece_acc, s)[d], w, o);
    }
    a.out[static_cast<int64_t>(b) * a.num_heads * kHeadDim + h * kHeadDim + d] =
        Vector<T>::store_value(l_all > 0.f ? o / l_all : 0.f);
  }
  // No block leaves (and frees its shared memory) while block 0 may still read it.
  cluster.sync();
}

// The split plan: pieces per (sequence, head) and rows per piece, from B x H, S and the SM
// count. Enough pieces that the grid has about kTargetBlocksPerSM blocks per SM, none
// shorter than kMinRowsPerSplit rows, at most kMaxSplits (a cluster); rows per piece a multiple of
// 16 (a step of the block: 16 rows of 16-bit elements, two steps of float32 rows).
struct SplitPlan {
  int splits;
  int split_rows;
};

SplitPlan split_plan(const Args& args, const DeviceLimits& limits) {
  const int64_t heads = args.batch * args.num_heads, S = args.cache_len;
  const int64_t wanted =
      (static_cast<int64_t>(kTargetBlocksPerSM) * limits.sm_count + heads - 1) / heads;
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(kMaxSplits, S / kMinRowsPerSplit));
  const int64_t splits = std::max<int64_t>(1, std::min(wanted, most));
  const int64_t rows = ((S + splits - 1) / splits + 15) / 16 * 16;
  return SplitPlan{static_cast<int>((S + rows - 1) / rows), static_cast<int>(rows)};
}

template <typename T>
Operands<T> operands(const Args& args, const SplitPlan& plan) {
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
  a.splits = plan.splits;
  a.split_rows = plan.split_rows;
  return a;
}

template <typename T>
cudaError_t launch_typed(const Args& args, const DeviceLimits& limits, cudaStream_t stream) {
  const LaunchConfig config = launch_config(args, limits);
  const SplitPlan plan = split_plan(args, limits);
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 1;
  cluster.val.clusterDim.y = plan.splits;  // a head's pieces: one cluster
  cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t launch{};
  launch.gridDim = config.grid;
  launch.blockDim = config.block;
  launch.dynamicSmemBytes = config.smem_bytes;
  launch.stream = stream;
  launch.attrs = &cluster;
  launch.numAttrs = 1;
  return cudaLaunchKernelEx(&launch, decode_kernel<T>, operands<T>(args, plan));
}

}  // namespace

Requirements requirements() { return Requirements{16}; }  // 16-byte vector loads

LaunchConfig launch_config(const Args& args, const DeviceLimits& limits) {
  const SplitPlan plan = split_plan(args, limits);
  return LaunchConfig{dim3(static_cast<unsigned>(args.batch * args.num_heads), plan.splits),
                      dim3(kThreads), 0};
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
