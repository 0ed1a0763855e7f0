// Decode version 7: the pieces planned to fill one wave of the GPU's block slots, up to 16
// per head (a non-portable cluster).
//
// Version 6's plan asked for ceil(3 x SMs / heads) pieces per head, at most 8: at batch 8
// (96 heads) that is 5 pieces, 480 blocks for the 396 slots of an H100 or H200 (3 blocks of
// 64 KB of stages per SM), so 84 blocks ran in a second wave behind the first; and at batch
// 1 the 8 pieces of 12 heads made 96 blocks, one per SM on 96 of 132 SMs. Here the plan
// takes floor(slots / heads) pieces, never more than one wave, and up to 16 per head (a
// cluster past the portable 8, which sm_90 allows when the kernel says so): batch 8 gets 4
// pieces (384 blocks), batch 1 gets 16 (192 blocks on all 132 SMs), batch 32 and up one.
//
// Version 6, unchanged: each group of lanes takes its rows of a tile at once (the scores of
// four rows side by side, one maximum and one rescale per tile); K and V tiles through a ring
// of kStages shared-memory stages (cp.async), three tiles in flight per block; the pieces of
// a head one cluster sharing the sequence's own length, merged by block 0 through
// distributed shared memory; per row, a group of lanes holds the row (16 lanes of 4 float32
// values, 8 lanes of 8 16-bit values); the block merges its groups at the end.
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
};

constexpr int kBlocksPerSM = 3;  // 64 KB of stages per block: three blocks fill an SM's 228 KB
constexpr int kTileBytes = 8192;  // K of one tile (and as much V): 32 float32 or 64 16-bit rows
constexpr int kStages = 4;  // tiles in the ring: kStages - 1 in flight while one is computed
constexpr int kMinRowsPerSplit = 64;  // a shorter piece costs more in its merge than it saves
constexpr int kMaxSplits = 16;  // the largest cluster sm_90 allows (non-portable past 8)

// Grid: (sequences x heads, pieces) in clusters of (1, splits): block (b * H + h, s), rank s
// of its cluster, takes piece s of head h of sequence b: rows [s * rows, min((s + 1) * rows,
// n)) with rows planned from n below.
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
  constexpr int kTileRows = kTileBytes / (kHeadDim * static_cast<int>(sizeof(T)));
  // The piece's rows from n: the cluster's blocks share n in whole tiles, none shorter than
  // kMinRowsPerSplit (a short sequence uses fewer blocks; the others find begin >= n).
  const int share = (n + a.splits - 1) / a.splits;
  const int rows = max(kMinRowsPerSplit, (share + kTileRows - 1) / kTileRows * kTileRows);
  const int begin = blockIdx.y * rows, end = min(begin + rows, n);

  float q[kVec];
  Vector<T>::load(a.q + b * a.q_batch_stride + column, q);
#pragma unroll
  for (int i = 0; i < kVec; ++i) q[i] *= a.score_scale;

  float m = -INFINITY, l = 0.f, acc[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) acc[i] = 0.f;

  // The ring: stage s holds tile rows of K then of V, each row its head's 64 elements.
  constexpr int kChunksPerRow = kHeadDim * static_cast<int>(sizeof(T)) / 16;  // 16-byte copies
  constexpr int kCopiesPerThread = kTileRows * kChunksPerRow / kThreads;  // of K, and of V
  static_assert(kTileRows % kRowsPerStep == 0 && kTileRows * kChunksPerRow % kThreads == 0,
                "a tile is whole steps of the block and whole copies of every thread");
  constexpr int kSteps = kTileRows / kRowsPerStep;  // rows a group takes per tile: 4 in every dtype
  extern __shared__ __align__(16) unsigned char ring[];
  T* const stages = reinterpret_cast<T*>(ring);  // [kStages][2][kTileRows][kHeadDim]
  const T* k_head = a.k + b * a.k_batch_stride + h * kHeadDim;
  const T* v_head = a.v + b * a.v_batch_stride + h * kHeadDim;
  const int tiles = end > begin ? (end - begin + kTileRows - 1) / kTileRows : 0;

  // Copies tile t into its stage; rows past the piece's end are zero-filled (src-size 0: no
  // byte is read) from the piece's first row, an address that is always in the cache.
  auto issue = [&](int t) {
    if (t < tiles) {
      T* k_stage = stages + (t % kStages) * 2 * kTileRows * kHeadDim;
      T* v_stage = k_stage + kTileRows * kHeadDim;
#pragma unroll
      for (int c = 0; c < kCopiesPerThread; ++c) {
        const int chunk = c * kThreads + threadIdx.x;
        const int r = chunk / kChunksPerRow, e = chunk % kChunksPerRow * (16 / sizeof(T));
        const int j = begin + t * kTileRows + r;
        const int row = j < end ? j : begin;
        const unsigned bytes = j < end ? 16u : 0u;
        const unsigned k_dst =
            static_cast<unsigned>(__cvta_generic_to_shared(k_stage + r * kHeadDim + e));
        const unsigned v_dst =
            static_cast<unsigned>(__cvta_generic_to_shared(v_stage + r * kHeadDim + e));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(k_dst),
                     "l"(k_head + row * a.k_row_stride + e), "r"(bytes));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(v_dst),
                     "l"(v_head + row * a.v_row_stride + e), "r"(bytes));
      }
    }
    asm volatile("cp.async.commit_group;\n" ::);  // one group per tile, empty past the last
  };

#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) issue(t);
  for (int t = 0; t < tiles; ++t) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));  // this thread's copies of tile t
    // Every thread's copies of tile t have landed, and every thread has finished tile t - 1,
    // whose stage the next issue overwrites.
    __syncthreads();
    issue(t + kStages - 1);
    const T* k_stage = stages + (t % kStages) * 2 * kTileRows * kHeadDim;
    const T* v_stage = k_stage + kTileRows * kHeadDim;
    // This group's rows of the tile: step i's row is i * kRowsPerStep + warp * kRowsPerWarp
    // + lane / kLanesPerRow, as version 5 walked them. Every lane of a warp runs every step,
    // so the shuffles run with the whole warp.
    float s[kSteps], v[kSteps][kVec];
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const int r = i * kRowsPerStep + warp * kRowsPerWarp + lane / kLanesPerRow;
      float k[kVec];
      Vector<T>::load(k_stage + r * kHeadDim + slice * kVec, k);  // zeros past the end
      Vector<T>::load(v_stage + r * kHeadDim + slice * kVec, v[i]);
      float even = 0.f, odd = 0.f;  // two halves of the dot product: half the chain
#pragma unroll
      for (int e = 0; e < kVec; e += 2)
        even = fmaf(q[e], k[e], even), odd = fmaf(q[e + 1], k[e + 1], odd);
      s[i] = even + odd;
    }
#pragma unroll
    for (int offset = kLanesPerRow / 2; offset > 0; offset /= 2) {
#pragma unroll
      for (int i = 0; i < kSteps; ++i)
        s[i] += __shfl_xor_sync(0xffffffffu, s[i], offset);  // whole scores
    }
    float m_tile = -INFINITY;
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const int r = i * kRowsPerStep + warp * kRowsPerWarp + lane / kLanesPerRow;
      if (begin + t * kTileRows + r >= end) s[i] = -INFINITY;  // past the piece: weighs nothing
      m_tile = fmaxf(m_tile, s[i]);
    }
    const float m_new = fmaxf(m, m_tile);
    if (m_new != -INFINITY) {  // -inf: none of this group's rows so far is in the piece
      const float rescale = exp2f(m - m_new);  // 0 while m = -inf
      l *= rescale;
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[e] *= rescale;
#pragma unroll
      for (int i = 0; i < kSteps; ++i) {
        const float p = exp2f(s[i] - m_new);  // 0 for a row past the piece
        l += p;
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[e] = fmaf(p, v[i][e], acc[e]);
      }
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

// The host's part of the plan: pieces per (sequence, head), the cluster's size, from B x H,
// S and the SM count. As many pieces as fit the grid in one wave of kBlocksPerSM blocks per
// SM, none shorter than kMinRowsPerSplit rows of the cache, at most kMaxSplits (a cluster).
// The rows of each piece are planned on the device (decode_kernel).
struct SplitPlan {
  int splits;
};

SplitPlan split_plan(const Args& args, const DeviceLimits& limits) {
  const int64_t heads = args.batch * args.num_heads, S = args.cache_len;
  const int64_t wanted = static_cast<int64_t>(kBlocksPerSM) * limits.sm_count / heads;  // one wave
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(kMaxSplits, S / kMinRowsPerSplit));
  return SplitPlan{static_cast<int>(std::max<int64_t>(1, std::min(wanted, most)))};
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
  const cudaError_t err =
      cudaFuncSetAttribute(decode_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(config.smem_bytes));
  if (err != cudaSuccess) return err;
  if (plan.splits > 8) {  // a cluster past the portable size: the kernel must allow it
    const cudaError_t allowed =
        cudaFuncSetAttribute(decode_kernel<T>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (allowed != cudaSuccess) return allowed;
  }
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
                      dim3(kThreads), static_cast<size_t>(kStages) * 2 * kTileBytes};
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
