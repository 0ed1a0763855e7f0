// Decode version 4: K and V tiles copied into a ring of shared-memory stages (cp.async), so
// that each block keeps kStages - 1 tiles in flight while it computes one.
//
// Version 3's threads each loaded one K and one V vector and waited for them before the
// next: a block of 128 threads had 4 KB (float32) or 2 KB (16-bit) in flight. By Little's
// law the HBM needs about bandwidth x latency = 3.35 TB/s x ~0.8 us, some 2.7 MB in flight
// across the GPU, 20 KB per SM, to stream at its rate. Here a piece's rows go through
// shared memory in tiles of kTileBytes of K and as many of V (32 float32 rows, 64 16-bit
// rows): the block issues the copies of tile t + kStages - 1 (cp.async, 16 bytes a thread
// and copy, sm_80+), then computes tile t from shared memory, so that three tiles, 48 KB,
// are in flight per block. Rows past the piece's end are zero-filled by the copy and never
// read from memory.
//
// Version 3, unchanged: one block per piece of a (sequence, head), the pieces of a head one
// cluster of at most 8 blocks (sm_90), merged by block 0 through distributed shared memory;
// the split planned on the host from (B, H, S, SM count); per row, a group of lanes holds
// the row (16 lanes of 4 float32 values, 8 lanes of 8 16-bit values), reduces q . k by
// shuffles and updates its online softmax (m, l, acc); the block merges its groups.
//
// What limits it now: at batch 1 the 8 pieces of 12 heads make 96 blocks for 132 SMs.
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

constexpr int kTargetBlocksPerSM =
    3;  // 64 KB of stages per block: three blocks fill an SM's 228 KB
constexpr int kTileBytes = 8192;  // K of one tile (and as much V): 32 float32 or 64 16-bit rows
constexpr int kStages = 4;  // tiles in the ring: kStages - 1 in flight while one is computed
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

  float m = -INFINITY, l = 0.f, acc[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) acc[i] = 0.f;

  // The ring: stage s holds tile rows of K then of V, each row its head's 64 elements.
  constexpr int kTileRows = kTileBytes / (kHeadDim * static_cast<int>(sizeof(T)));
  constexpr int kChunksPerRow = kHeadDim * static_cast<int>(sizeof(T)) / 16;  // 16-byte copies
  constexpr int kCopiesPerThread = kTileRows * kChunksPerRow / kThreads;  // of K, and of V
  static_assert(kTileRows % kRowsPerStep == 0 && kTileRows * kChunksPerRow % kThreads == 0,
                "a tile is whole steps of the block and whole copies of every thread");
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
    // The loop bound is the same for every lane of a warp (rows go to warps in blocks of
    // kRowsPerWarp), so the shuffles below always run with the whole warp.
    for (int first = warp * kRowsPerWarp; first < kTileRows; first += kRowsPerStep) {
      const int r = first + lane / kLanesPerRow;
      const bool valid = begin + t * kTileRows + r < end;
      float k[kVec], v[kVec];
      Vector<T>::load(k_stage + r * kHeadDim + slice * kVec, k);  // zeros past the end
      Vector<T>::load(v_stage + r * kHeadDim + slice * kVec, v);
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
  const cudaError_t err =
      cudaFuncSetAttribute(decode_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(config.smem_bytes));
  if (err != cudaSuccess) return err;
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
