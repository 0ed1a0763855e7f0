// Decode version 8: K and V loaded straight into registers, several rows per thread in
// flight, with no shared-memory ring and no barrier per tile.
//
// Version 7 staged K and V through a ring of cp.async stages: 64 KB of shared memory per
// block, so 3 blocks (12 warps) per SM, and one __syncthreads per tile that holds every warp
// of the block to the slowest. It read at 0.89-0.93 of the copy's rate at the large shapes,
// where version 2's plain loads at 16 blocks per SM reached 1.00 in float32; and 0.53 at
// batch 1 L=16384, where the ring's blocks waited on each other. Here each thread loads
// kUnroll rows of K and of V (16 bytes of each row) into registers, issues the next kUnroll
// rows before it computes these (a prefetch one step ahead), and never waits for another
// warp until the block's groups merge at the end: 2 x kUnroll x 32 bytes per thread in flight.
//
// Unchanged from version 7: the plan of pieces per head (one wave of the block slots, up to
// 16 per head, one cluster), each piece's rows planned on the device from the sequence's own
// length, the online softmax per group of lanes with one maximum and one rescale per step,
// the block's groups merged in shared memory and the cluster's pieces by block 0 through
// distributed shared memory.
#include "decode_launch.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

namespace decode_attention {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

// The block's shape: threads, the blocks per SM the plan counts on (the kernel's launch
// bounds hold the registers to it), and rows per thread per step.
template <int Threads, int BlocksPerSM, int Unroll>
struct BlockShape {
  static constexpr int kThreads = Threads;
  static constexpr int kBlocksPerSM = BlocksPerSM;
  static constexpr int kUnroll = Unroll;
};
// 256 threads, 2 blocks per SM (at most 128 registers a thread), 4 rows of K and of V per
// thread per step: 8 x 16 bytes loaded per thread per step, 16 in flight with the prefetch.
using Shape = BlockShape<256, 2, 4>;

constexpr int kMinRowsPerSplit = 64;  // a shorter piece costs more in its merge than it saves
constexpr int kMaxSplits = 16;  // the largest cluster sm_90 allows (non-portable past 8)

// 16 bytes from global memory that no thread writes during the kernel: the read-only path,
// not kept in L1 (each byte is read once).
__device__ __forceinline__ uint4 load_once(const void* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
}

// 16 bytes of T as floats: a float4, or eight 16-bit values as four pairs.
template <typename T>
struct Vector;

template <>
struct Vector<float> {
  static constexpr int kElements = 4;
  __device__ static void unpack(const uint4& raw, float (&x)[kElements]) {
    x[0] = __uint_as_float(raw.x), x[1] = __uint_as_float(raw.y);
    x[2] = __uint_as_float(raw.z), x[3] = __uint_as_float(raw.w);
  }
  __device__ static float store_value(float x) { return x; }
};

template <>
struct Vector<__half> {
  static constexpr int kElements = 8;
  __device__ static void unpack(const uint4& raw, float (&x)[kElements]) {
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
  __device__ static void unpack(const uint4& raw, float (&x)[kElements]) {
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

// Grid: (sequences x heads, pieces) in clusters of (1, splits): block (b * H + h, s), rank s
// of its cluster, takes piece s of head h of sequence b: rows [s * rows, min((s + 1) * rows,
// n)) with rows planned from n below.
//
// Rows to threads: a group of kLanesPerRow lanes holds one row of the head (16 lanes of 4
// float32 values, 8 lanes of 8 16-bit values; lane `slice` of the group holds elements
// slice * kVec .. slice * kVec + kVec - 1). The block's kGroups groups take kGroups
// consecutive rows, a pass; a step is kUnroll passes, so group g's rows of the step starting
// at `first` are first + u * kGroups + g for u < kUnroll.
template <typename T, class S>
__global__ void __launch_bounds__(S::kThreads, S::kBlocksPerSM) decode_kernel(const Operands<T> a) {
  constexpr int kVec = Vector<T>::kElements;  // elements per 16-byte vector
  constexpr int kLanesPerRow = kHeadDim / kVec;  // threads holding one row: 16 or 8
  constexpr int kGroups = S::kThreads / kLanesPerRow;  // rows the block takes per pass
  constexpr int kUnroll = S::kUnroll;
  constexpr int kRowsPerStep = kGroups * kUnroll;
  static_assert(kHeadDim % kVec == 0 && 32 % kLanesPerRow == 0,
                "a row must split evenly over the lanes of one warp");
  static_assert(S::kThreads % 32 == 0 && kHeadDim <= S::kThreads,
                "whole warps, and a thread per column for the merges");

  // Arrive at the cluster's barrier now and wait on it only before the first store into
  // block 0's shared memory (the merge): by then every block of the cluster has started, which
  // distributed shared memory requires, and the wait costs nothing.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");

  const int b = blockIdx.x / a.num_heads, h = blockIdx.x % a.num_heads;
  const int group = threadIdx.x / kLanesPerRow;  // which row of a pass this thread takes
  const int slice = threadIdx.x % kLanesPerRow;  // which 16 bytes of that row
  const int column = h * kHeadDim + slice * kVec;
  // n: rows this sequence attends to, lengths[b] clamped to the cache (the contract's rule).
  const int n = min(max(a.lengths[b], 0), a.cache_len);
  // The piece's rows from n: the cluster's blocks share n in whole passes, none shorter than
  // kMinRowsPerSplit (a short sequence uses fewer blocks; the others find begin >= n).
  const int share = (n + a.splits - 1) / a.splits;
  const int rows = max(kMinRowsPerSplit, (share + kGroups - 1) / kGroups * kGroups);
  const int begin = blockIdx.y * rows, end = min(begin + rows, n);

  float q[kVec];
  Vector<T>::unpack(load_once(a.q + b * a.q_batch_stride + column), q);
#pragma unroll
  for (int i = 0; i < kVec; ++i) q[i] *= a.score_scale;

  const T* k_col = a.k + b * a.k_batch_stride + column;
  const T* v_col = a.v + b * a.v_batch_stride + column;
  // This thread's rows of the step starting at `first`, 16 bytes of K and of V each; zeros
  // for a row past the piece's end, which is never read.
  auto fetch = [&](int first, uint4(&k)[kUnroll], uint4(&v)[kUnroll]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = first + u * kGroups + group;
      if (j < end) {
        k[u] = load_once(k_col + j * a.k_row_stride);
        v[u] = load_once(v_col + j * a.v_row_stride);
      } else {
        k[u] = v[u] = make_uint4(0u, 0u, 0u, 0u);
      }
    }
  };

  float m = -INFINITY, l = 0.f, acc[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) acc[i] = 0.f;

  uint4 k_next[kUnroll], v_next[kUnroll];
  fetch(begin, k_next, v_next);
  // The loop's bounds are the block's (begin, end), the same for every lane, so the shuffles
  // below always run with the whole warp.
  for (int first = begin; first < end; first += kRowsPerStep) {
    uint4 k_raw[kUnroll], v_raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) k_raw[u] = k_next[u], v_raw[u] = v_next[u];
    if (first + kRowsPerStep < end) fetch(first + kRowsPerStep, k_next, v_next);  // in flight now

    float s[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float k[kVec];
      Vector<T>::unpack(k_raw[u], k);
      float even = 0.f, odd = 0.f;  // two halves of the dot product: half the chain
#pragma unroll
      for (int e = 0; e < kVec; e += 2)
        even = fmaf(q[e], k[e], even), odd = fmaf(q[e + 1], k[e + 1], odd);
      s[u] = even + odd;
    }
#pragma unroll
    for (int offset = kLanesPerRow / 2; offset > 0; offset /= 2) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        s[u] += __shfl_xor_sync(0xffffffffu, s[u], offset);  // whole scores
    }
    float m_step = -INFINITY;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (first + u * kGroups + group >= end) s[u] = -INFINITY;  // past the piece: weighs nothing
      m_step = fmaxf(m_step, s[u]);
    }
    const float m_new = fmaxf(m, m_step);
    if (m_new != -INFINITY) {  // -inf: none of this group's rows so far is in the piece
      const float rescale = exp2f(m - m_new);  // 0 while m = -inf
      l *= rescale;
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[e] *= rescale;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const float p = exp2f(s[u] - m_new);  // 0 for a row past the piece (its V is zeros)
        float v[kVec];
        Vector<T>::unpack(v_raw[u], v);
        l += p;
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[e] = fmaf(p, v[e], acc[e]);
      }
      m = m_new;
    }
  }

  // Merge the block's groups: (m, l) per group and acc per group and column.
  __shared__ float group_m[kGroups], group_l[kGroups];
  __shared__ float group_acc[kGroups][kHeadDim];
  // Block 0's: every piece's (m, l, acc), written there by the piece's block.
  __shared__ float piece_m[kMaxSplits], piece_l[kMaxSplits], piece_acc[kMaxSplits][kHeadDim];
  if (slice == 0) group_m[group] = m, group_l[group] = l;
#pragma unroll
  for (int i = 0; i < kVec; ++i) group_acc[group][slice * kVec + i] = acc[i];
  __syncthreads();  // every group's (m, l, acc) is in shared memory before any thread merges

  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const unsigned rank = cluster.block_rank();
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");  // every block has started
  if (threadIdx.x < kHeadDim) {
    const int d = threadIdx.x;
    float m_all = -INFINITY;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) m_all = fmaxf(m_all, group_m[g]);
    float l_all = 0.f, o = 0.f;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      // A group that saw no row has m = -inf and weighs nothing (also when all did: n = 0).
      const float w = group_m[g] == -INFINITY ? 0.f : exp2f(group_m[g] - m_all);
      l_all = fmaf(group_l[g], w, l_all);
      o = fmaf(group_acc[g][d], w, o);
    }
    // Stores into block 0's shared memory (distributed shared memory): they do not wait for
    // a reply, where version 7's block 0 read each piece's values one round trip at a time.
    if (d == 0) *cluster.map_shared_rank(&piece_m[rank], 0) = m_all;
    if (d == 0) *cluster.map_shared_rank(&piece_l[rank], 0) = l_all;
    *cluster.map_shared_rank(&piece_acc[rank][d], 0) = o;
  }
  // Every piece's (m, l, acc) is in block 0's shared memory, and visible to it, before block 0
  // merges them (release/acquire at cluster scope). No block touches another's shared
  // memory after this barrier, so the others may leave.
  cluster.sync();
  if (rank == 0 && threadIdx.x < kHeadDim) {
    const int d = threadIdx.x;
    float m_all = -INFINITY;
    for (int s = 0; s < a.splits; ++s) m_all = fmaxf(m_all, piece_m[s]);
    float l_all = 0.f, o = 0.f;
    for (int s = 0; s < a.splits; ++s) {
      const float w = piece_m[s] == -INFINITY
                          ? 0.f
                          : exp2f(piece_m[s] - m_all);  // a piece past the length weighs nothing
      l_all = fmaf(piece_l[s], w, l_all);
      o = fmaf(piece_acc[s][d], w, o);
    }
    a.out[static_cast<int64_t>(b) * a.num_heads * kHeadDim + h * kHeadDim + d] =
        Vector<T>::store_value(l_all > 0.f ? o / l_all : 0.f);
  }
}

// The host's part of the plan: pieces per (sequence, head), the cluster's size, from B x H,
// S and the SM count. As many pieces as fit the grid in one wave of the shape's blocks per
// SM, none shorter than kMinRowsPerSplit rows of the cache, at most kMaxSplits (a cluster).
// The rows of each piece are planned on the device (decode_kernel).
template <class S>
int split_plan(const Args& args, const DeviceLimits& limits) {
  const int64_t heads = args.batch * args.num_heads, rows = args.cache_len;
  const int64_t wanted = static_cast<int64_t>(S::kBlocksPerSM) * limits.sm_count / heads;
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(kMaxSplits, rows / kMinRowsPerSplit));
  return static_cast<int>(std::max<int64_t>(1, std::min(wanted, most)));
}

template <typename T>
Operands<T> operands(const Args& args, int splits) {
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
  a.splits = splits;
  return a;
}

template <class S>
LaunchConfig launch_config_for(const Args& args, const DeviceLimits& limits) {
  return LaunchConfig{dim3(static_cast<unsigned>(args.batch * args.num_heads),
                           static_cast<unsigned>(split_plan<S>(args, limits))),
                      dim3(S::kThreads), 0};
}

template <typename T, class S>
cudaError_t launch_typed(const Args& args, const DeviceLimits& limits, cudaStream_t stream) {
  const LaunchConfig config = launch_config_for<S>(args, limits);
  const int splits = static_cast<int>(config.grid.y);
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 1;
  cluster.val.clusterDim.y = splits;  // a head's pieces: one cluster
  cluster.val.clusterDim.z = 1;
  if (splits > 8) {  // a cluster past the portable size: the kernel must allow it
    const cudaError_t allowed = cudaFuncSetAttribute(
        decode_kernel<T, S>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (allowed != cudaSuccess) return allowed;
  }
  cudaLaunchConfig_t launch{};
  launch.gridDim = config.grid;
  launch.blockDim = config.block;
  launch.dynamicSmemBytes = 0;
  launch.stream = stream;
  launch.attrs = &cluster;
  launch.numAttrs = 1;
  return cudaLaunchKernelEx(&launch, decode_kernel<T, S>, operands<T>(args, splits));
}

}  // namespace

Requirements requirements() { return Requirements{16}; }  // 16-byte vector loads

LaunchConfig launch_config(const Args& args, const DeviceLimits& limits) {
  return launch_config_for<Shape>(args, limits);
}

size_t workspace_bytes(const Args&, const DeviceLimits&) { return 0; }

cudaError_t launch(const Args& args, const DeviceLimits& limits, cudaStream_t stream) {
  switch (args.dtype) {
    case ElementType::kFloat32:
      return launch_typed<float, Shape>(args, limits, stream);
    case ElementType::kFloat16:
      return launch_typed<__half, Shape>(args, limits, stream);
    case ElementType::kBFloat16:
      return launch_typed<__nv_bfloat16, Shape>(args, limits, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace decode_attention
