// Decode version 8: bfloat16 and float16 on the tensor cores (mma.sync m16n8k16); float32
// as in version 7.
//
// Version 7's 16-bit path spent about 14 warp instructions per cached row: two 16-byte
// shared-memory loads, 16 conversions to float32, 8 FMAs for q . k, a shuffle tree, the
// softmax, 8 FMAs into acc, for 256 bytes of K and V. At the largest shapes that held it at
// 0.88-0.90 of the copy's bandwidth where cuDNN reaches 1.03 (H200, log of device call 3).
// Here each warp takes 16 rows of a tile on the tensor cores: S = q K^T as 8 mma.sync
// m16n8k16 (q is row 0 of the A operand, rows 1-15 zero; K from shared memory by ldmatrix),
// the softmax on the 16 scores that row 0's accumulators hold (lanes 0-3, 4 each), then
// O += P V as 8 more mma.sync (P from those accumulators rounded to the 16-bit type, as
// FlashAttention-2 and cuDNN round it; V by ldmatrix.trans). About 3 instructions a row. The
// tensor cores compute 16 rows where one is needed: they have the rate to spare. The tiles'
// 16-byte chunks are stored swizzled (chunk c of row r at c ^ (r % 8)) so that ldmatrix's
// eight rows of a matrix hit eight different bank groups.
//
// Who holds what (m16n8k16, g = lane / 4, t = lane % 4): A's a0a1 is row g, columns 2t and
// 2t + 1, a4a5 the same row at columns 2t + 8, 2t + 9, a2a3 and a6a7 row g + 8; B's b0 is
// column g at rows 2t, 2t + 1, b1 at rows 2t + 8, 2t + 9; C's c0c1 is row g at columns 2t,
// 2t + 1, c2c3 row g + 8. Row 0 of every product lives in lanes 0-3.
//
// Version 7, unchanged: the pieces planned for one wave of the block slots, up to 16 per head
// (a cluster), sharing the sequence's own length, merged by block 0 through distributed
// shared memory; K and V tiles through a ring of kStages shared-memory stages (cp.async);
// in float32, each group of lanes takes its four rows of a tile side by side.
#include "decode_launch.h"

#include <cooperative_groups.h>
#include <cstdint>
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

// The tensor-core path's instructions (sm_80+), for bfloat16 and float16.
template <typename T>
struct Mma;

template <>
struct Mma<__nv_bfloat16> {
  __device__ static uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  // c += a b on one m16n8k16 tile, float32 accumulators.
  __device__ static void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <>
struct Mma<__half> {
  __device__ static uint32_t pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  __device__ static void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// Four 8x8 matrices of 16-bit elements from shared memory; lane l gives the address of row
// l % 8 of matrix l / 8 and gets, of each matrix, row l / 4, elements 2 (l % 4) and 2 (l % 4)
// + 1 (.trans: column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1).
__device__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

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
  constexpr bool kTensorCores = sizeof(T) == 2;  // 16-bit: the tensor-core path
  static_assert(!kTensorCores || (kTileRows == 4 * 16 && kChunksPerRow == 8),
                "the tensor-core path: 16 rows of a tile per warp, 8 chunks of 16 bytes per row");
  // Where chunk c (16 bytes) of tile row r sits: swizzled on the tensor-core path, so that
  // the 8 rows ldmatrix reads at once (128 bytes apart) fall in 8 different bank groups.
  auto chunk_at = [](int r, int c) { return kTensorCores ? (c ^ (r & 7)) : c; };
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
        const int placed = chunk_at(r, chunk % kChunksPerRow) * (16 / sizeof(T));  // where it goes
        const int j = begin + t * kTileRows + r;
        const int row = j < end ? j : begin;
        const unsigned bytes = j < end ? 16u : 0u;
        const unsigned k_dst =
            static_cast<unsigned>(__cvta_generic_to_shared(k_stage + r * kHeadDim + placed));
        const unsigned v_dst =
            static_cast<unsigned>(__cvta_generic_to_shared(v_stage + r * kHeadDim + placed));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(k_dst),
                     "l"(k_head + row * a.k_row_stride + e), "r"(bytes));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(v_dst),
                     "l"(v_head + row * a.v_row_stride + e), "r"(bytes));
      }
    }
    asm volatile("cp.async.commit_group;\n" ::);  // one group per tile, empty past the last
  };

  // The tensor-core path's state. q as row 0 of the A operand for each 16-column k-step
  // (lanes 0-3; every other lane holds rows 1-15, zeros); per warp the running maximum m (in
  // log2 units), this lane's part of l, and O's accumulators: o[j] is the m16n8 tile of
  // columns 8j..8j + 7, whose c0 c1 in lanes 0-3 are O[0][8j + 2t], O[0][8j + 2t + 1].
  uint32_t q_frag[4][4] = {};
  float o[8][4] = {};
  const int g = lane / 4, t4 = lane % 4;
  if (kTensorCores && g == 0) {
    const uint32_t* q_pairs =
        reinterpret_cast<const uint32_t*>(a.q + b * a.q_batch_stride + h * kHeadDim);
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      q_frag[ks][0] = q_pairs[8 * ks + t4], q_frag[ks][2] = q_pairs[8 * ks + 4 + t4];
  }

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
    if constexpr (kTensorCores) {
      // This warp's 16 rows of the tile: 16 warp .. 16 warp + 15. S = q K^T: n-tile nt holds
      // keys 8 nt .. 8 nt + 7 of them, k-step ks the head's columns 16 ks .. 16 ks + 15.
      float sc[2][4] = {};
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        // Matrix l / 8: keys 8 (l / 16) .., columns 16 ks + 8 ((l / 8) % 2) ..: b0 b1 of n-tile 0,
        // then of 1.
        const int key = 16 * warp + 8 * (lane / 16) + lane % 8;
        uint32_t kb[4];
        ldmatrix_x4(kb, k_stage + key * kHeadDim + chunk_at(key, 2 * ks + (lane / 8) % 2) * 8);
        Mma<T>::mma(sc[0], q_frag[ks], kb[0], kb[1]);
        Mma<T>::mma(sc[1], q_frag[ks], kb[2], kb[3]);
      }
      // Row 0's scores: lanes 0-3 hold keys 8 nt + 2 t4 and + 1 in sc[nt][0], sc[nt][1].
      float m_tile = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int r = 16 * warp + 8 * nt + 2 * t4 + c;
          sc[nt][c] = begin + t * kTileRows + r < end ? sc[nt][c] * a.score_scale : -INFINITY;
          m_tile = fmaxf(m_tile, sc[nt][c]);
        }
      }
      // The maximum over lanes 0-3 (xor 1 and 2 stay within each group of four lanes), then
      // lane 0's to the whole warp: m is the same in every lane, so every lane takes the
      // branch below, which the warp's mma.sync and ldmatrix need.
      m_tile = fmaxf(m_tile, __shfl_xor_sync(0xffffffffu, m_tile, 1));
      m_tile = fmaxf(m_tile, __shfl_xor_sync(0xffffffffu, m_tile, 2));
      m_tile = __shfl_sync(0xffffffffu, m_tile, 0);
      const float m_new = fmaxf(m, m_tile);
      if (m_new != -INFINITY) {  // -inf: none of this warp's rows so far is in the piece
        const float rescale = exp2f(m - m_new);  // 0 while m = -inf
        l *= rescale;
#pragma unroll
        for (int j = 0; j < 8; ++j) o[j][0] *= rescale, o[j][1] *= rescale;
        // P as the A operand of P V: row 0 (lanes 0-3) from the scores, rows 1-15 zero.
        uint32_t pa[4] = {};
        if (g == 0) {
          float p[2][2];
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
            for (int c = 0; c < 2; ++c) p[nt][c] = exp2f(sc[nt][c] - m_new), l += p[nt][c];
          }
          pa[0] = Mma<T>::pack(p[0][0], p[0][1]);  // keys 2 t4, 2 t4 + 1
          pa[2] = Mma<T>::pack(p[1][0], p[1][1]);  // keys 8 + 2 t4, 8 + 2 t4 + 1
        }
        // O += P V: V's n-tiles j and j + 1 (columns 8 j ..) by one ldmatrix.trans; matrix
        // l / 8 is keys 8 ((l / 8) % 2) .. of the warp's 16, columns 8 (j + l / 16) ..
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
          const int key = 16 * warp + 8 * ((lane / 8) % 2) + lane % 8;
          uint32_t vb[4];
          ldmatrix_x4_trans(vb, v_stage + key * kHeadDim + chunk_at(key, j + lane / 16) * 8);
          Mma<T>::mma(o[j], pa, vb[0], vb[1]);
          Mma<T>::mma(o[j + 1], pa, vb[2], vb[3]);
        }
        m = m_new;
      }
    } else {
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
  }

  // Merge the block's groups: (m, l) per group and acc per group and column.
  __shared__ float group_m[kRowsPerStep], group_l[kRowsPerStep];
  __shared__ float group_acc[kRowsPerStep][kHeadDim];
  __shared__ float piece_m, piece_l, piece_acc[kHeadDim];  // this block's piece, read by block 0
  if constexpr (kTensorCores) {
    // A warp is a group: lanes 0-3 hold its row (m, its parts of l, O's columns 8 j + 2 t4, + 1).
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (lane == 0) group_m[warp] = m, group_l[warp] = l;
    if (g == 0) {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        group_acc[warp][8 * j + 2 * t4] = o[j][0], group_acc[warp][8 * j + 2 * t4 + 1] = o[j][1];
    }
    if (threadIdx.x >= 4 && threadIdx.x < kRowsPerStep)
      group_m[threadIdx.x] = -INFINITY;  // no fifth group
  } else {
    if (slice == 0) group_m[group] = m, group_l[group] = l;
#pragma unroll
    for (int i = 0; i < kVec; ++i) group_acc[group][slice * kVec + i] = acc[i];
  }
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
