// Half-precision version 1: version 17 (warps own rows, keys split across thread blocks
// when the grid would leave multiprocessors idle) on 16-bit inputs, bfloat16 or float16
// (one template, both types), with one tensor-core product per operand instead of three.
// Version 17 split each float32 operand into two TF32 parts and accumulated three
// products to stay float32-accurate; here q, k and v already are what the tensor cores
// take, so S_ij = Q_i K_j^T and O_i += P_ij V_j are one mma.sync.m16n8k16 per 16 x 8 x 16
// piece, float32 accumulation, and the output is rounded once, at the end, to the input's
// type. P_ij is rounded to the input's type for the second product, as FlashAttention-2
// and cuDNN do; that and the output's rounding bound the error.
//
// With 16-bit elements a row of 64 is 128 bytes, and the operands reach the registers by
// ldmatrix (one instruction loads four 8 x 8 matrices of 16-bit values, each lane giving
// one row address), in the exact fragment layouts mma.m16n8k16 prescribes. V's fragments
// need keys along the pairs a lane holds, the transpose of how V is stored: ldmatrix.trans
// does that transpose on the way.
//
// One thread block of 4 warps computes one split of one tile of B_r = 64 query rows of
// one (batch, head), walking over its key/value tiles K_j, V_j (B_c = 64), double-
// buffered with cp.async. Warp w owns rows 16w .. 16w + 15. Lane layouts (PTX ISA,
// "Matrix Fragments for mma.m16n8k16 with floating point type"), g = lane / 4,
// t = lane % 4, 16-bit values in pairs (one 32-bit register holds two):
//   A (16 x 16, row-major):  a01 = A[g][2t, 2t+1], a23 = A[g + 8][2t, 2t+1],
//                            a45 = A[g][2t+8, 2t+9], a67 = A[g + 8][2t+8, 2t+9]
//   B (16 x 8, k x n):       b01 = B[2t, 2t+1][g], b23 = B[2t+8, 2t+9][g]
//   C, D (16 x 8, float32):  c0 = C[g][2t], c1 = C[g][2t + 1], c2 = C[g + 8][2t],
//                            c3 = C[g + 8][2t + 1]
// So lane (g, t) holds rows g and g + 8 of S_ij and O_i, columns 8n + 2t and 8n + 2t + 1
// of each 8-column slice n, as in version 17; the row statistics m and l are reduced
// over the 4 lanes of a row by shuffles.
//
// The scores stay unscaled in the accumulators: m is the row's largest raw score, and
// P_ij = 2^(c S_ij - c m) with c = log2(e) / sqrt(d), one FFMA and one exp2 per element.
// (Version 17 folded c into Q; a 16-bit Q times c would be rounded again.) O is kept
// unnormalised, diag(l)^-1 is applied once at the end (or by the merge).
//
// Causal shortcuts: tiles entirely right of the diagonal are never loaded; only the
// diagonal tile is masked; row blocks start longest-first.
#include "../common/attention_launch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error \
    "half-precision version 1 needs compute capability 8.0 or newer: cp.async and bfloat16 mma do not exist before it"
#endif

namespace causal_attention {
namespace {

constexpr int kWarps = 4;        // blockDim.y: warps, each owning 16 rows
constexpr int kLanes = 32;       // blockDim.x
constexpr int kMmaM = 16;        // mma.m16n8k16: rows of A, C and D ...
constexpr int kMmaN = 8;         // ... columns of B, C and D ...
constexpr int kMmaK = 16;        // ... and the inner dimension
constexpr int kRowLanes = 4;     // lanes holding one row of C (the same g)

struct Tiles {
  int B_r;  // query rows per tile
  int B_c;  // key/value rows per tile
};

constexpr Tiles kTiles = {/*B_r=*/kMmaM * kWarps, /*B_c=*/64};
static_assert(kTiles.B_r == 64 && kTiles.B_c == 64, "four warps of 16 rows, 64 key columns");
constexpr int kSlicesS = kTiles.B_c / kMmaN;  // 8-column slices of S_ij (n of Q K^T)
constexpr int kSlicesO = kHeadDim / kMmaN;    // 8-column slices of O_i (n of P V)
constexpr int kStepsQK = kHeadDim / kMmaK;    // k steps of Q K^T (over d)
constexpr int kStepsPV = kTiles.B_c / kMmaK;  // k steps of P V (over the keys)

constexpr int kStages = 2;  // K/V buffers: tile j + 1 loads into one while j is read

// Shared-memory tiles hold rows of 64 16-bit values, 128 bytes, as 8 chunks of 16 bytes.
// ldmatrix reads one chunk from each of 8 consecutive rows at once; stored plainly, those
// 8 chunks would sit 128 bytes apart, all in the same 4 banks (an 8-way conflict). Chunk c
// of row r is therefore stored at chunk c ^ (r % 8): the 8 rows' chunks land in 8
// different positions, 32 different banks, for every c. cp.async writes whole chunks, so
// the swizzle costs the copies nothing.
constexpr int kChunksPerRow = kHeadDim * 2 / 16;  // 8
static_assert(kChunksPerRow == 8, "the swizzle below permutes 8 chunks per row");

__device__ __forceinline__ int swizzled_chunk(int row, int chunk) { return chunk ^ (row % 8); }

// Bytes of one 64-row tile of 16-bit values.
constexpr int kTileBytes = 64 * kHeadDim * 2;  // 8 KB

// Shared memory: Q_i 8 KB + 2 x (K_j 8 KB + V_j 8 KB) = 40,960 bytes, within the default
// 48 KB per block (no opt-in needed).
size_t smem_bytes(Tiles) { return static_cast<size_t>(kTileBytes) * (1 + 2 * kStages); }

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Thread blocks one SM holds at once. 40,960 bytes of shared memory each would allow five
// of the H100's 228 KB, but the unrolled tile loop keeps a whole tile's K and V fragments
// in flight: about 175 registers per thread (22.4 K per block) without spills, so two
// blocks. Capped for three (170), ptxas spills. The split plan counts on two, and
// __launch_bounds__ holds the compiler to it.
constexpr int kBlocksPerSm = 2;

// How the keys are split (version 17's plan). Row block i (of T_r) has i + 1 tiles, cut
// into ceil((i + 1) / tiles_per_split) splits; the grid has max_splits = ceil(T_r /
// tiles_per_split) slots per row block, and blocks in slots a row block does not use
// return at once.
struct SplitPlan {
  int row_blocks;       // T_r
  int tiles_per_split;  // L
  int max_splits;       // splits of the longest row block
};

// The causal work, sum over row blocks of (i + 1) tiles per (batch, head), spread
// evenly over every SM's block slots would give each slot L = ceil(work / slots) tiles.
// When the longest row block (T_r tiles) is longer than that, row blocks are cut into
// splits of at most L tiles. (At B = 1 on an H100: T = 512 gives L = 1 for T_r = 8,
// T = 2048 gives L = 12 for T_r = 32, T = 4096 L = 47 for T_r = 64; at B = 8 from
// T = 2048, L >= T_r: no split.)
SplitPlan plan_splits(const HalfArgs& a, const DeviceLimits& limits) {
  const int T_r = ceil_div(static_cast<int>(a.seq_len), kTiles.B_r);
  const int64_t heads = a.batch * a.num_heads;
  const int64_t slots = static_cast<int64_t>(limits.sm_count) * kBlocksPerSm;
  const int64_t work = heads * T_r * (T_r + 1) / 2;  // tiles left of or on the diagonal
  const int64_t L = (work + slots - 1) / slots;
  if (L >= T_r) return {T_r, T_r, 1};
  return {T_r, static_cast<int>(L), ceil_div(T_r, static_cast<int>(L))};
}

// Floats of partial results per split slot: O (B_r x d) and (m, l) per row.
constexpr size_t kPartialFloats = static_cast<size_t>(kTiles.B_r) * (kHeadDim + 2);

// Where the rows of one operand are, in elements: element (b, t, c) is at
// b * batch + t * row + c. The glue checks that T * row fits in an int.
struct Strides {
  int64_t batch;
  int row;
};

// The two 16-bit types: how a pair of floats becomes one register of two values, and
// the mma instruction that multiplies them.
template <typename Element>
struct HalfOps;

template <>
struct HalfOps<__nv_bfloat16> {
  __device__ static uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);  // lo in the low 16 bits
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
  // D += A B for one m16n8k16 tile (layouts above).
  __device__ static void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b01, uint32_t b23) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b01), "r"(b23));
  }
};

template <>
struct HalfOps<__half> {
  __device__ static uint32_t pack(float lo, float hi) {
    const __half2 pair = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
  __device__ static void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b01, uint32_t b23) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b01), "r"(b23));
  }
};

// cp.async.cg: an asynchronous 16-byte copy from global to shared memory that bypasses
// L1 and the registers. src_bytes = 0 reads nothing and writes 16 zero bytes.
__device__ void copy_async_16(void* dst, const void* src, int src_bytes) {
  const unsigned dst_shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst_shared), "l"(src),
               "r"(src_bytes)
               : "memory");
}

// Closes the group of copies this thread has issued since the last commit.
__device__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until every copy this thread has committed has landed in shared memory (its
// own copies only: a barrier then makes everyone's visible).
__device__ void copy_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// ldmatrix.x4: four 8 x 8 matrices of 16-bit values; lane l gives the address of row l % 8
// of matrix l / 8, and register r of every lane receives matrix r, lane (g, t) its row g,
// columns 2t and 2t + 1. The .trans form delivers the transpose: rows 2t and 2t + 1,
// column g.
__device__ void load_matrix_x4(uint32_t (&r)[4], const void* row_address) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ void load_matrix_x4_trans(uint32_t (&r)[4], const void* row_address) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// The address of 16-bit element (row, 8 * chunk) of a swizzled 64 x 64 tile.
__device__ __forceinline__ const char* tile_chunk(const char* tile, int row, int chunk) {
  return tile + row * (kHeadDim * 2) + swizzled_chunk(row, chunk) * 16;
}

// Butterfly reductions over the 4 lanes of a row (lanes 4g .. 4g + 3); every lane gets
// its row's result.
__device__ float row_max(float value) {
  for (int offset = kRowLanes / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

__device__ float row_sum(float value) {
  for (int offset = kRowLanes / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// The online softmax for this lane's two rows (rows g and g + 8 of the warp, absolute
// rows row_g and row_g + 8) of the tile starting at column col0: masks the scores if the
// tile crosses the diagonal (kMasked; no other tile has a masked entry), takes each
// row's max over its 4 lanes, turns s into P_ij = 2^(c s - c m_new) in place, and
// updates m and this lane's part of l; alpha gets each row's 2^(c m_old - c m_new), by
// which O is rescaled. Element e of slice n sits in row g + 8 (e / 2), column
// 8n + 2t + e % 2.
template <bool kMasked>
__device__ void softmax_rows(float (&s)[kSlicesS][4],
                             int row_g,
                             int col0,
                             int T,
                             float c,
                             float (&m)[2],
                             float (&l)[2],
                             float (&alpha)[2]) {
  const int t = threadIdx.x % kRowLanes;
  float m_tilde[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kSlicesS; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (kMasked) {
        const int row = row_g + 8 * (e / 2), col = col0 + kMmaN * n + 2 * t + e % 2;
        if (!(col <= row && col < T)) s[n][e] = -INFINITY;
      }
      m_tilde[e / 2] = fmaxf(m_tilde[e / 2], s[n][e]);
    }
  float neg_cm[2];  // -c m_new per row: the FFMA's addend
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // Every row of a tile left of or on the diagonal has an unmasked entry (its own
    // column, or for rows past T column 0), so m_new is finite.
    const float m_new = fmaxf(m[h], row_max(m_tilde[h]));
    alpha[h] = exp2f(c * (m[h] - m_new));  // rescales the old O and l; 0 on the first tile
    m[h] = m_new;
    l[h] *= alpha[h];
    neg_cm[h] = -c * m_new;
  }
#pragma unroll
  for (int n = 0; n < kSlicesS; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = exp2f(fmaf(c, s[n][e], neg_cm[e / 2]));  // 2^-inf = 0 for masked entries
      l[e / 2] += s[n][e];
    }
}

// __launch_bounds__ caps registers so that a block of this size can always launch.
template <typename Element, int d, int B_r, int B_c>
__global__ void __launch_bounds__(kLanes* kWarps, kBlocksPerSm)
    causal_attention_kernel(const Element* __restrict__ q,
                            const Element* __restrict__ k,
                            const Element* __restrict__ v,
                            Element* __restrict__ out,
                            Strides q_stride,
                            Strides k_stride,
                            Strides v_stride,
                            int T,
                            int H,
                            float c,
                            int tiles_per_split,
                            int max_splits,
                            float* __restrict__ partial) {
  using Ops = HalfOps<Element>;
  extern __shared__ __align__(128) char smem[];
  constexpr int kThreads = kLanes * kWarps;
  constexpr int kChunks = kTileBytes / 16;  // 16-byte chunks of one tile: 512
  static_assert(d == kHeadDim && B_r == 64 && B_c == 64, "the swizzle assumes 64 x 64 tiles");
  char* Q_s = smem;                                // [B_r][d], swizzled
  char* K_buf = Q_s + kTileBytes;                  // [kStages][B_c][d], swizzled
  char* V_buf = K_buf + kStages * kTileBytes;      // [kStages][B_c][d], swizzled

  const int C = H * d;
  const int b = blockIdx.x / H;
  const int h = blockIdx.x % H;
  // blockIdx.y = (T_r - 1 - i) * max_splits + split: row blocks longest-first, and the
  // splits of one row block next to each other.
  const int i = gridDim.y / max_splits - 1 - blockIdx.y / max_splits;  // query tile
  const int split = blockIdx.y % max_splits;
  const int splits = (i + tiles_per_split) / tiles_per_split;  // ceil((i + 1) / L)
  if (split >= splits) return;  // a slot this row block does not use: the whole block leaves
  // This split's key tiles: [j_begin, j_end). The last split holds the diagonal tile i.
  const int j_begin = split * tiles_per_split;
  const int j_end = min(j_begin + tiles_per_split, i + 1);
  const int lane = threadIdx.x, warp = threadIdx.y;
  const int tid = warp * kLanes + lane;
  const int g = lane / kRowLanes, t = lane % kRowLanes;

  const Element* q_bh = q + b * q_stride.batch + h * d;
  const Element* k_bh = k + b * k_stride.batch + h * d;
  const Element* v_bh = v + b * v_stride.batch + h * d;
  Element* o_bh = out + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * d;  // contiguous

  const int row0 = i * B_r;
  const int rows = min(B_r, T - row0);  // the last tile may be partial

  // Starts the copy of Q_i, 16-byte chunks, swizzled; rows past T are zero, so their
  // scores are finite (they are never stored).
  for (int idx = tid; idx < kChunks; idx += kThreads) {
    const int r = idx / kChunksPerRow, x = idx % kChunksPerRow;
    copy_async_16(Q_s + r * (d * 2) + swizzled_chunk(r, x) * 16,
                  q_bh + (row0 + min(r, rows - 1)) * q_stride.row + 8 * x, r < rows ? 16 : 0);
  }

  // Starts the copy of K_j, V_j into buffer j % kStages, a 16-byte chunk per thread and
  // step, swizzled; rows past T are zero-filled.
  auto load_tile = [&](int j) {
    const int col0 = j * B_c;
    const int cols = min(B_c, T - col0);
    char* K_s = K_buf + (j % kStages) * kTileBytes;
    char* V_s = V_buf + (j % kStages) * kTileBytes;
    for (int idx = tid; idx < kChunks; idx += kThreads) {
      const int kv = idx / kChunksPerRow, x = idx % kChunksPerRow;
      const int src_row = col0 + min(kv, cols - 1);  // a valid address even when not read
      const int bytes = kv < cols ? 16 : 0;
      const int offset = kv * (d * 2) + swizzled_chunk(kv, x) * 16;
      copy_async_16(K_s + offset, k_bh + src_row * k_stride.row + 8 * x, bytes);
      copy_async_16(V_s + offset, v_bh + src_row * v_stride.row + 8 * x, bytes);
    }
    copy_async_commit();  // one group: Q_i (first call only) and this tile
  };

  load_tile(j_begin);
  copy_async_wait_all();
  // Guards Q_s: every thread's chunks of Q_i have landed before the warps read their A
  // fragments (and tile j_begin's, which the first iteration's barrier would guard too).
  __syncthreads();

  // This warp's 16 rows of Q_i as the A fragments of the 4 k steps of Q K^T, held in
  // registers for the whole kernel: step kq is the 16 x 16 block of columns 16 kq ..,
  // loaded as four 8 x 8 matrices (rows 0-7 | 8-15) x (columns 0-7 | 8-15), in the
  // order a01, a23, a45, a67 = (0-7, 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15): lane l
  // points at row 8 (l / 8 % 2) + l % 8 of the warp's rows, chunk 2 kq + l / 16.
  uint32_t q_frag[kStepsQK][4];
  {
    const int r = kMmaM * warp + 8 * (lane / 8 % 2) + lane % 8;
#pragma unroll
    for (int kq = 0; kq < kStepsQK; ++kq)
      load_matrix_x4(q_frag[kq], tile_chunk(Q_s, r, 2 * kq + lane / 16));
  }

  // This lane's rows (g and g + 8 of the warp), their statistics (m equal across the
  // row's 4 lanes, l this lane's part) and its part of O_i, in C-fragment layout.
  const int row_g = row0 + kMmaM * warp + g;
  float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.0f, 0.0f};
  float o[kSlicesO][4] = {};

  for (int j = j_begin; j < j_end; ++j) {
    const int col0 = j * B_c;
    const char* K_s = K_buf + (j % kStages) * kTileBytes;
    const char* V_s = V_buf + (j % kStages) * kTileBytes;

    copy_async_wait_all();  // this thread's copies of tile j have landed
    // Guards K_s, V_s and the other buffer: everyone's copies of tile j are visible,
    // and every warp is done with tile j - 1, whose buffer the copy started next
    // overwrites.
    __syncthreads();
    if (j + 1 < j_end) load_tile(j + 1);  // runs while tile j is computed

    // S_ij = Q_i K_j^T. B = K^T, so b01 of 8-key slice n in k step kq is K[8n + g][16 kq +
    // 2t, +1]: row g of the 8 x 8 matrix (keys 8n .., d 16 kq ..) of K as stored, what
    // ldmatrix gives lane (g, t) without a transpose. One x4 load covers two slices of one
    // k step: matrices (keys 0-7 | 8-15 of the pair) x (d 0-7 | 8-15 of the step), in the
    // order b01, b23 of slice 2p, b01, b23 of slice 2p + 1: lane l points at key
    // 16p + 8 (l / 16) + l % 8, chunk 2 kq + l / 8 % 2.
    float s[kSlicesS][4] = {};
#pragma unroll
    for (int kq = 0; kq < kStepsQK; ++kq)
#pragma unroll
      for (int p = 0; p < kSlicesS / 2; ++p) {
        uint32_t kf[4];
        load_matrix_x4(kf,
                       tile_chunk(K_s, 16 * p + 8 * (lane / 16) + lane % 8, 2 * kq + lane / 8 % 2));
        Ops::mma(s[2 * p], q_frag[kq], kf[0], kf[1]);
        Ops::mma(s[2 * p + 1], q_frag[kq], kf[2], kf[3]);
      }

    // Online softmax, in registers. Tile i holds the diagonal (and T's end); every
    // earlier tile is unmasked.
    float alpha[2];
    if (j == i)
      softmax_rows<true>(s, row_g, col0, T, c, m_i, l_i, alpha);
    else
      softmax_rows<false>(s, row_g, col0, T, c, m_i, l_i, alpha);
#pragma unroll
    for (int n = 0; n < kSlicesO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] *= alpha[e / 2];

        // O_i += P_ij V_j. The A fragment of k step kp (keys 16 kp .. 16 kp + 15) is the C
        // fragments of S slices 2 kp and 2 kp + 1, rounded to 16 bits in pairs: a01 = (c0, c1)
        // of slice 2 kp (row g, keys 2t, 2t + 1), a23 = (c2, c3) of it (row g + 8), a45, a67 the
        // same of slice 2 kp + 1 (keys 2t + 8, 2t + 9): no lane needs another's value. B = V:
        // b01 of 8-column slice n is V[16 kp + 2t, +1][8n + g], column g of rows 2t, 2t + 1 of
        // the 8 x 8 matrix (keys 16 kp .., d 8n ..): ldmatrix.trans. One x4 load covers two
        // slices: matrices (keys 0-7 | 8-15 of the step) x (d 0-7 | 8-15 of the pair), in the
        // order b01, b23 of slice 2p, b01, b23 of slice 2p + 1: lane l points at key
        // 16 kp + 8 (l / 8 % 2) + l % 8, chunk 2p + l / 16. P is 0 past the last key, and V's
        // rows there are zero.
#pragma unroll
    for (int kp = 0; kp < kStepsPV; ++kp) {
      const uint32_t p_frag[4] = {Ops::pack(s[2 * kp][0], s[2 * kp][1]),
                                  Ops::pack(s[2 * kp][2], s[2 * kp][3]),
                                  Ops::pack(s[2 * kp + 1][0], s[2 * kp + 1][1]),
                                  Ops::pack(s[2 * kp + 1][2], s[2 * kp + 1][3])};
#pragma unroll
      for (int p = 0; p < kSlicesO / 2; ++p) {
        uint32_t vf[4];
        load_matrix_x4_trans(
            vf, tile_chunk(V_s, 16 * kp + 8 * (lane / 8 % 2) + lane % 8, 2 * p + lane / 16));
        Ops::mma(o[2 * p], p_frag, vf[0], vf[1]);
        Ops::mma(o[2 * p + 1], p_frag, vf[2], vf[3]);
      }
    }
  }

  if (splits == 1) {
    // O_i = diag(l)^-1 O_i, rounded once, straight from registers to global memory: lane
    // (g, t) stores columns 8n + 2t, 8n + 2t + 1 of rows g and g + 8, a pair each.
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float inv_l = 1.0f / row_sum(l_i[hh]);  // all lanes: the shuffles need them
      const int row = row_g + 8 * hh;
      if (row >= row0 + rows) continue;
      Element* o_row = o_bh + static_cast<size_t>(row) * C;
#pragma unroll
      for (int n = 0; n < kSlicesO; ++n)
        *reinterpret_cast<uint32_t*>(o_row + kMmaN * n + 2 * t) =
            Ops::pack(o[n][2 * hh] * inv_l, o[n][2 * hh + 1] * inv_l);
    }
    return;
  }
  // A partial result for merge_splits: unnormalised O in float32, then (c m, l) per row
  // (m in the powers of 2 the merge weighs with), in this split's slot of the workspace
  // (rows past T included: the merge skips them).
  float* slot =
      partial + ((static_cast<size_t>(blockIdx.x) * gridDim.y + blockIdx.y) * kPartialFloats);
  float* stats = slot + B_r * d;  // [B_r][2]: c m, l
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const float l = row_sum(l_i[hh]);  // all lanes: the shuffles need them
    const int r = kMmaM * warp + g + 8 * hh;  // row within the tile
#pragma unroll
    for (int n = 0; n < kSlicesO; ++n)
      *reinterpret_cast<float2*>(slot + r * d + kMmaN * n + 2 * t) =
          make_float2(o[n][2 * hh], o[n][2 * hh + 1]);
    if (t == 0) *reinterpret_cast<float2*>(stats + 2 * r) = make_float2(c * m_i[hh], l);
  }
}

constexpr int kMergeThreads = 256;  // 4 per row of a 64-row tile, 16 columns each

// Merges the partial results of every row block that was split; one thread block per
// (batch, head) and row block (grid (B H, T_r), the same order as the kernel's), and
// thread (r, quarter) combines row r's columns 16 quarter .. 16 quarter + 15 over the
// row block's splits, with m in powers of 2 (c m): m = max_s m_s, l = sum_s 2^(m_s - m) l_s,
// O = sum_s 2^(m_s - m) O_s / l.
template <typename Element, int d, int B_r>
__global__ void __launch_bounds__(kMergeThreads) merge_splits(
    const float* __restrict__ partial,
    Element* __restrict__ out,
    int T,
    int H,
    int tiles_per_split,
    int max_splits) {
  using Ops = HalfOps<Element>;
  constexpr int kColsPerThread = d * B_r / kMergeThreads;
  static_assert(kColsPerThread == 16, "4 threads per row, 16 columns (four float4) each");
  const int i = gridDim.y - 1 - blockIdx.y;  // query tile, numbered as in the kernel
  const int splits = (i + tiles_per_split) / tiles_per_split;
  if (splits == 1) return;  // written directly by its only split
  const int r = threadIdx.x / 4, c0 = (threadIdx.x % 4) * kColsPerThread;
  const int row = i * B_r + r;
  if (row >= T) return;

  // The kernel's block (x, y) with y = blockIdx.y * max_splits + split left its partial
  // result in slot x * (T_r * max_splits) + y.
  const float* first = partial + (static_cast<size_t>(blockIdx.x) * gridDim.y + blockIdx.y) *
                                     max_splits * kPartialFloats;
  float m = -INFINITY;
  for (int sp = 0; sp < splits; ++sp) m = fmaxf(m, first[sp * kPartialFloats + B_r * d + 2 * r]);
  float l = 0.0f;
  float4 acc[kColsPerThread / 4] = {};
  for (int sp = 0; sp < splits; ++sp) {
    const float* slot = first + sp * kPartialFloats;
    const float w = exp2f(slot[B_r * d + 2 * r] - m);  // 2^(m_s - m), in (0, 1]
    l += w * slot[B_r * d + 2 * r + 1];
#pragma unroll
    for (int x = 0; x < kColsPerThread / 4; ++x) {
      const float4 o4 = reinterpret_cast<const float4*>(slot + r * d + c0)[x];
      acc[x].x += w * o4.x;
      acc[x].y += w * o4.y;
      acc[x].z += w * o4.z;
      acc[x].w += w * o4.w;
    }
  }
  const float inv_l = 1.0f / l;
  const int b = blockIdx.x / H, h = blockIdx.x % H;
  Element* o_row = out + (static_cast<size_t>(b) * T + row) * H * d + h * d + c0;
  // 16 columns: two 16-byte stores of eight 16-bit values each
#pragma unroll
  for (int x = 0; x < kColsPerThread / 8; ++x) {
    const float4 lo = acc[2 * x], hi = acc[2 * x + 1];
    reinterpret_cast<uint4*>(o_row)[x] =
        make_uint4(Ops::pack(lo.x * inv_l, lo.y * inv_l), Ops::pack(lo.z * inv_l, lo.w * inv_l),
                   Ops::pack(hi.x * inv_l, hi.y * inv_l), Ops::pack(hi.z * inv_l, hi.w * inv_l));
  }
}

template <typename Element>
cudaError_t launch_typed(const HalfArgs& a,
                         const LaunchConfig& cfg,
                         const SplitPlan& plan,
                         cudaStream_t stream) {
  auto* kernel = causal_attention_kernel<Element, kHeadDim, kTiles.B_r, kTiles.B_c>;
  // log2(e) / sqrt(d): the kernel works in powers of 2.
  const float c = 1.4426950408889634f / sqrtf(static_cast<float>(kHeadDim));
  const Strides q_stride{a.q_batch_stride, static_cast<int>(a.q_row_stride)};
  const Strides k_stride{a.k_batch_stride, static_cast<int>(a.k_row_stride)};
  const Strides v_stride{a.v_batch_stride, static_cast<int>(a.v_row_stride)};
  float* partial = static_cast<float*>(a.workspace);
  if (plan.max_splits > 1 && partial == nullptr) return cudaErrorInvalidValue;
  const int T = static_cast<int>(a.seq_len), H = static_cast<int>(a.num_heads);
  auto* out = static_cast<Element*>(a.out);
  kernel<<<cfg.grid, cfg.block, cfg.smem_bytes, stream>>>(
      static_cast<const Element*>(a.q), static_cast<const Element*>(a.k),
      static_cast<const Element*>(a.v), out, q_stride, k_stride, v_stride, T, H, c,
      plan.tiles_per_split, plan.max_splits, partial);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || plan.max_splits == 1) return err;
  const dim3 merge_grid(cfg.grid.x, plan.row_blocks);
  merge_splits<Element, kHeadDim, kTiles.B_r><<<merge_grid, kMergeThreads, 0, stream>>>(
      partial, out, T, H, plan.tiles_per_split, plan.max_splits);
  return cudaGetLastError();
}

}  // namespace

// Any row and batch stride, as long as rows stay 16-byte aligned for the 16-byte copies
// (8 elements): the glue checks the pointers and strides. 16-bit inputs (HalfArgs).
Requirements requirements() {
  return {/*strided_inputs=*/true, /*alignment_bytes=*/16, /*half_precision=*/true};
}

// The partial results of split row blocks: one slot per block of the grid (the slots of
// unsplit row blocks stay unused). Nothing when no row block is split.
size_t workspace_bytes(const HalfArgs& a) {
  DeviceLimits limits;
  if (query_limits(a.device, &limits) != cudaSuccess) return 0;  // launch() reports it
  const SplitPlan plan = plan_splits(a, limits);
  if (plan.max_splits == 1) return 0;
  return sizeof(float) * kPartialFloats * static_cast<size_t>(a.batch * a.num_heads) *
         plan.row_blocks * plan.max_splits;
}

LaunchConfig launch_config(const HalfArgs& a, const DeviceLimits& limits) {
  const Tiles t = kTiles;
  const SplitPlan plan = plan_splits(a, limits);
  return {dim3(static_cast<unsigned>(a.batch * a.num_heads), plan.row_blocks * plan.max_splits),
          dim3(kLanes, kWarps), smem_bytes(t)};
}

cudaError_t launch(const HalfArgs& a, cudaStream_t stream) {
  DeviceLimits limits;
  const cudaError_t err = query_limits(a.device, &limits);
  if (err != cudaSuccess) return err;
  const LaunchConfig cfg = launch_config(a, limits);
  if (cfg.smem_bytes > static_cast<size_t>(limits.smem_per_block))
    return cudaErrorInvalidConfiguration;  // 40 KB: within every GPU's default limit
  const SplitPlan plan = plan_splits(a, limits);
  return a.dtype == HalfType::kBFloat16 ? launch_typed<__nv_bfloat16>(a, cfg, plan, stream)
                                        : launch_typed<__half>(a, cfg, plan, stream);
}

}  // namespace causal_attention
