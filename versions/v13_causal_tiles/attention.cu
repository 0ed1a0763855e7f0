// Version 13: version 12 with two causal refinements. Only the tile that crosses the
// diagonal applies the mask: every earlier tile lies wholly below it, so its scores
// need no compare. And the row blocks start longest-first: block i walks i + 1 tiles,
// so the blocks of the last row tiles are launched first and the short ones fill the
// gaps at the end instead of leaving a long block running alone.
//
// One thread block computes one tile of B_r = 64 query rows of one (batch, head): Q_i
// stays in shared memory while the block walks over the key/value tiles K_j, V_j
// (j < T_c) left of the diagonal. Thread (x, y) owns rows y + 16a (a = 0..3) of the
// tile for the whole kernel: columns x + 16b (b = 0..3) of each S_ij, and columns
// 4x .. 4x + 3 of O_i, which it accumulates in registers. A row therefore belongs to
// one half-warp (the 16 lanes with the same y): its statistics m (row max) and l (row
// sum of exponentials) are reduced across those lanes with shuffles, and the row's
// P_ij = exp(S_ij - m) passes between them through shared memory, computed once per
// element by the lane that owns it.
//
// O is kept unnormalised, diag(l)^-1 is applied once at the end, and rows are rescaled
// by e^(m_old - m_new) when their maximum grows.
//
// Causal shortcuts: tiles entirely right of the diagonal are never loaded; masked
// entries of the diagonal tile get P = 0.
#include "../common/attention_launch.h"

#include <cmath>

namespace causal_attention {
namespace {

constexpr int kThreadsX = 16;  // blockDim.x: lanes of a half-warp, across the columns
constexpr int kThreadsY = 16;  // blockDim.y: half-warps, down the rows
constexpr int kRowsPerThread = 4;  // the register tile: rows y + 16a ...
constexpr int kColsPerThread = 4;  // ... and columns x + 16b of S_ij; O columns 4x .. 4x + 3
static_assert(kThreadsX == 16,
              "each row of S is handled by a half-warp: its statistics are reduced with shuffles "
              "over 16 lanes");

struct Tiles {
  int B_r;  // query rows per tile
  int B_c;  // key/value rows per tile
};

constexpr Tiles kTiles = {/*B_r=*/kRowsPerThread * kThreadsY,
                          /*B_c=*/kColsPerThread * kThreadsX};
static_assert(kTiles.B_r == 64 && kTiles.B_c == 64, "the register tiles cover a 64 x 64 tile");
static_assert(kHeadDim == 4 * kThreadsX,
              "lane x owns columns 4x .. 4x + 3 of O (a float4), so d = 4 * 16");

// P_ij rows are B_c + 16 floats apart: the two half-warps of a warp own neighbouring
// rows, and 16 floats (half the banks) of padding put their stores in different banks
// and their float4 loads in different 16-byte bank groups.
constexpr int kPPitch = kTiles.B_c + 16;

// Shared memory: Q 64 x 64 + K 64 x 64 + V 64 x 64 + P 64 x 80 floats = 69,632 bytes,
// over the 48 KB default: the launcher opts in to more (Hopper allows 227 KB).
size_t smem_bytes(Tiles t) {
  return sizeof(float) * (static_cast<size_t>(t.B_r) * kHeadDim          // Q_i
                          + static_cast<size_t>(t.B_c) * kHeadDim        // K_j, swizzled
                          + static_cast<size_t>(t.B_c) * kHeadDim        // V_j
                          + static_cast<size_t>(t.B_r) * kPPitch);       // P_ij, padded
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Where the rows of one operand are, in floats: element (b, t, c) is at
// b * batch + t * row + c. The glue checks that T * row fits in an int.
struct Strides {
  int64_t batch;
  int row;
};

// K_s holds row c's 16-byte chunk x4 (floats 4 x4 .. 4 x4 + 3) at chunk x4 ^ (c % 8).
// In S = Q K^T a quarter-warp (8 lanes, one 128-byte shared-memory wavefront) reads
// the same chunk of rows c = x + 16b for x = 0..7: unswizzled, rows 64 floats apart
// all start in bank 0, an 8-way conflict; swizzled, the 8 chunks land in the 8
// different groups of 4 banks. Unlike padding, it keeps every row 16-byte aligned and
// costs no memory.
__device__ int swizzle(int row, int x4) { return x4 ^ (row % 8); }

// Butterfly reductions over the 16 lanes of a half-warp (xor offsets below 16 stay in
// the half); every lane gets its half's result. All 32 lanes of the warp must call them.
__device__ float row_max(float value) {
  for (int offset = kThreadsX / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

__device__ float row_sum(float value) {
  for (int offset = kThreadsX / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// One row of the online softmax for the tile starting at column col0: scales this
// lane's scores s of row `row` (columns col0 + x + 16c), masks them if the tile crosses
// the diagonal (kMasked; no other tile has a masked entry), takes the row max over
// the half-warp, stores P_ij = exp(S_ij - m_new) once per element in P_row, and updates
// the row's statistics m, l and rescales its part of O by e^(m_old - m_new).
template <bool kMasked>
__device__ void softmax_row(float (&s)[kColsPerThread],
                            int row,
                            int col0,
                            int T,
                            float scale,
                            float& m,
                            float& l,
                            float4& o,
                            float* P_row) {
  const int tx = threadIdx.x;
  float m_tilde = -INFINITY;
#pragma unroll
  for (int c = 0; c < kColsPerThread; ++c) {
    const int col = col0 + tx + kThreadsX * c;
    s[c] = !kMasked || (col <= row && col < T) ? s[c] * scale : -INFINITY;
    m_tilde = fmaxf(m_tilde, s[c]);
  }
  // Every row of a tile left of or on the diagonal has an unmasked entry (its own
  // column, or for rows past T column 0), so m_new is finite.
  const float m_new = fmaxf(m, row_max(m_tilde));
  float p_sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kColsPerThread; ++c) {
    const float p = expf(s[c] - m_new);  // exp(-inf) = 0 for masked entries
    P_row[tx + kThreadsX * c] = p;
    p_sum += p;
  }
  const float alpha = expf(m - m_new);  // rescales the old O and l; 0 on the first tile
  l = alpha * l + row_sum(p_sum);
  m = m_new;
  o.x *= alpha;
  o.y *= alpha;
  o.z *= alpha;
  o.w *= alpha;
}

// __launch_bounds__ caps registers so that a block of this size can always launch.
template <int d, int B_r, int B_c>
__global__ void __launch_bounds__(kThreadsX * kThreadsY) causal_attention_kernel(
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
  constexpr int kThreads = kThreadsX * kThreadsY;
  constexpr int kVecPerRow = d / 4;  // float4s in a row of Q, K or V
  static_assert(d % 4 == 0, "rows of d floats are read as float4");
  static_assert(kVecPerRow == 16, "the swizzle permutes 16 chunks per row by xor with 0..7");
  float* Q_s = smem;                 // [B_r][d]
  float* K_s = Q_s + B_r * d;        // [B_c][d], chunks swizzled
  float* V_s = K_s + B_c * d;        // [B_c][d]
  float* P_s = V_s + B_c * d;        // [B_r][kPPitch]

  const int C = H * d;
  const int b = blockIdx.x / H;
  const int h = blockIdx.x % H;
  const int i = gridDim.y - 1 - blockIdx.y;  // query tile: the longest first
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * kThreadsX + tx;

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

  // This thread's rows, their statistics (equal in its 16 lanes) and its part of O_i:
  // columns 4 tx .. 4 tx + 3 of rows r[a]. Arrays indexed only by unrolled loops stay
  // in registers.
  int r[kRowsPerThread];
  float m_i[kRowsPerThread], l_i[kRowsPerThread];
  float4 o[kRowsPerThread];
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) {
    r[a] = ty + kThreadsY * a;
    m_i[a] = -INFINITY;
    l_i[a] = 0.0f;
    o[a] = make_float4(0.f, 0.f, 0.f, 0.f);
  }

  // Causal shortcut: the last tile any row of Q_i needs is the one holding its last row.
  const int T_c = (row0 + rows - 1) / B_c + 1;
  for (int j = 0; j < T_c; ++j) {
    const int col0 = j * B_c;
    const int cols = min(B_c, T - col0);

    // Guards K_s, V_s and P_s: every thread is done with tile j-1 before they are
    // overwritten (and on j = 0, Q_i is written).
    __syncthreads();
    for (int idx = tid; idx < B_c * kVecPerRow; idx += kThreads) {
      const int kv = idx / kVecPerRow, x4 = idx % kVecPerRow;
      float4 k4 = make_float4(0.f, 0.f, 0.f, 0.f), v4 = k4;  // rows past T are zero
      if (kv < cols) {
        k4 = reinterpret_cast<const float4*>(k_bh + (col0 + kv) * k_stride.row)[x4];
        v4 = reinterpret_cast<const float4*>(v_bh + (col0 + kv) * v_stride.row)[x4];
      }
      reinterpret_cast<float4*>(K_s + kv * d)[swizzle(kv, x4)] = k4;
      reinterpret_cast<float4*>(V_s + kv * d)[x4] = v4;
    }
    // Guards K_s, V_s: the whole tile is loaded before anyone reads it.
    __syncthreads();

    // S_ij = scale * Q_i K_j^T for the 4 x 4 register tile, four steps of d at a time:
    // each float4 of Q feeds four columns and each float4 of K four rows.
    float s[kRowsPerThread][kColsPerThread] = {};
#pragma unroll
    for (int x4 = 0; x4 < kVecPerRow; ++x4) {
      float4 q4[kRowsPerThread], k4[kColsPerThread];
#pragma unroll
      for (int a = 0; a < kRowsPerThread; ++a)
        q4[a] = reinterpret_cast<const float4*>(Q_s + r[a] * d)[x4];
#pragma unroll
      for (int c = 0; c < kColsPerThread; ++c) {
        const int col = tx + kThreadsX * c;
        k4[c] = reinterpret_cast<const float4*>(K_s + col * d)[swizzle(col, x4)];
      }
#pragma unroll
      for (int a = 0; a < kRowsPerThread; ++a)
#pragma unroll
        for (int c = 0; c < kColsPerThread; ++c) {
          s[a][c] += q4[a].x * k4[c].x;  // one fused multiply-add each
          s[a][c] += q4[a].y * k4[c].y;
          s[a][c] += q4[a].z * k4[c].z;
          s[a][c] += q4[a].w * k4[c].w;
        }
    }

    // Online softmax per row; P_ij goes to shared memory for the P.V product. Tile
    // T_c - 1 holds the diagonal (and T's end); every earlier tile is unmasked.
    const bool diagonal = j == T_c - 1;
#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a) {
      float* P_row = P_s + r[a] * kPPitch;
      if (diagonal)
        softmax_row<true>(s[a], row0 + r[a], col0, T, scale, m_i[a], l_i[a], o[a], P_row);
      else
        softmax_row<false>(s[a], row0 + r[a], col0, T, scale, m_i[a], l_i[a], o[a], P_row);
    }
    // Guards rows r[a] of P_s: written by the 16 lanes of this half-warp, read only by
    // them, so the warp's barrier is enough.
    __syncwarp();

    // O_i += P_ij V_j for the 4 rows and 4 columns of this thread, four keys at a time:
    // each float4 of P feeds four columns and each float4 of V four rows.
    const int n = (cols + 3) / 4;  // float4s of keys; P is 0 past the last key
#pragma unroll 2
    for (int c4 = 0; c4 < n; ++c4) {
      float4 p4[kRowsPerThread], v4[4];
#pragma unroll
      for (int a = 0; a < kRowsPerThread; ++a)
        p4[a] = reinterpret_cast<const float4*>(P_s + r[a] * kPPitch)[c4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        v4[kk] = reinterpret_cast<const float4*>(V_s + (4 * c4 + kk) * d)[tx];
#pragma unroll
      for (int a = 0; a < kRowsPerThread; ++a) {
        const float p[4] = {p4[a].x, p4[a].y, p4[a].z, p4[a].w};
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          o[a].x += p[kk] * v4[kk].x;
          o[a].y += p[kk] * v4[kk].y;
          o[a].z += p[kk] * v4[kk].z;
          o[a].w += p[kk] * v4[kk].w;
        }
      }
    }
  }

  // O_i = diag(l)^-1 O_i, straight from registers to global memory: lane x stores the
  // float4 of columns 4x .. 4x + 3, a half-warp a whole 256-byte row.
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) {
    if (r[a] >= rows) continue;
    const float inv_l = 1.0f / l_i[a];
    reinterpret_cast<float4*>(o_bh + (row0 + r[a]) * C)[tx] =
        make_float4(o[a].x * inv_l, o[a].y * inv_l, o[a].z * inv_l, o[a].w * inv_l);
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
          dim3(kThreadsX, kThreadsY), smem_bytes(t)};
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
