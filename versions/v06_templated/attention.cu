// Version 6: version 5 with d, B_r and B_c as template parameters (the compiler unrolls
// the loops over them), the division by the softmax denominator moved out of the P V
// loop, and __restrict__ on the kernel's pointers.
//
// One thread block computes one tile of B_r query rows of one (batch, head): Q_i stays
// in shared memory while the block walks over the key/value tiles K_j, V_j (j < T_c)
// left of the diagonal. Row r of the tile belongs to warp r for the whole kernel, so the
// running softmax statistics m (row max) and l (row sum of exponentials) live in that
// warp's registers and are reduced across its lanes with shuffles. The output O_i is
// still read, rescaled and written back in global memory after every tile.
//
// Causal shortcuts: tiles entirely right of the diagonal are never loaded, and within
// a tile a row only touches the columns c <= its own position.
#include "../common/attention_launch.h"

#include <cmath>

namespace causal_attention {
namespace {

constexpr int kThreadsX = 32;  // blockDim.x: threads stepping along a row (columns of S, of O)
constexpr int kThreadsY = 32;  // blockDim.y: threads stepping down the tile (rows)
// K_s rows are d + 1 floats apart. In S = Q K^T the 32 lanes of a warp read K_s[c][x] for
// 32 consecutive c and one x: with a row pitch of d = 64 floats (a multiple of the 32
// banks) all 32 reads hit one bank; with d + 1 they hit 32 different banks.
static_assert(kThreadsX == 32,
              "each row of S is handled by one warp: its statistics are reduced with warp shuffles");

struct Tiles {
  int B_r;  // query rows per tile
  int B_c;  // key/value rows per tile
};

// Tiles matched to the thread block instead of sized from the shared-memory budget:
// thread (x, y) computes S_ij[y][x], with no partly idle second pass over a 48-wide tile.
// Shared memory: (32 * 64 + 32 * 65 + 32 * 64 + 32 * 32) * 4 = 28,800 bytes.
constexpr Tiles kTiles = {/*B_r=*/kThreadsY, /*B_c=*/kThreadsX};
static_assert(kTiles.B_r == kThreadsY && kTiles.B_c == kThreadsX,
              "thread (x, y) owns S_ij[y][x]: warp y owns row y and keeps its statistics");

size_t smem_bytes(Tiles t) {
  return sizeof(float) * (static_cast<size_t>(t.B_r) * kHeadDim  // Q_i
                          + static_cast<size_t>(t.B_c) * (kHeadDim + 1)  // K_j, padded
                          + static_cast<size_t>(t.B_c) * kHeadDim  // V_j
                          + static_cast<size_t>(t.B_r) * t.B_c);  // S_ij
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Number of columns of tile j (starting at col0, cols wide) that row `row` may attend
// to: the causal mask keeps columns <= row.
__device__ int unmasked_cols(int row, int col0, int cols) {
  return max(0, min(cols, row + 1 - col0));
}

// Butterfly reductions over the 32 lanes of a warp; every lane gets the result.
__device__ float warp_max(float value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

__device__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2)
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
  extern __shared__ float smem[];
  constexpr int K_pitch = d + 1;  // row pitch of K_s, padded
  float* Q_s = smem;           // [B_r][d]
  float* K_s = Q_s + B_r * d;        // [B_c][K_pitch]
  float* V_s = K_s + B_c * K_pitch;  // [B_c][d]
  float* S_s = V_s + B_c * d;  // [B_r][B_c]

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

  // Load Q_i and initialise O_i = 0 (this block owns these rows).
  for (int r = ty; r < rows; r += kThreadsY) {
    for (int x = tx; x < d; x += kThreadsX) {
      Q_s[r * d + x] = q_bh[(row0 + r) * C + x];
      o_bh[(row0 + r) * C + x] = 0.0f;
    }
  }
  // This thread's place in S_ij, and the statistics of its row (equal in all its lanes).
  const int r = ty;
  const int c = tx;
  const int row = row0 + r;
  float m_i = -INFINITY;
  float l_i = 0.0f;

  // Causal shortcut: the last tile any row of Q_i needs is the one holding its last row.
  const int T_c = (row0 + rows - 1) / B_c + 1;
  for (int j = 0; j < T_c; ++j) {
    const int col0 = j * B_c;
    const int cols = min(B_c, T - col0);

    // Guards K_s, V_s and S_s: every thread is done with tile j-1 before they are
    // overwritten (and on j = 0, Q_i is written).
    __syncthreads();
    for (int kv = ty; kv < cols; kv += kThreadsY) {
      for (int x = tx; x < d; x += kThreadsX) {
        K_s[kv * K_pitch + x] = k_bh[(col0 + kv) * C + x];
        V_s[kv * d + x] = v_bh[(col0 + kv) * C + x];
      }
    }
    // Guards K_s, V_s: the whole tile is loaded before anyone reads it.
    __syncthreads();

    // S_ij = scale * Q_i K_j^T on the unmasked entries: lane c computes column c.
    const int n = r < rows ? unmasked_cols(row, col0, cols) : 0;  // uniform across the warp
    if (n == 0) continue;  // causal shortcut (or a row past T): nothing to add to this row
    float s = -INFINITY;
    if (c < n) {
      s = 0.0f;
#pragma unroll
      for (int x = 0; x < d; ++x) s += Q_s[r * d + x] * K_s[c * K_pitch + x];
      s *= scale;
      S_s[r * B_c + c] = s;
    }

    // Online softmax: the row's max and sum come from shuffles within the warp.
    const float m_tilde = warp_max(s);
    const float l_tilde = warp_sum(c < n ? expf(s - m_tilde) : 0.0f);
    const float m_new = fmaxf(m_i, m_tilde);
    const float l_new = expf(m_i - m_new) * l_i + expf(m_tilde - m_new) * l_tilde;
    // Guards row r of S_s: every lane's entry is written before the warp reads the row.
    __syncwarp();

    // O_i = diag(l_new)^-1 (diag(l_i) e^(m_i - m_new) O_i + exp(S_ij - m_new) V_j),
    // dividing once per element of O instead of once per term of the sum.
    const float o_scale = l_i * expf(m_i - m_new);
#pragma unroll
    for (int x = tx; x < d; x += kThreadsX) {
      float pv = 0.0f;
      for (int cc = 0; cc < n; ++cc) pv += expf(S_s[r * B_c + cc] - m_new) * V_s[cc * d + x];
      const float o_old = o_bh[row * C + x];
      o_bh[row * C + x] = (o_old * o_scale + pv) / l_new;
    }
    m_i = m_new;
    l_i = l_new;
  }
}

}  // namespace

Requirements requirements() { return {/*strided_inputs=*/false, /*alignment_bytes=*/4}; }

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
