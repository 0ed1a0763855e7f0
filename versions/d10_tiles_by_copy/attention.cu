// Decode version 10: where the heads fill a wave and the caches are long, one block per head
// reading K and V in tiles copied by cp.async, as cuDNN's decode kernel does.
//
// Version 9's staying blocks read the caches at 0.94-0.98 of the copy's rate where cuDNN
// reads at 1.02-1.07 (H200, batch 32-128, L >= 4096). Read alone (experiments/d09/
// read_floor.py), no order of 16-byte loads into registers we tried reached cuDNN's rate;
// cuDNN's schedule did (Nsight Compute, results/nvidia-h200/experiments/2026-11-28_3): one
// block of 128 threads per (sequence, head), three resident per SM, K and V in tiles of 128
// rows by cp.async (LDGSTS.E.BYPASS.128) in two stages. Read alone with that schedule and
// nothing else (`tiles 2 stages`), batch 32 L=16384 took 364.9 us against d09's 404.6.
//
// Here, in 16-bit types, where d09 would run its staying blocks (the heads fill the 2 x SMs
// slots) and the cache holds at least kMinTileRows rows, tile_kernel runs: a 128-thread block
// per head, tiles of 16 KB of K and 16 KB of V (128 rows) copied into a two-stage ring while
// the other stage is computed. (The kernel is a template over the element type like the
// others; the plan never gives it float32, where its 64-row tiles measured slower.) Each thread
// copies exactly the vectors it later reads (its group's rows, its slice of each), so no barrier
// guards the ring: a thread's cp.async.wait_group covers its own copies, and a stage is refilled
// only by the thread that read it. Elsewhere version 9 runs unchanged.
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
// tile_kernel's block: 128 threads, 3 blocks per SM (64 KB of ring each, at most 170
// registers a thread), 8 rows per group per tile: a tile is kGroups x 8 rows = 16 KB of K.
using TileShape = BlockShape<128, 3, 8>;
constexpr int kTileStages = 2;  // one tile computed while the next is in flight
// The shortest cache tile_kernel takes: a block's start (its length, q and first tile: ~2 us
// with nothing of its own in flight) is then under a tenth of its head's time.
constexpr int kMinTileRows = 2048;

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
  int heads;                       // B x H
  float score_scale;  // log2(e) / sqrt(d): scores in log2 units, exp2 instead of exp
  int splits;  // pieces per (sequence, head): the cluster's size (the cluster kernel only)
};

// Rows to threads: a group of kLanesPerRow lanes holds one row of the head (16 lanes of 4
// float32 values, 8 lanes of 8 16-bit values; lane `slice` of the group holds elements
// slice * kVec .. slice * kVec + kVec - 1). The block's kGroups groups take kGroups
// consecutive rows, a pass; a step is kUnroll passes, so group g's rows of the step starting
// at `first` are first + u * kGroups + g for u < kUnroll.
template <typename T, class S>
struct Layout {
  static constexpr int kVec = Vector<T>::kElements;  // elements per 16-byte vector
  static constexpr int kLanesPerRow = kHeadDim / kVec;  // threads holding one row: 16 or 8
  static constexpr int kGroups = S::kThreads / kLanesPerRow;  // rows the block takes per pass
  static constexpr int kUnroll = S::kUnroll;
  static constexpr int kRowsPerStep = kGroups * kUnroll;
  static_assert(kHeadDim % kVec == 0 && 32 % kLanesPerRow == 0,
                "a row must split evenly over the lanes of one warp");
  static_assert(S::kThreads % 32 == 0 && kHeadDim <= S::kThreads,
                "whole warps, and a thread per column for the merges");
};

// One head's K and V columns for this thread, and the rows [begin, end) it streams.
template <typename T>
struct Rows {
  const T* k_col;
  const T* v_col;
  int begin, end;
};

template <typename T>
__device__ __forceinline__ Rows<T> rows_of(
    const Operands<T>& a, int b, int column, int begin, int end) {
  return Rows<T>{a.k + b * a.k_batch_stride + column, a.v + b * a.v_batch_stride + column, begin,
                 end};
}

// This thread's rows of the step starting at `first`, 16 bytes of K and of V each; zeros for
// a row past the end, which is never read.
template <typename T, class S>
__device__ __forceinline__ void fetch(const Operands<T>& a,
                                      const Rows<T>& r,
                                      int first,
                                      int group,
                                      uint4 (&k)[S::kUnroll],
                                      uint4 (&v)[S::kUnroll]) {
#pragma unroll
  for (int u = 0; u < S::kUnroll; ++u) {
    const int j = first + u * Layout<T, S>::kGroups + group;
    if (j < r.end) {
      k[u] = load_once(r.k_col + j * a.k_row_stride);
      v[u] = load_once(r.v_col + j * a.v_row_stride);
    } else {
      k[u] = v[u] = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// The online softmax of this thread's group over rows [r.begin, r.end), version 8's loop:
// k_next / v_next hold the first step's rows on entry (fetched by the caller), and each
// step's successor is issued before the step is computed. On return (m, l, acc) hold the
// group's maximum (log2 units), sum of 2^(s - m) and sum of 2^(s - m) v.
template <typename T, class S>
__device__ __forceinline__ void stream_piece(const Operands<T>& a,
                                             const Rows<T>& r,
                                             const float (&q)[Vector<T>::kElements],
                                             int group,
                                             uint4 (&k_next)[S::kUnroll],
                                             uint4 (&v_next)[S::kUnroll],
                                             float& m,
                                             float& l,
                                             float (&acc)[Vector<T>::kElements]) {
  using L = Layout<T, S>;
  constexpr int kVec = L::kVec, kUnroll = L::kUnroll;
  m = -INFINITY, l = 0.f;
#pragma unroll
  for (int i = 0; i < kVec; ++i) acc[i] = 0.f;
  // The loop's bounds are the block's, the same for every lane, so the shuffles below always
  // run with the whole warp.
  for (int first = r.begin; first < r.end; first += L::kRowsPerStep) {
    uint4 k_raw[kUnroll], v_raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) k_raw[u] = k_next[u], v_raw[u] = v_next[u];
    if (first + L::kRowsPerStep < r.end)
      fetch<T, S>(a, r, first + L::kRowsPerStep, group, k_next, v_next);

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
    for (int offset = L::kLanesPerRow / 2; offset > 0; offset /= 2) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        s[u] += __shfl_xor_sync(0xffffffffu, s[u], offset);  // whole scores
    }
    float m_step = -INFINITY;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (first + u * L::kGroups + group >= r.end)
        s[u] = -INFINITY;  // past the end: weighs nothing
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
        const float p = exp2f(s[u] - m_new);  // 0 for a row past the end (its V is zeros)
        float v[kVec];
        Vector<T>::unpack(v_raw[u], v);
        l += p;
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[e] = fmaf(p, v[e], acc[e]);
      }
      m = m_new;
    }
  }
}

// The block's groups' (m, l, acc), staged in shared memory.
template <int kGroups>
struct GroupStage {
  float m[kGroups], l[kGroups], acc[kGroups][kHeadDim];
};

// Merges the block's groups: thread d < 64 returns the block's (m, l) and o[d] (unnormalised).
// Holds the block at one barrier; the caller must not write `stage` again before every
// thread has passed a second one.
template <typename T, class S>
__device__ __forceinline__ void merge_groups(GroupStage<Layout<T, S>::kGroups>& stage,
                                             int group,
                                             int slice,
                                             float m,
                                             float l,
                                             const float (&acc)[Vector<T>::kElements],
                                             float& m_all,
                                             float& l_all,
                                             float& o) {
  using L = Layout<T, S>;
  if (slice == 0) stage.m[group] = m, stage.l[group] = l;
#pragma unroll
  for (int i = 0; i < L::kVec; ++i) stage.acc[group][slice * L::kVec + i] = acc[i];
  __syncthreads();  // every group's (m, l, acc) is in shared memory before any thread merges
  m_all = -INFINITY, l_all = 0.f, o = 0.f;
  if (threadIdx.x < kHeadDim) {
    const int d = threadIdx.x;
#pragma unroll
    for (int g = 0; g < L::kGroups; ++g) m_all = fmaxf(m_all, stage.m[g]);
#pragma unroll
    for (int g = 0; g < L::kGroups; ++g) {
      // A group that saw no row has m = -inf and weighs nothing (also when all did: n = 0).
      const float w = stage.m[g] == -INFINITY ? 0.f : exp2f(stage.m[g] - m_all);
      l_all = fmaf(stage.l[g], w, l_all);
      o = fmaf(stage.acc[g][d], w, o);
    }
  }
}

// This thread's 16 bytes of q for head h of sequence b, scaled to log2 units.
template <typename T>
__device__ __forceinline__ void scaled_q(const Operands<T>& a,
                                         const uint4& raw,
                                         float (&q)[Vector<T>::kElements]) {
  Vector<T>::unpack(raw, q);
#pragma unroll
  for (int i = 0; i < Vector<T>::kElements; ++i) q[i] *= a.score_scale;
}

template <typename T>
__device__ __forceinline__ void store_out(
    const Operands<T>& a, int b, int h, int d, float o, float l) {
  a.out[static_cast<int64_t>(b) * a.num_heads * kHeadDim + h * kHeadDim + d] =
      Vector<T>::store_value(l > 0.f ? o / l : 0.f);
}

// Fewer heads than block slots: version 8's kernel. Grid (B x H, pieces) in clusters of
// (1, splits): block (b * H + h, s), rank s of its cluster, takes piece s of head h of
// sequence b: rows [s * rows, min((s + 1) * rows, n)) with rows planned from n below.
template <typename T, class S>
__global__ void __launch_bounds__(S::kThreads, S::kBlocksPerSM) decode_kernel(const Operands<T> a) {
  using L = Layout<T, S>;
  // Arrive at the cluster's barrier now and wait on it only before the first store into
  // block 0's shared memory (the merge): by then every block of the cluster has started, which
  // distributed shared memory requires, and the wait costs nothing.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");

  const int b = blockIdx.x / a.num_heads, h = blockIdx.x % a.num_heads;
  const int group = threadIdx.x / L::kLanesPerRow;  // which row of a pass this thread takes
  const int slice = threadIdx.x % L::kLanesPerRow;  // which 16 bytes of that row
  const int column = h * kHeadDim + slice * L::kVec;
  // n: rows this sequence attends to, lengths[b] clamped to the cache (the contract's rule).
  const int n = min(max(a.lengths[b], 0), a.cache_len);
  // The piece's rows from n: the cluster's blocks share n in whole passes, none shorter than
  // kMinRowsPerSplit (a short sequence uses fewer blocks; the others find begin >= n).
  const int share = (n + a.splits - 1) / a.splits;
  const int rows = max(kMinRowsPerSplit, (share + L::kGroups - 1) / L::kGroups * L::kGroups);
  const int begin = blockIdx.y * rows;
  const Rows<T> r = rows_of(a, b, column, begin, min(begin + rows, n));

  float q[L::kVec];
  scaled_q(a, load_once(a.q + b * a.q_batch_stride + column), q);
  uint4 k_next[L::kUnroll], v_next[L::kUnroll];
  fetch<T, S>(a, r, r.begin, group, k_next, v_next);
  float m, l, acc[L::kVec];
  stream_piece<T, S>(a, r, q, group, k_next, v_next, m, l, acc);

  __shared__ GroupStage<L::kGroups> stage;
  // Block 0's: every piece's (m, l, acc), written there by the piece's block.
  __shared__ float piece_m[kMaxSplits], piece_l[kMaxSplits], piece_acc[kMaxSplits][kHeadDim];
  float m_all, l_all, o;
  merge_groups<T, S>(stage, group, slice, m, l, acc, m_all, l_all, o);

  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const unsigned rank = cluster.block_rank();
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");  // every block has started
  if (threadIdx.x < kHeadDim) {
    const int d = threadIdx.x;
    // Stores into block 0's shared memory (distributed shared memory): they do not wait for
    // a reply.
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
    float m_sum = -INFINITY;
    for (int s = 0; s < a.splits; ++s) m_sum = fmaxf(m_sum, piece_m[s]);
    float l_sum = 0.f, o_sum = 0.f;
    for (int s = 0; s < a.splits; ++s) {
      const float w = piece_m[s] == -INFINITY
                          ? 0.f
                          : exp2f(piece_m[s] - m_sum);  // a piece past the length weighs nothing
      l_sum = fmaf(piece_l[s], w, l_sum);
      o_sum = fmaf(piece_acc[s][d], w, o_sum);
    }
    store_out(a, b, h, d, o_sum, l_sum);
  }
}

// As many heads as block slots or more: one block per slot (gridDim.x <= heads), block i
// takes heads i, i + gridDim.x, ... whole (one piece each, so no merge between blocks).
template <typename T, class S>
__global__ void __launch_bounds__(S::kThreads, S::kBlocksPerSM)
    staying_kernel(const Operands<T> a) {
  using L = Layout<T, S>;
  const int group = threadIdx.x / L::kLanesPerRow;  // which row of a pass this thread takes
  const int slice = threadIdx.x % L::kLanesPerRow;  // which 16 bytes of that row
  __shared__ GroupStage<L::kGroups> stage;

  int item = blockIdx.x;  // b * H + h
  int b = item / a.num_heads, h = item % a.num_heads;
  Rows<T> r =
      rows_of(a, b, h * kHeadDim + slice * L::kVec, 0, min(max(a.lengths[b], 0), a.cache_len));
  float q[L::kVec];
  scaled_q(a, load_once(a.q + b * a.q_batch_stride + h * kHeadDim + slice * L::kVec), q);
  uint4 k_next[L::kUnroll], v_next[L::kUnroll];
  fetch<T, S>(a, r, 0, group, k_next, v_next);
  while (true) {
    // The next head's length and q: loaded now, used after this head's rows.
    const int next = item + gridDim.x;
    const int b_next = next < a.heads ? next / a.num_heads : b;  // past the last: nothing is read
    const int h_next = next < a.heads ? next % a.num_heads : h;
    int n_next = 0;
    uint4 q_next = make_uint4(0u, 0u, 0u, 0u);
    if (next < a.heads) {
      n_next = a.lengths[b_next];
      q_next = load_once(a.q + b_next * a.q_batch_stride + h_next * kHeadDim + slice * L::kVec);
    }
    float m, l, acc[L::kVec];
    stream_piece<T, S>(a, r, q, group, k_next, v_next, m, l, acc);
    // The next head's first rows, in flight while this head is merged.
    const Rows<T> r_next = rows_of(a, b_next, h_next * kHeadDim + slice * L::kVec, 0,
                                   next < a.heads ? min(max(n_next, 0), a.cache_len) : 0);
    fetch<T, S>(a, r_next, 0, group, k_next, v_next);
    float m_all, l_all, o;
    merge_groups<T, S>(stage, group, slice, m, l, acc, m_all, l_all, o);
    if (threadIdx.x < kHeadDim) store_out(a, b, h, threadIdx.x, o, l_all);
    if (next >= a.heads) break;
    // Every thread has read `stage` before the next head's groups write it.
    __syncthreads();
    item = next, b = b_next, h = h_next, r = r_next;
    scaled_q(a, q_next, q);
  }
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global into shared memory, asynchronously (cp.async.cg: through L2 only);
// `bytes` 0 reads nothing and writes zeros (a row past the length).
__device__ __forceinline__ void copy_async(void* shared, const void* global, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(shared)),
               "l"(global), "r"(bytes)
               : "memory");
}

// Where the heads fill the slots and the caches are long: one block per head (blockIdx.x =
// b x H + h). Thread (group, slice) as Layout<T, TileShape>: a tile is kRowsPerStep rows,
// group g takes rows g + u x kGroups (u < kUnroll) of each, and copies exactly those vectors
// (its slice of each row) into the ring: vector (row, slice) of stage s is
// ring[s][K or V][row x kLanesPerRow + slice].
template <typename T>
__global__ void __launch_bounds__(TileShape::kThreads, TileShape::kBlocksPerSM)
    tile_kernel(const Operands<T> a) {
  using L = Layout<T, TileShape>;
  constexpr int kTileVectors = L::kRowsPerStep * L::kLanesPerRow;  // of K (and of V) per tile
  static_assert(kTileVectors * 16 == 16384, "tiles of 16 KB of K and of V");
  extern __shared__ uint4 ring[];  // [kTileStages][2][kTileVectors]
  __shared__ GroupStage<L::kGroups> stage;

  const int b = blockIdx.x / a.num_heads, h = blockIdx.x % a.num_heads;
  const int group = threadIdx.x / L::kLanesPerRow;  // which rows of a tile this thread takes
  const int slice = threadIdx.x % L::kLanesPerRow;  // which 16 bytes of each
  const int column = h * kHeadDim + slice * L::kVec;
  const int n = min(max(a.lengths[b], 0), a.cache_len);  // the contract's clamp
  const T* k_col = a.k + b * a.k_batch_stride + column;
  const T* v_col = a.v + b * a.v_batch_stride + column;
  const int tiles = (n + L::kRowsPerStep - 1) / L::kRowsPerStep;

  // Tile t's rows of this thread into stage t % kTileStages, as one cp.async group (an empty
  // group past the last tile, so that wait_group counts alike on every iteration).
  auto issue = [&](int t) {
    if (t < tiles) {
      uint4* k_stage = ring + (t % kTileStages) * 2 * kTileVectors;
      uint4* v_stage = k_stage + kTileVectors;
#pragma unroll
      for (int u = 0; u < L::kUnroll; ++u) {
        const int row = u * L::kGroups + group, j = t * L::kRowsPerStep + row;
        const int bytes = j < n ? 16 : 0;
        const int at = min(j, n - 1);  // a row that exists (nothing is read for j >= n)
        copy_async(k_stage + row * L::kLanesPerRow + slice, k_col + at * a.k_row_stride, bytes);
        copy_async(v_stage + row * L::kLanesPerRow + slice, v_col + at * a.v_row_stride, bytes);
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };

  float q[L::kVec];
  scaled_q(a, load_once(a.q + b * a.q_batch_stride + column), q);
  issue(0);
  float m = -INFINITY, l = 0.f, acc[L::kVec];
#pragma unroll
  for (int e = 0; e < L::kVec; ++e) acc[e] = 0.f;
  for (int t = 0; t < tiles; ++t) {
    issue(t + 1);  // into the stage this thread read at tile t - 1
    asm volatile("cp.async.wait_group 1;" ::: "memory");  // this thread's copies of tile t
    const uint4* k_stage = ring + (t % kTileStages) * 2 * kTileVectors;
    const uint4* v_stage = k_stage + kTileVectors;
    float s[L::kUnroll];
#pragma unroll
    for (int u = 0; u < L::kUnroll; ++u) {
      float k[L::kVec];
      Vector<T>::unpack(k_stage[(u * L::kGroups + group) * L::kLanesPerRow + slice], k);
      float even = 0.f, odd = 0.f;  // two halves of the dot product: half the chain
#pragma unroll
      for (int e = 0; e < L::kVec; e += 2)
        even = fmaf(q[e], k[e], even), odd = fmaf(q[e + 1], k[e + 1], odd);
      s[u] = even + odd;
    }
#pragma unroll
    for (int offset = L::kLanesPerRow / 2; offset > 0; offset /= 2) {
#pragma unroll
      for (int u = 0; u < L::kUnroll; ++u)
        s[u] += __shfl_xor_sync(0xffffffffu, s[u], offset);  // whole scores
    }
    float m_tile = -INFINITY;
#pragma unroll
    for (int u = 0; u < L::kUnroll; ++u) {
      if (t * L::kRowsPerStep + u * L::kGroups + group >= n) s[u] = -INFINITY;  // past the length
      m_tile = fmaxf(m_tile, s[u]);
    }
    const float m_new = fmaxf(m, m_tile);
    if (m_new != -INFINITY) {  // -inf: none of this group's rows so far is in the sequence
      const float rescale = exp2f(m - m_new);  // 0 while m = -inf
      l *= rescale;
#pragma unroll
      for (int e = 0; e < L::kVec; ++e) acc[e] *= rescale;
#pragma unroll
      for (int u = 0; u < L::kUnroll; ++u) {
        const float p = exp2f(s[u] - m_new);  // 0 past the length (its V was zero-filled)
        float v[L::kVec];
        Vector<T>::unpack(v_stage[(u * L::kGroups + group) * L::kLanesPerRow + slice], v);
        l += p;
#pragma unroll
        for (int e = 0; e < L::kVec; ++e) acc[e] = fmaf(p, v[e], acc[e]);
      }
      m = m_new;
    }
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");  // no copy outlives the block
  float m_all, l_all, o;
  merge_groups<T, TileShape>(stage, group, slice, m, l, acc, m_all, l_all, o);
  if (threadIdx.x < kHeadDim) store_out(a, b, h, threadIdx.x, o, l_all);
}

// The host's part of the plan, from B x H, S and the SM count. Where the heads are fewer than
// the block slots (kBlocksPerSM x SMs), version 8's: as many pieces per head as fit the grid in
// one wave, none shorter than kMinRowsPerSplit rows of the cache, at most kMaxSplits (a
// cluster); the rows of each piece are planned on the device (decode_kernel). Otherwise one
// staying block per slot (staying_kernel), splits = 0, or, in 16-bit types where the cache
// holds at least kMinTileRows rows, a block per head (tile_kernel), splits = kTiles.
constexpr int kTiles = -1;
template <class S>
int split_plan(const Args& args, const DeviceLimits& limits) {
  const int64_t heads = args.batch * args.num_heads, rows = args.cache_len;
  const int64_t slots = static_cast<int64_t>(S::kBlocksPerSM) * limits.sm_count;
  // The tiles in 16-bit types only: in float32 they read slower than version 9's staying
  // blocks on both GPUs (at 3c4188e398a2: +1-5% on the H100, log 2026-11-28_3; +18-21%
  // on the H200, log 2026-11-28_5).
  const bool tiles = rows >= kMinTileRows && args.dtype != ElementType::kFloat32;
  if (heads >= slots) return tiles ? kTiles : 0;
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(kMaxSplits, rows / kMinRowsPerSplit));
  return static_cast<int>(std::max<int64_t>(1, std::min(slots / heads, most)));
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
  a.heads = static_cast<int>(args.batch * args.num_heads);
  a.score_scale = kLog2e / sqrtf(static_cast<float>(kHeadDim));
  a.splits = splits;
  return a;
}

// The ring of tile_kernel's K and V tiles, bytes.
constexpr size_t kTileRingBytes = size_t(kTileStages) * 2 * 16384;

// The launch of whichever kernel the plan picks: (slots, 1) staying blocks, (B x H, splits)
// blocks in clusters of (1, splits), or B x H tile blocks.
template <class S>
LaunchConfig launch_config_for(const Args& args, const DeviceLimits& limits) {
  const int splits = split_plan<S>(args, limits);
  const int64_t heads = args.batch * args.num_heads;
  if (splits == kTiles)
    return LaunchConfig{dim3(static_cast<unsigned>(heads)), dim3(TileShape::kThreads),
                        kTileRingBytes};
  const dim3 grid = splits == 0 ? dim3(static_cast<unsigned>(S::kBlocksPerSM * limits.sm_count), 1)
                                : dim3(static_cast<unsigned>(heads), static_cast<unsigned>(splits));
  return LaunchConfig{grid, dim3(S::kThreads), 0};
}

template <typename T, class S>
cudaError_t launch_typed(const Args& args, const DeviceLimits& limits, cudaStream_t stream) {
  const LaunchConfig config = launch_config_for<S>(args, limits);
  const int splits = split_plan<S>(args, limits);
  if (splits == kTiles) {
    // 64 KB of dynamic shared memory is past the default 48 KB: the kernel must allow it.
    const cudaError_t allowed = cudaFuncSetAttribute(
        tile_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kTileRingBytes));
    if (allowed != cudaSuccess) return allowed;
    tile_kernel<T><<<config.grid, config.block, config.smem_bytes, stream>>>(operands<T>(args, 0));
    return cudaGetLastError();
  }
  if (splits == 0) {
    staying_kernel<T, S><<<config.grid, config.block, 0, stream>>>(operands<T>(args, 0));
    return cudaGetLastError();
  }
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
