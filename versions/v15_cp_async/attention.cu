// Version 15: version 14 with K_j and V_j double-buffered and loaded with cp.async
// (compute capability 8.0): the copy of tile j + 1 runs while tile j is computed, the
// loads no longer pass through registers, and one block barrier per tile is left.
//
// One thread block of 4 warps computes one tile of B_r = 64 query rows of one
// (batch, head): Q_i stays in shared memory while the block walks over the key/value
// tiles K_j, V_j (j < T_c) left of the diagonal. Warp w owns rows 16w .. 16w + 15. Its
// lanes form four groups of eight (g = lane / 8, c = lane % 8); lane (g, c) owns rows
// 16w + g + 4a (a = 0..3) and, of those rows, columns c + 8k (k = 0..7) of S_ij and
// the float4 columns 4c .. 4c + 3 and 32 + 4c .. 32 + 4c + 3 of O_i. The P.V product
// needs a row's P_ij entries from all eight lanes of its group: each arrives by a
// shuffle from the lane that computed it. The row sum l is kept per lane and reduced
// across the group once, at the end.
//
// O is kept unnormalised, diag(l)^-1 is applied once at the end, and rows are rescaled
// by e^(m_old - m_new) when their maximum grows.
//
// Causal shortcuts: tiles entirely right of the diagonal are never loaded; only the
// diagonal tile is masked; row blocks start longest-first.
#include "../common/attention_launch.h"

#include <cmath>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "version 15 needs compute capability 8.0 or newer: cp.async does not exist before it"
#endif

namespace causal_attention {
namespace {

constexpr int kWarps = 4;           // blockDim.y: warps, each owning 16 rows
constexpr int kLanes = 32;          // blockDim.x
constexpr int kGroupLanes = 8;      // lanes sharing a row: a row's statistics are
                                // reduced over them, its P_ij shuffled between them
constexpr int kRowsPerThread = 4;  // rows g + 4a of the warp's 16
constexpr int kColsPerThread = 8;  // columns c + 8k of S_ij
constexpr int kRowsPerWarp = kRowsPerThread * (kLanes / kGroupLanes);

struct Tiles {
  int B_r;  // query rows per tile
  int B_c;  // key/value rows per tile
};

constexpr Tiles kTiles = {/*B_r=*/kRowsPerWarp * kWarps,
                          /*B_c=*/kColsPerThread * kGroupLanes};
static_assert(kTiles.B_r == 64 && kTiles.B_c == 64, "four warps of 16 rows, 64 key columns");
static_assert(kHeadDim == 8 * kGroupLanes,
              "lane c owns the float4 columns 4c and 32 + 4c of O: eight per lane, d = 64");

constexpr int kStages = 2;  // K/V buffers: tile j + 1 loads into one while j is read

// Shared memory: Q 64 x 64 + 2 x (K 64 x 64 + V 64 x 64) floats = 81,920 bytes, over the
// 48 KB default: the launcher opts in to more (Hopper allows 227 KB).
size_t smem_bytes(Tiles t) {
  return sizeof(float) * (static_cast<size_t>(t.B_r) * kHeadDim  // Q_i
                          + kStages * static_cast<size_t>(t.B_c) * kHeadDim  // K_j, swizzled
                          + kStages * static_cast<size_t>(t.B_c) * kHeadDim);  // V_j
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Where the rows of one operand are, in floats: element (b, t, c) is at
// b * batch + t * row + c. The glue checks that T * row fits in an int.
struct Strides {
  int64_t batch;
  int row;
};

// K_s holds row c's 16-byte chunk x4 (floats 4 x4 .. 4 x4 + 3) at chunk x4 ^ (c % 8).
// In S = Q K^T a quarter-warp (the 8 lanes of a group, one 128-byte shared-memory
// wavefront) reads the same chunk of rows c + 8k for c = 0..7: unswizzled, rows 64
// floats apart all start in bank 0, an 8-way conflict; swizzled, the 8 chunks land in
// the 8 different groups of 4 banks.
__device__ int swizzle(int row, int x4) { return x4 ^ (row % 8); }

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

// Butterfly max over the 8 lanes of a group; every lane gets its group's result.
__device__ float group_max(float value) {
  for (int offset = kGroupLanes / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset, kGroupLanes));
  return value;
}

__device__ float group_sum(float value) {
  for (int offset = kGroupLanes / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset, kGroupLanes);
  return value;
}

// One row of the online softmax for the tile starting at column col0: scales this
// lane's scores s of row `row` (columns col0 + c + 8k), masks them if the tile crosses
// the diagonal (kMasked; no other tile has a masked entry), takes the row max over the
// group, turns s into P_ij = exp(S_ij - m_new) in place, and updates the row's max m,
// this lane's part of the row sum l and its part of O (rescaled by e^(m_old - m_new)).
template <bool kMasked>
__device__ void softmax_row(
    float (&s)[kColsPerThread], int row, int col0, int T, float scale, float& m, float& l, float (&o)[8]) {
  const int c = threadIdx.x % kGroupLanes;
  float m_tilde = -INFINITY;
#pragma unroll
  for (int k = 0; k < kColsPerThread; ++k) {
    const int col = col0 + c + kGroupLanes * k;
    s[k] = !kMasked || (col <= row && col < T) ? s[k] * scale : -INFINITY;
    m_tilde = fmaxf(m_tilde, s[k]);
  }
  // Every row of a tile left of or on the diagonal has an unmasked entry (its own
  // column, or for rows past T column 0), so m_new is finite.
  const float m_new = fmaxf(m, group_max(m_tilde));
  const float alpha = expf(m - m_new);  // rescales the old O and l; 0 on the first tile
  l *= alpha;
#pragma unroll
  for (int k = 0; k < kColsPerThread; ++k) {
    s[k] = expf(s[k] - m_new);  // exp(-inf) = 0 for masked entries
    l += s[k];
  }
  m = m_new;
#pragma unroll
  for (int n = 0; n < 8; ++n) o[n] *= alpha;
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
    float scale) {
  extern __shared__ __align__(16) float smem[];
  constexpr int kThreads = kLanes * kWarps;
  constexpr int kVecPerRow = d / 4;  // float4s in a row of Q, K or V
  static_assert(d % 4 == 0, "rows of d floats are read as float4");
  static_assert(kVecPerRow == 16, "the swizzle permutes 16 chunks per row by xor with 0..7");
  float* Q_s = smem;  // [B_r][d]
  float* K_buf = Q_s + B_r * d;  // [kStages][B_c][d], chunks swizzled
  float* V_buf = K_buf + kStages * B_c * d;  // [kStages][B_c][d]

  const int C = H * d;
  const int b = blockIdx.x / H;
  const int h = blockIdx.x % H;
  const int i = gridDim.y - 1 - blockIdx.y;  // query tile: the longest first
  const int lane = threadIdx.x, warp = threadIdx.y;
  const int tid = warp * kLanes + lane;
  const int g = lane / kGroupLanes, c = lane % kGroupLanes;

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

  // This lane's rows, their statistics (m equal across the group, l this lane's part)
  // and its part of O_i: o[a][0..3] are columns 4c .. 4c + 3 of row r[a], o[a][4..7]
  // columns 32 + 4c .. 32 + 4c + 3. Arrays indexed only by unrolled loops stay in
  // registers.
  int r[kRowsPerThread];
  float m_i[kRowsPerThread], l_i[kRowsPerThread];
  float o[kRowsPerThread][8];
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) {
    r[a] = kRowsPerWarp * warp + g + 4 * a;
    m_i[a] = -INFINITY;
    l_i[a] = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; ++n) o[a][n] = 0.0f;
  }

  // Starts the copy of K_j, V_j into buffer j % kStages, a 16-byte chunk per thread
  // and step; rows past T are zero-filled.
  auto load_tile = [&](int j) {
    const int col0 = j * B_c;
    const int cols = min(B_c, T - col0);
    float* K_s = K_buf + (j % kStages) * B_c * d;
    float* V_s = V_buf + (j % kStages) * B_c * d;
    for (int idx = tid; idx < B_c * kVecPerRow; idx += kThreads) {
      const int kv = idx / kVecPerRow, x4 = idx % kVecPerRow;
      const int src_row = col0 + min(kv, cols - 1);  // a valid address even when not read
      const int bytes = kv < cols ? 16 : 0;
      copy_async_16(K_s + kv * d + 4 * swizzle(kv, x4), k_bh + src_row * k_stride.row + 4 * x4,
                    bytes);
      copy_async_16(V_s + kv * d + 4 * x4, v_bh + src_row * v_stride.row + 4 * x4, bytes);
    }
    copy_async_commit();
  };

  // Causal shortcut: the last tile any row of Q_i needs is the one holding its last row.
  const int T_c = (row0 + rows - 1) / B_c + 1;
  load_tile(0);
  for (int j = 0; j < T_c; ++j) {
    const int col0 = j * B_c;
    const float* K_s = K_buf + (j % kStages) * B_c * d;
    const float* V_s = V_buf + (j % kStages) * B_c * d;

    copy_async_wait_all();  // this thread's copies of tile j have landed
    // Guards K_s, V_s and the other buffer: everyone's copies of tile j are visible
    // (and on j = 0, Q_i), and every warp is done with tile j - 1, whose buffer the
    // copy started next overwrites.
    __syncthreads();
    if (j + 1 < T_c) load_tile(j + 1);  // runs while tile j is computed

    // S_ij = scale * Q_i K_j^T for this lane's 4 rows x 8 columns, four steps of d at a
    // time: each float4 of Q feeds eight columns and each float4 of K four rows.
    float s[kRowsPerThread][kColsPerThread] = {};
#pragma unroll
    for (int x4 = 0; x4 < kVecPerRow; ++x4) {
      float4 q4[kRowsPerThread], k4[kColsPerThread];
#pragma unroll
      for (int a = 0; a < kRowsPerThread; ++a)
        q4[a] = reinterpret_cast<const float4*>(Q_s + r[a] * d)[x4];
#pragma unroll
      for (int n = 0; n < kColsPerThread; ++n) {
        const int col = c + kGroupLanes * n;
        k4[n] = reinterpret_cast<const float4*>(K_s + col * d)[swizzle(col, x4)];
      }
#pragma unroll
      for (int a = 0; a < kRowsPerThread; ++a)
#pragma unroll
        for (int n = 0; n < kColsPerThread; ++n) {
          s[a][n] += q4[a].x * k4[n].x;  // one fused multiply-add each
          s[a][n] += q4[a].y * k4[n].y;
          s[a][n] += q4[a].z * k4[n].z;
          s[a][n] += q4[a].w * k4[n].w;
        }
    }

    // Online softmax per row, in registers. Tile T_c - 1 holds the diagonal (and T's
    // end); every earlier tile is unmasked.
    const bool diagonal = j == T_c - 1;
#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a) {
      if (diagonal)
        softmax_row<true>(s[a], row0 + r[a], col0, T, scale, m_i[a], l_i[a], o[a]);
      else
        softmax_row<false>(s[a], row0 + r[a], col0, T, scale, m_i[a], l_i[a], o[a]);
    }

    // O_i += P_ij V_j. Key column kk = 8n + cc of row r[a] lives in lane cc of this
    // lane's group, as s[a][n]: a width-8 shuffle hands it to the whole group, and each
    // value then meets the eight V entries of this lane's columns. P is 0 past the last
    // key, and V's rows there are zero.
#pragma unroll
    for (int n = 0; n < kColsPerThread; ++n) {
#pragma unroll
      for (int cc = 0; cc < kGroupLanes; ++cc) {
        const int kk = kGroupLanes * n + cc;
        const float4 v_lo = reinterpret_cast<const float4*>(V_s + kk * d)[c];
        const float4 v_hi = reinterpret_cast<const float4*>(V_s + kk * d)[c + kGroupLanes];
#pragma unroll
        for (int a = 0; a < kRowsPerThread; ++a) {
          const float p = __shfl_sync(0xffffffffu, s[a][n], cc, kGroupLanes);
          o[a][0] += p * v_lo.x;
          o[a][1] += p * v_lo.y;
          o[a][2] += p * v_lo.z;
          o[a][3] += p * v_lo.w;
          o[a][4] += p * v_hi.x;
          o[a][5] += p * v_hi.y;
          o[a][6] += p * v_hi.z;
          o[a][7] += p * v_hi.w;
        }
      }
    }
  }

  // O_i = diag(l)^-1 O_i, straight from registers to global memory: lane c stores the
  // float4s of columns 4c and 32 + 4c, a group a whole 256-byte row.
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) {
    const float inv_l = 1.0f / group_sum(l_i[a]);  // all lanes: the shuffles need them
    if (r[a] >= rows) continue;
    float4* o_row = reinterpret_cast<float4*>(o_bh + (row0 + r[a]) * C);
    o_row[c] = make_float4(o[a][0] * inv_l, o[a][1] * inv_l, o[a][2] * inv_l, o[a][3] * inv_l);
    o_row[c + kGroupLanes] =
        make_float4(o[a][4] * inv_l, o[a][5] * inv_l, o[a][6] * inv_l, o[a][7] * inv_l);
  }
}

}  // namespace

// Any row and batch stride, as long as rows stay 16-byte aligned for the float4 loads:
// the glue checks the pointers and strides.
Requirements requirements() { return {/*strided_inputs=*/true, /*alignment_bytes=*/16}; }

size_t workspace_bytes(const Args&) { return 0; }  // m and l live in registers

LaunchConfig launch_config(const Args& a, const DeviceLimits&) {
  const Tiles t = kTiles;
  const int T = static_cast<int>(a.seq_len);
  return {dim3(static_cast<unsigned>(a.batch * a.num_heads), ceil_div(T, t.B_r)),
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
  const float scale = 1.0f / sqrtf(static_cast<float>(kHeadDim));
  const Strides q_stride{a.q_batch_stride, static_cast<int>(a.q_row_stride)};
  const Strides k_stride{a.k_batch_stride, static_cast<int>(a.k_row_stride)};
  const Strides v_stride{a.v_batch_stride, static_cast<int>(a.v_row_stride)};
  kernel<<<cfg.grid, cfg.block, cfg.smem_bytes, stream>>>(a.q, a.k, a.v, a.out, q_stride, k_stride,
                                                          v_stride, static_cast<int>(a.seq_len),
                                                          static_cast<int>(a.num_heads), scale);
  return cudaGetLastError();
}

}  // namespace causal_attention
