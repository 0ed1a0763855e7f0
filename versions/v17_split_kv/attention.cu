// Version 17: version 16 with the keys of a row block split across thread blocks when
// the grid would otherwise leave multiprocessors idle. GPT-2 at batch 1 has 12 heads
// and T / 64 row blocks: 96 blocks at T = 512 for 132 SMs, each holding two, and the
// last row block walks 8 tiles while the first walks one. Here row block i's i + 1
// tiles are cut into splits of at most L tiles (L chosen from the SM count and the
// shape, see plan_splits); each split computes a partial (O, m, l) over its keys, and
// a second small kernel merges the partials of a row block:
//   m = max_s m_s,  l = sum_s 2^(m_s - m) l_s,  O = sum_s 2^(m_s - m) O_s / l.
// A row block with a single split writes its output directly, as before.
//
// Both products run on the tensor cores as in version 16: mma.sync in TF32, each
// float32 operand x split into a TF32 high part hi = tf32(x) and the remainder
// lo = x - hi, so that x y = hi_x hi_y + hi_x lo_y + lo_x hi_y + lo_x lo_y. The last term
// is below 2^-22 |x y| and dropped; the other three are accumulated in float32, which
// keeps the result at float32 accuracy (compute capability 8.0).
//
// One thread block of 4 warps computes one split of one tile of B_r = 64 query rows of
// one (batch, head), walking over its key/value tiles K_j, V_j, double-buffered with
// cp.async. Warp w owns rows
// 16w .. 16w + 15: they are the 16 rows (m) of every mma it issues. Its lanes hold
// the operands in the layouts mma.m16n8k8 prescribes (PTX ISA, "Matrix Fragments for
// mma.m16n8k8"): with g = lane / 4 and t = lane % 4,
//   A (16 x 8, row-major):  a0 = A[g][t], a1 = A[g + 8][t], a2 = A[g][t + 4],
//                           a3 = A[g + 8][t + 4]
//   B (8 x 8, k x n):       b0 = B[t][g], b1 = B[t + 4][g]
//   C, D (16 x 8, float32): c0 = C[g][2t], c1 = C[g][2t + 1], c2 = C[g + 8][2t],
//                           c3 = C[g + 8][2t + 1]
// So lane (g, t) holds, of the warp's rows, rows g and g + 8 of S_ij and O_i: columns
// 8n + 2t and 8n + 2t + 1 of each 8-column slice n. The row statistics m (max) and
// l (sum) are reduced over the 4 lanes of a row (the same g) by shuffles.
//
// The scale 1/sqrt(d) and log2(e) are folded into Q once, so P_ij = 2^(S_ij - m).
// O is kept unnormalised, diag(l)^-1 is applied once at the end.
//
// Causal shortcuts: tiles entirely right of the diagonal are never loaded; only the
// diagonal tile is masked; row blocks start longest-first.
#include "../common/attention_launch.h"

#include <cmath>
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error \
    "version 17 needs compute capability 8.0 or newer: cp.async and TF32 mma do not exist before it"
#endif

namespace causal_attention {
namespace {

constexpr int kWarps = 4;        // blockDim.y: warps, each owning 16 rows
constexpr int kLanes = 32;       // blockDim.x
constexpr int kMmaM = 16;        // mma.m16n8k8: rows of A, C and D ...
constexpr int kMmaN = 8;         // ... columns of B, C and D ...
constexpr int kMmaK = 8;         // ... and the inner dimension
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

// K_s and V_s rows are d + 4 floats apart (272 bytes: still 16-byte aligned for the
// copies). The B fragments then read them without bank conflicts, and every lane's
// address is its own base plus an offset known at compile time:
//   K (b0 = K[8n + g][8k + t]): bank (68 g + t) % 32 = 4g + t, 32 different banks;
//   V (b0 = V[8k + 2t][8n + g], see the P.V product): bank (136 t + g) % 32 = 8t + g.
// Version 15's swizzle avoids the conflicts too, but its xor with the row makes every
// lane's offset a run-time value: two or three extra instructions per load, and the
// mma loops issue 256 loads per tile and warp.
constexpr int kPitch = kHeadDim + 4;

// Shared memory: 2 x Q 64 x 64 + 2 x (K 64 x 68 + V 64 x 68) floats = 102,400 bytes, over
// the 48 KB default: the launcher opts in to more (Hopper allows 227 KB).
size_t smem_bytes(Tiles t) {
  return sizeof(float) * (2 * static_cast<size_t>(t.B_r) * kHeadDim      // Q_i: hi, lo
                          + kStages * static_cast<size_t>(t.B_c) * kPitch  // K_j, padded
                          + kStages * static_cast<size_t>(t.B_c) * kPitch);  // V_j, padded
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Thread blocks one SM holds at once: 102,400 bytes of shared memory each allow two
// (their registers, 157 x 128 threads in the compile check, would allow three).
constexpr int kBlocksPerSm = 2;

// How the keys are split. Row block i (of T_r) has i + 1 tiles, cut into
// ceil((i + 1) / tiles_per_split) splits; the grid has max_splits = ceil(T_r /
// tiles_per_split) slots per row block, and blocks in slots a row block does not use
// return at once.
struct SplitPlan {
  int row_blocks;       // T_r
  int tiles_per_split;  // L
  int max_splits;       // splits of the longest row block
};

// The causal work, sum over row blocks of (i + 1) tiles per (batch, head), spread
// evenly over every SM's block slots would give each slot L = ceil(work / slots)
// tiles. The longest row block walks T_r tiles: when that is more than L, the row
// blocks are cut into splits of at most L tiles, so that no block runs much longer
// than the average slot's share. (At B = 1: T = 512 gives L = 2 for T_r = 8, and
// T = 2048 gives L = 24 for T_r = 32; from T = 4096, and at B = 8, L >= T_r: no split.)
SplitPlan plan_splits(const Args& a, const DeviceLimits& limits) {
  const int T_r = ceil_div(static_cast<int>(a.seq_len), kTiles.B_r);
  const int64_t heads = a.batch * a.num_heads;
  const int64_t slots = static_cast<int64_t>(limits.sm_count) * kBlocksPerSm;
  const int64_t work = heads * T_r * (T_r + 1) / 2;  // tiles left of or on the diagonal
  const int64_t L = (work + slots - 1) / slots;
  if (L >= T_r) return {T_r, T_r, 1};
  return {T_r, static_cast<int>(L), ceil_div(T_r, static_cast<int>(L))};
}

// Bytes of partial results per split slot: O (B_r x d floats) and (m, l) per row.
constexpr size_t kPartialFloats = static_cast<size_t>(kTiles.B_r) * (kHeadDim + 2);

// Where the rows of one operand are, in floats: element (b, t, c) is at
// b * batch + t * row + c. The glue checks that T * row fits in an int.
struct Strides {
  int64_t batch;
  int row;
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

// A float32 operand as the tensor cores take it: hi = x rounded to the nearest TF32
// (10 mantissa bits), lo = x - hi (exact in float32). The rounding adds half a TF32
// unit, 0x1000, to the bits and clears the 13 bits below it: round half away from
// zero, as cvt.rna.tf32.f32 does, in two integer instructions where cvt compiles to
// three (its extra one keeps infinities intact, which finite inputs do not need). The
// mma reads only the top 19 bits of lo, so lo is passed as it is: what it drops is
// below 2^-22 |x|.
struct Split {
  uint32_t hi, lo;
};

__device__ Split split_tf32(float x) {
  const uint32_t hi = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
  return {hi, __float_as_uint(x - __uint_as_float(hi))};
}

// D += A B for one m16n8k8 tile, TF32 inputs, float32 accumulators (layouts above).
__device__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// D_n += A B_n for the 8-column slices n of one k step, at float32 accuracy from split
// operands (b[n] = {b0, b1} of slice n). The three products go in three passes over the
// slices, so consecutive mma instructions write different accumulators and none waits
// for the previous one's result; in each slice the two small cross terms come first,
// then the large one.
template <int kSlices>
__device__ void mma_tf32x3(float (&d)[kSlices][4],
                           const uint32_t (&a_hi)[4],
                           const uint32_t (&a_lo)[4],
                           const Split (&b)[kSlices][2]) {
#pragma unroll
  for (int n = 0; n < kSlices; ++n) mma_tf32(d[n], a_lo, b[n][0].hi, b[n][1].hi);
#pragma unroll
  for (int n = 0; n < kSlices; ++n) mma_tf32(d[n], a_hi, b[n][0].lo, b[n][1].lo);
#pragma unroll
  for (int n = 0; n < kSlices; ++n) mma_tf32(d[n], a_hi, b[n][0].hi, b[n][1].hi);
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
// rows row_g and row_g + 8) of the tile starting at column col0: masks the scores if
// the tile crosses the diagonal (kMasked; no other tile has a masked entry), takes
// each row's max over its 4 lanes, turns s into P_ij = 2^(S_ij - m_new) in place, and
// updates m and this lane's part of l; alpha gets each row's 2^(m_old - m_new), by which
// O is rescaled. Element e of slice n sits in row g + 8 (e / 2), column 8n + 2t + e % 2.
template <bool kMasked>
__device__ void softmax_rows(float (&s)[kSlicesS][4],
                             int row_g,
                             int col0,
                             int T,
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
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // Every row of a tile left of or on the diagonal has an unmasked entry (its own
    // column, or for rows past T column 0), so m_new is finite.
    const float m_new = fmaxf(m[h], row_max(m_tilde[h]));
    alpha[h] = exp2f(m[h] - m_new);  // rescales the old O and l; 0 on the first tile
    m[h] = m_new;
    l[h] *= alpha[h];
  }
#pragma unroll
  for (int n = 0; n < kSlicesS; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = exp2f(s[n][e] - m[e / 2]);  // 2^-inf = 0 for masked entries
      l[e / 2] += s[n][e];
    }
}

// __launch_bounds__ caps registers so that a block of this size can always launch.
template <int d, int B_r, int B_c>
__global__ void __launch_bounds__(kLanes * kWarps) causal_attention_kernel(
    const float* __restrict__ q,
    const float* __restrict__ k,
    const float* __restrict__ v,
    float* __restrict__ out,
    Strides q_stride,
    Strides k_stride,
    Strides v_stride,
    int T,
    int H,
    float q_scale,
    int tiles_per_split,
    int max_splits,
    float* __restrict__ partial) {
  extern __shared__ __align__(16) float smem[];
  constexpr int kThreads = kLanes * kWarps;
  constexpr int kVecPerRow = d / 4;  // float4s in a row of Q, K or V
  static_assert(d % 4 == 0, "rows of d floats are copied as 16-byte chunks");
  float* Q_s = smem;                 // [B_r][d], then the high parts of Q's fragments
  float* Q_lo_s = Q_s + B_r * d;     // [B_r][d]: the low parts of Q's fragments
  float* K_buf = Q_lo_s + B_r * d;   // [kStages][B_c][kPitch]
  float* V_buf = K_buf + kStages * B_c * kPitch;  // [kStages][B_c][kPitch]

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

  const float* q_bh = q + b * q_stride.batch + h * d;
  const float* k_bh = k + b * k_stride.batch + h * d;
  const float* v_bh = v + b * v_stride.batch + h * d;
  float* o_bh = out + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * d;  // contiguous

  const int row0 = i * B_r;
  const int rows = min(B_r, T - row0);  // the last tile may be partial

  // Load Q_i, a float4 per thread and step; rows past T are zero, so their scores are
  // finite (they are never stored).
  for (int idx = tid; idx < B_r * kVecPerRow; idx += kThreads) {
    const int r = idx / kVecPerRow, x4 = idx % kVecPerRow;
    reinterpret_cast<float4*>(Q_s + r * d)[x4] =
        r < rows ? reinterpret_cast<const float4*>(q_bh + (row0 + r) * q_stride.row)[x4]
                 : make_float4(0.f, 0.f, 0.f, 0.f);
  }

  // Starts the copy of K_j, V_j into buffer j % kStages, a 16-byte chunk per thread
  // and step; rows past T are zero-filled.
  auto load_tile = [&](int j) {
    const int col0 = j * B_c;
    const int cols = min(B_c, T - col0);
    float* K_s = K_buf + (j % kStages) * B_c * kPitch;
    float* V_s = V_buf + (j % kStages) * B_c * kPitch;
    for (int idx = tid; idx < B_c * kVecPerRow; idx += kThreads) {
      const int kv = idx / kVecPerRow, x4 = idx % kVecPerRow;
      const int src_row = col0 + min(kv, cols - 1);  // a valid address even when not read
      const int bytes = kv < cols ? 16 : 0;
      copy_async_16(K_s + kv * kPitch + 4 * x4, k_bh + src_row * k_stride.row + 4 * x4, bytes);
      copy_async_16(V_s + kv * kPitch + 4 * x4, v_bh + src_row * v_stride.row + 4 * x4, bytes);
    }
    copy_async_commit();
  };

  load_tile(j_begin);
  // Guards Q_s: every thread's rows of Q_i are stored before the warps read their A
  // fragments.
  __syncthreads();

  // This warp's rows of Q_i, times scale * log2(e), as the A fragments of the 8 k steps
  // of Q K^T, split once for the whole kernel: lane (g, t) holds rows g and g + 8,
  // columns 8k + t and 8k + t + 4. They go back into shared memory in fragment order,
  // the high parts over the warp's own 16 rows of Q_s, the low parts into the same
  // place of Q_lo_s: lane l's 4 values of step k are float4 k * 32 + l, so one 16-byte
  // load fetches a fragment. (Held in registers for the whole kernel they would take 64
  // of them, and the compiler would spill.)
  float* Q_w = Q_s + kMmaM * warp * d;
  float* Q_lo_w = Q_lo_s + kMmaM * warp * d;
  float4 hi_frag[kStepsQK], lo_frag[kStepsQK];
#pragma unroll
  for (int kq = 0; kq < kStepsQK; ++kq) {
    const float a[4] = {Q_w[g * d + kMmaK * kq + t], Q_w[(g + 8) * d + kMmaK * kq + t],
                        Q_w[g * d + kMmaK * kq + t + 4], Q_w[(g + 8) * d + kMmaK * kq + t + 4]};
    Split x[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) x[e] = split_tf32(a[e] * q_scale);
    hi_frag[kq] = make_float4(__uint_as_float(x[0].hi), __uint_as_float(x[1].hi),
                              __uint_as_float(x[2].hi), __uint_as_float(x[3].hi));
    lo_frag[kq] = make_float4(__uint_as_float(x[0].lo), __uint_as_float(x[1].lo),
                              __uint_as_float(x[2].lo), __uint_as_float(x[3].lo));
  }
  // Guards the warp's rows of Q_s: all its lanes have read them before they are
  // overwritten (only this warp reads or writes them).
  __syncwarp();
#pragma unroll
  for (int kq = 0; kq < kStepsQK; ++kq) {
    reinterpret_cast<float4*>(Q_w)[kq * kLanes + lane] = hi_frag[kq];
    reinterpret_cast<float4*>(Q_lo_w)[kq * kLanes + lane] = lo_frag[kq];
  }
  // (The fragments are read back by the lanes that wrote them, after the block
  // barrier at the top of the first tile.)

  // This lane's rows (g and g + 8 of the warp), their statistics (m equal across the
  // row's 4 lanes, l this lane's part) and its part of O_i, in C-fragment layout.
  const int row_g = row0 + kMmaM * warp + g;
  float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.0f, 0.0f};
  float o[kSlicesO][4] = {};

  for (int j = j_begin; j < j_end; ++j) {
    const int col0 = j * B_c;
    const float* K_s = K_buf + (j % kStages) * B_c * kPitch;
    const float* V_s = V_buf + (j % kStages) * B_c * kPitch;

    copy_async_wait_all();  // this thread's copies of tile j have landed
    // Guards K_s, V_s and the other buffer: everyone's copies of tile j are visible,
    // and every warp is done with tile j - 1, whose buffer the copy started next
    // overwrites.
    __syncthreads();
    if (j + 1 < j_end) load_tile(j + 1);  // runs while tile j is computed

    // S_ij = Q_i K_j^T (already scaled): for each k step, the B fragment of every
    // 8-key slice n is b0 = K[8n + g][8k + t], b1 = K[8n + g][8k + t + 4] (B = K^T),
    // and the 8 slices accumulate independently.
    float s[kSlicesS][4] = {};
#pragma unroll
    for (int kq = 0; kq < kStepsQK; ++kq) {
      const float4 hi4 = reinterpret_cast<const float4*>(Q_w)[kq * kLanes + lane];
      const float4 lo4 = reinterpret_cast<const float4*>(Q_lo_w)[kq * kLanes + lane];
      const uint32_t q_hi[4] = {__float_as_uint(hi4.x), __float_as_uint(hi4.y),
                                __float_as_uint(hi4.z), __float_as_uint(hi4.w)};
      const uint32_t q_lo[4] = {__float_as_uint(lo4.x), __float_as_uint(lo4.y),
                                __float_as_uint(lo4.z), __float_as_uint(lo4.w)};
      Split b[kSlicesS][2];
#pragma unroll
      for (int n = 0; n < kSlicesS; ++n) {
        const float* K_nk = K_s + (kMmaN * n + g) * kPitch + kMmaK * kq + t;
        b[n][0] = split_tf32(K_nk[0]);
        b[n][1] = split_tf32(K_nk[4]);
      }
      mma_tf32x3(s, q_hi, q_lo, b);
    }

    // Online softmax, in registers. Tile i holds the diagonal (and T's end); every
    // earlier tile is unmasked.
    float alpha[2];
    if (j == i)
      softmax_rows<true>(s, row_g, col0, T, m_i, l_i, alpha);
    else
      softmax_rows<false>(s, row_g, col0, T, m_i, l_i, alpha);

    // O_i += P_ij V_j. The A fragment of k step k (keys 8k .. 8k + 7) comes straight
    // from the C fragment of S slice k, with the keys inside the step renumbered so
    // no lane needs another's value: logical column t is key 2t and t + 4 is key
    // 2t + 1, so a0, a1, a2, a3 = c0, c2, c1, c3. B must use the same order:
    // b0 = V[8k + 2t][8n + g], b1 = V[8k + 2t + 1][8n + g]. The sum over the keys of
    // the step is unchanged. P is 0 past the last key, and V's rows there are zero.
    //
    // The tile's product accumulates from zero and joins O in one rounded FFMA per
    // element, O = 2^(m_old - m_new) O + P_ij V_j. The tensor cores' float32 accumulation
    // does not round to nearest: carried through all of a long row's mma instructions
    // (6,144 of them at T = 16384) its error drifts one way, and the output missed the
    // 1e-5 relative tolerance (2.8e-5 at T = 16385); per tile it is 24 instructions.
    float pv[kSlicesO][4] = {};
#pragma unroll
    for (int kp = 0; kp < kStepsPV; ++kp) {
      uint32_t p_hi[4], p_lo[4];
      const float a[4] = {s[kp][0], s[kp][2], s[kp][1], s[kp][3]};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const Split x = split_tf32(a[e]);
        p_hi[e] = x.hi;
        p_lo[e] = x.lo;
      }
      Split b[kSlicesO][2];
#pragma unroll
      for (int n = 0; n < kSlicesO; ++n) {
        const float* V_kn = V_s + (kMmaK * kp + 2 * t) * kPitch + kMmaN * n + g;
        b[n][0] = split_tf32(V_kn[0]);       // key 8k + 2t
        b[n][1] = split_tf32(V_kn[kPitch]);  // key 8k + 2t + 1
      }
      mma_tf32x3(pv, p_hi, p_lo, b);
    }
#pragma unroll
    for (int n = 0; n < kSlicesO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] = fmaf(o[n][e], alpha[e / 2], pv[n][e]);
  }

  if (splits == 1) {
    // O_i = diag(l)^-1 O_i, straight from registers to global memory: lane (g, t)
    // stores columns 8n + 2t, 8n + 2t + 1 of rows g and g + 8, a float2 each.
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float inv_l = 1.0f / row_sum(l_i[hh]);  // all lanes: the shuffles need them
      const int row = row_g + 8 * hh;
      if (row >= row0 + rows) continue;
      float* o_row = o_bh + static_cast<size_t>(row) * C;
#pragma unroll
      for (int n = 0; n < kSlicesO; ++n)
        *reinterpret_cast<float2*>(o_row + kMmaN * n + 2 * t) =
            make_float2(o[n][2 * hh] * inv_l, o[n][2 * hh + 1] * inv_l);
    }
    return;
  }
  // A partial result for merge_splits: unnormalised O, then (m, l) per row, in this
  // split's slot of the workspace (rows past T included: the merge skips them).
  float* slot =
      partial + ((static_cast<size_t>(blockIdx.x) * gridDim.y + blockIdx.y) * kPartialFloats);
  float* stats = slot + B_r * d;  // [B_r][2]: m, l
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const float l = row_sum(l_i[hh]);  // all lanes: the shuffles need them
    const int r = kMmaM * warp + g + 8 * hh;  // row within the tile
#pragma unroll
    for (int n = 0; n < kSlicesO; ++n)
      *reinterpret_cast<float2*>(slot + r * d + kMmaN * n + 2 * t) =
          make_float2(o[n][2 * hh], o[n][2 * hh + 1]);
    if (t == 0) *reinterpret_cast<float2*>(stats + 2 * r) = make_float2(m_i[hh], l);
  }
}

constexpr int kMergeThreads = 256;  // 4 per row of a 64-row tile, 16 columns each

// Merges the partial results of every row block that was split; one thread block per
// (batch, head) and row block (grid (B H, T_r), the same order as the kernel's), and
// thread (r, quarter) combines row r's columns 16 quarter .. 16 quarter + 15 over the
// row block's splits.
template <int d, int B_r>
__global__ void __launch_bounds__(kMergeThreads) merge_splits(
    const float* __restrict__ partial,
    float* __restrict__ out,
    int T,
    int H,
    int tiles_per_split,
    int max_splits) {
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
  float* o_row = out + (static_cast<size_t>(b) * T + row) * H * d + h * d + c0;
#pragma unroll
  for (int x = 0; x < kColsPerThread / 4; ++x)
    reinterpret_cast<float4*>(o_row)[x] =
        make_float4(acc[x].x * inv_l, acc[x].y * inv_l, acc[x].z * inv_l, acc[x].w * inv_l);
}

}  // namespace

// Any row and batch stride, as long as rows stay 16-byte aligned for the 16-byte
// copies: the glue checks the pointers and strides.
Requirements requirements() { return {/*strided_inputs=*/true, /*alignment_bytes=*/16}; }

// The partial results of split row blocks: one slot per block of the grid (the slots
// of unsplit row blocks stay unused). Nothing when no row block is split.
size_t workspace_bytes(const Args& a) {
  DeviceLimits limits;
  if (query_limits(a.device, &limits) != cudaSuccess) return 0;  // launch() reports it
  const SplitPlan plan = plan_splits(a, limits);
  if (plan.max_splits == 1) return 0;
  return sizeof(float) * kPartialFloats * static_cast<size_t>(a.batch * a.num_heads) *
         plan.row_blocks * plan.max_splits;
}

LaunchConfig launch_config(const Args& a, const DeviceLimits& limits) {
  const Tiles t = kTiles;
  const SplitPlan plan = plan_splits(a, limits);
  return {dim3(static_cast<unsigned>(a.batch * a.num_heads), plan.row_blocks * plan.max_splits),
          dim3(kLanes, kWarps), smem_bytes(t)};
}

cudaError_t launch(const Args& a, cudaStream_t stream) {
  DeviceLimits limits;
  cudaError_t err = query_limits(a.device, &limits);
  if (err != cudaSuccess) return err;
  const LaunchConfig cfg = launch_config(a, limits);
  // More than the default 48 KB per block needs the device's opt-in limit and an
  // explicit opt-in for this kernel.
  if (cfg.smem_bytes > static_cast<size_t>(limits.smem_per_block_optin))
    return cudaErrorInvalidConfiguration;
  auto* kernel = causal_attention_kernel<kHeadDim, kTiles.B_r, kTiles.B_c>;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(cfg.smem_bytes));
  if (err != cudaSuccess) return err;
  // 1/sqrt(d) and log2(e), folded into Q: the kernel works in powers of 2.
  const float q_scale = 1.4426950408889634f / sqrtf(static_cast<float>(kHeadDim));
  const Strides q_stride{a.q_batch_stride, static_cast<int>(a.q_row_stride)};
  const Strides k_stride{a.k_batch_stride, static_cast<int>(a.k_row_stride)};
  const Strides v_stride{a.v_batch_stride, static_cast<int>(a.v_row_stride)};
  const SplitPlan plan = plan_splits(a, limits);
  float* partial = static_cast<float*>(a.workspace);
  if (plan.max_splits > 1 && partial == nullptr) return cudaErrorInvalidValue;
  const int T = static_cast<int>(a.seq_len), H = static_cast<int>(a.num_heads);
  kernel<<<cfg.grid, cfg.block, cfg.smem_bytes, stream>>>(
      a.q, a.k, a.v, a.out, q_stride, k_stride, v_stride, T, H, q_scale, plan.tiles_per_split,
      plan.max_splits, partial);
  err = cudaGetLastError();
  if (err != cudaSuccess || plan.max_splits == 1) return err;
  const dim3 merge_grid(cfg.grid.x, plan.row_blocks);
  merge_splits<kHeadDim, kTiles.B_r><<<merge_grid, kMergeThreads, 0, stream>>>(
      partial, a.out, T, H, plan.tiles_per_split, plan.max_splits);
  return cudaGetLastError();
}

}  // namespace causal_attention
