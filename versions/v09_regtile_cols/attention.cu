// Version 9: version 8 with register tiling over columns: a 16 x 32 thread block in
// which each thread computes 2 columns of S_ij (reusing each Q value it loads twice)
// and 4 columns of O_i.
//
// One thread block computes one tile of B_r query rows of one (batch, head): Q_i stays
// in shared memory while the block walks over the key/value tiles K_j, V_j (j < T_c)
// left of the diagonal. Row r of the tile belongs to one half-warp (16 lanes) for the
// whole kernel, so the running softmax statistics m (row max) and l (row sum of
// exponentials) live in its registers and are reduced across its lanes with shuffles. The output O_i is
// rescaled and accumulated in shared memory and stored once the last tile is done.
//
// Causal shortcuts: tiles entirely right of the diagonal are never loaded, and within
// a tile a row only touches the columns c <= its own position.
#include "../common/attention_launch.h"

#include <cmath>

namespace causal_attention {
namespace {

constexpr int kThreadsX = 16;  // blockDim.x: threads along a row (2 columns of S, 4 of O each)
constexpr int kThreadsY = 32;  // blockDim.y: threads down the tile (one row each)
constexpr int kColsPerThread = 2;  // the register tile: S_ij[y][x] and S_ij[y][x + 16]
// K_s rows are d + 1 floats apart. In S = Q K^T the 32 lanes of a warp read K_s[c][x] for
// 32 consecutive c and one x: with a row pitch of d = 64 floats (a multiple of the 32
// banks) all 32 reads hit one bank; with d + 1 they hit 32 different banks.
static_assert(kThreadsX == 16,
              "each row of S is handled by a half-warp: its statistics are reduced with shuffles "
              "over 16 lanes");

struct Tiles {
  int B_r;  // query rows per tile
  int B_c;  // key/value rows per tile
};

// The tiles of version 8 (B_r = B_c = 32) with half as many threads: thread (x, y)
// computes S_ij[y][x] and S_ij[y][x + 16].
// Shared memory: (32 * 64 + 32 * 65 + 32 * 64 + 32 * 32 + 32 * 64) * 4 = 36,992 bytes.
constexpr Tiles kTiles = {/*B_r=*/kThreadsY, /*B_c=*/kColsPerThread * kThreadsX};
static_assert(kTiles.B_r == kThreadsY && kTiles.B_c == kColsPerThread * kThreadsX,
              "thread (x, y) owns S_ij[y][x] and S_ij[y][x + 16]: half-warp y owns row y");

size_t smem_bytes(Tiles t) {
  return sizeof(float) * (static_cast<size_t>(t.B_r) * kHeadDim  // Q_i
                          + static_cast<size_t>(t.B_c) * (kHeadDim + 1)  // K_j, padded
                          + static_cast<size_t>(t.B_c) * kHeadDim  // V_j
                          + static_cast<size_t>(t.B_r) * t.B_c    // S_ij
                          + static_cast<size_t>(t.B_r) * kHeadDim);  // O_i
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Number of columns of tile j (starting at col0, cols wide) that row `row` may attend
// to: the causal mask keeps columns <= row.
__device__ int unmasked_cols(int row, int col0, int cols) {
  return max(0, min(cols, row + 1 - col0));
}

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

// d_model (C = H * d) stays a run-time value: it only enters address arithmetic, and a
// template parameter would build one kernel per model width and refuse all others.
// __restrict__ promises that q, k, v and out never alias, so loads can use the
// read-only path and be reordered freely.
template <int d, int B_r, int B_c>
// __launch_bounds__ caps registers so that a block of this size can always launch.
__global__ void __launch_bounds__(kThreadsX * kThreadsY) causal_attention_kernel(const float* __restrict__ q,
                                        const float* __restrict__ k,
                                        const float* __restrict__ v, float* __restrict__ out,
                                        int T, int H, float scale) {
  extern __shared__ __align__(16) float smem[];
  constexpr int K_pitch = d + 1;  // row pitch of K_s, padded
  constexpr int kThreads = kThreadsX * kThreadsY;
  constexpr int kVecPerRow = d / 4;  // float4s in a row of Q, K or V
  static_assert(d % 4 == 0, "rows of d floats are read as float4");
  static_assert((B_r * d + B_c * K_pitch) % 4 == 0, "V_s must start 16-byte aligned");
  static_assert((B_r * d + B_c * K_pitch + B_c * d + B_r * B_c) % 4 == 0,
                "O_s must start 16-byte aligned");
  static_assert(d == 4 * kThreadsX, "each lane updates four adjacent columns of O (a float4)");
  const int tid = threadIdx.y * kThreadsX + threadIdx.x;
  float* Q_s = smem;           // [B_r][d]
  float* K_s = Q_s + B_r * d;        // [B_c][K_pitch]
  float* V_s = K_s + B_c * K_pitch;  // [B_c][d]
  float* S_s = V_s + B_c * d;  // [B_r][B_c]
  float* O_s = S_s + B_r * B_c;  // [B_r][d]

  const int C = H * d;
  const int b = blockIdx.x / H;
  const int h = blockIdx.x % H;
  const int i = blockIdx.y;  // query tile
  const int tx = threadIdx.x, ty = threadIdx.y;

  const size_t head_offset = static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * d;
  const float* q_bh = q + head_offset;
  const float* k_bh = k + head_offset;
  const float* v_bh = v + head_offset;
  float* o_bh = out + head_offset;

  const int row0 = i * B_r;
  const int rows = min(B_r, T - row0);  // the last tile may be partial

  // Load Q_i and initialise O_i = 0 in shared memory, a float4 per thread and step:
  // consecutive threads take consecutive 16-byte pieces of a row.
  for (int idx = tid; idx < rows * kVecPerRow; idx += kThreads) {
    const int r = idx / kVecPerRow, x4 = idx % kVecPerRow;
    reinterpret_cast<float4*>(Q_s + r * d)[x4] =
        reinterpret_cast<const float4*>(q_bh + (row0 + r) * C)[x4];
    reinterpret_cast<float4*>(O_s + r * d)[x4] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  // This thread's place in S_ij, and the statistics of its row (equal in its 16 lanes).
  const int r = ty;
  const int c0 = tx, c1 = tx + kThreadsX;
  const int row = row0 + r;
  float m_i = -INFINITY;
  float l_i = 0.0f;
  // Causal shortcut: the last tile any row of Q_i needs is the one holding its last row.
  const int T_c = (row0 + rows - 1) / B_c + 1;
  for (int j = 0; j < T_c; ++j) {
    const int col0 = j * B_c;
    const int cols = min(B_c, T - col0);

    // Guards K_s, V_s and S_s: every thread is done with tile j-1 before they are
    // overwritten (and on j = 0, Q_i and the zeroed O_i are written).
    __syncthreads();
    for (int idx = tid; idx < cols * kVecPerRow; idx += kThreads) {
      const int kv = idx / kVecPerRow, x4 = idx % kVecPerRow;
      const float4 k4 = reinterpret_cast<const float4*>(k_bh + (col0 + kv) * C)[x4];
      // K_s rows are padded to d + 1 floats, so they are not 16-byte aligned: 4 stores.
      float* k_row = K_s + kv * K_pitch + 4 * x4;
      k_row[0] = k4.x;
      k_row[1] = k4.y;
      k_row[2] = k4.z;
      k_row[3] = k4.w;
      reinterpret_cast<float4*>(V_s + kv * d)[x4] =
          reinterpret_cast<const float4*>(v_bh + (col0 + kv) * C)[x4];
    }
    // Guards K_s, V_s: the whole tile is loaded before anyone reads it.
    __syncthreads();

    // S_ij = scale * Q_i K_j^T on the unmasked entries: lane x computes columns x and
    // x + 16, loading each Q value once for both.
    const int n = r < rows ? unmasked_cols(row, col0, cols) : 0;  // uniform across the half
    // The two rows of a warp can differ in n on the diagonal tile, so nobody leaves the
    // loop early: the shuffles below need all 32 lanes. Rows with n == 0 add nothing.
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int x = 0; x < d; ++x) {
      const float q_rx = Q_s[r * d + x];
      s0 += q_rx * K_s[c0 * K_pitch + x];
      s1 += q_rx * K_s[c1 * K_pitch + x];
    }
    s0 = c0 < n ? s0 * scale : -INFINITY;
    s1 = c1 < n ? s1 * scale : -INFINITY;
    S_s[r * B_c + c0] = s0;
    S_s[r * B_c + c1] = s1;

    // Online softmax: the row's max and sum come from shuffles within the half-warp.
    const float m_tilde = row_max(fmaxf(s0, s1));
    const float p_sum = (c0 < n ? expf(s0 - m_tilde) : 0.0f) + (c1 < n ? expf(s1 - m_tilde) : 0.0f);
    const float l_tilde = row_sum(p_sum);
    // Guards row r of S_s: every lane's entries are written before the half reads the row.
    __syncwarp();
    if (n > 0) {
      const float m_new = fmaxf(m_i, m_tilde);
      const float l_new = expf(m_i - m_new) * l_i + expf(m_tilde - m_new) * l_tilde;

      // O_i = diag(l_new)^-1 (diag(l_i) e^(m_i - m_new) O_i + exp(S_ij - m_new) V_j),
      // dividing once per element of O. Lane x owns columns 4x .. 4x + 3 of O.
      const float o_scale = l_i * expf(m_i - m_new);
      float4 pv = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int cc = 0; cc < n; ++cc) {
        const float p = expf(S_s[r * B_c + cc] - m_new);
        const float4 v4 = reinterpret_cast<const float4*>(V_s + cc * d)[tx];
        pv.x += p * v4.x;
        pv.y += p * v4.y;
        pv.z += p * v4.z;
        pv.w += p * v4.w;
      }
      float4* o4 = reinterpret_cast<float4*>(O_s + r * d) + tx;
      const float4 o_old = *o4;
      *o4 = make_float4((o_old.x * o_scale + pv.x) / l_new, (o_old.y * o_scale + pv.y) / l_new,
                        (o_old.z * o_scale + pv.z) / l_new, (o_old.w * o_scale + pv.w) / l_new);
      m_i = m_new;
      l_i = l_new;
    }
  }

  // Guards O_s: every row is final before threads store rows other than their own.
  __syncthreads();
  for (int idx = tid; idx < rows * kVecPerRow; idx += kThreads) {
    const int r_out = idx / kVecPerRow, x4 = idx % kVecPerRow;
    reinterpret_cast<float4*>(o_bh + (row0 + r_out) * C)[x4] =
        reinterpret_cast<const float4*>(O_s + r_out * d)[x4];
  }
}

}  // namespace

// float4 loads need 16-byte aligned rows: the glue checks the pointers and strides.
Requirements requirements() { return {/*strided_inputs=*/false, /*alignment_bytes=*/16}; }

size_t workspace_bytes(const Args&) { return 0; }  // m and l live in registers now

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
  const int T = static_cast<int>(a.seq_len);
  const int H = static_cast<int>(a.num_heads);
  const float scale = 1.0f / sqrtf(static_cast<float>(kHeadDim));
  causal_attention_kernel<kHeadDim, kTiles.B_r, kTiles.B_c>
      <<<cfg.grid, cfg.block, cfg.smem_bytes, stream>>>(a.q, a.k, a.v, a.out, T, H, scale);
  return cudaGetLastError();
}

}  // namespace causal_attention
