// Version 3: version 2 with a 32 x 32 thread block and 32 x 32 tiles (B_r = B_c = 32).
//
// One thread block computes one tile of B_r query rows of one (batch, head): Q_i stays
// in shared memory while the block walks over the key/value tiles K_j, V_j (j < T_c)
// left of the diagonal. As in the paper's Algorithm 1, the running softmax statistics
// m (row max) and l (row sum of exponentials) live in global memory, and the output
// O_i is read, rescaled and written back in global memory after every tile.
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
              "each row of S is handled by one warp: the statistics update uses __syncwarp");

struct Tiles {
  int B_r;  // query rows per tile
  int B_c;  // key/value rows per tile
};

// Tiles matched to the thread block instead of sized from the shared-memory budget:
// thread (x, y) computes S_ij[y][x], with no partly idle second pass over a 48-wide tile.
// Shared memory: (32 * 64 + 32 * 65 + 32 * 64 + 32 * 32) * 4 = 28,800 bytes.
constexpr Tiles kTiles = {/*B_r=*/kThreadsY, /*B_c=*/kThreadsX};

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

// __launch_bounds__ caps registers so that a block of this size can always launch.
__global__ void __launch_bounds__(kThreadsX * kThreadsY) causal_attention_kernel(const float* q, const float* k, const float* v,
                                        float* out, float* m_global, float* l_global, int T,
                                        int H, int d, int B_r, int B_c, float scale) {
  extern __shared__ float smem[];
  const int K_pitch = d + 1;  // row pitch of K_s, padded
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
  float* m_bh = m_global + static_cast<size_t>(blockIdx.x) * T;
  float* l_bh = l_global + static_cast<size_t>(blockIdx.x) * T;

  const int row0 = i * B_r;
  const int rows = min(B_r, T - row0);  // the last tile may be partial

  // Load Q_i; initialise O_i = 0, m_i = -inf, l_i = 0 (this block owns these rows).
  for (int r = ty; r < rows; r += kThreadsY) {
    for (int x = tx; x < d; x += kThreadsX) {
      Q_s[r * d + x] = q_bh[(row0 + r) * C + x];
      o_bh[(row0 + r) * C + x] = 0.0f;
    }
    if (tx == 0) {
      m_bh[row0 + r] = -INFINITY;
      l_bh[row0 + r] = 0.0f;
    }
  }

  // Causal shortcut: the last tile any row of Q_i needs is the one holding its last row.
  const int T_c = (row0 + rows - 1) / B_c + 1;
  for (int j = 0; j < T_c; ++j) {
    const int col0 = j * B_c;
    const int cols = min(B_c, T - col0);

    // Guards K_s, V_s and S_s: every thread is done with tile j-1 before they are
    // overwritten (and on j = 0, Q_i and the initial m, l are written).
    __syncthreads();
    for (int c = ty; c < cols; c += kThreadsY) {
      for (int x = tx; x < d; x += kThreadsX) {
        K_s[c * K_pitch + x] = k_bh[(col0 + c) * C + x];
        V_s[c * d + x] = v_bh[(col0 + c) * C + x];
      }
    }
    // Guards K_s, V_s: the whole tile is loaded before anyone reads it.
    __syncthreads();

    // S_ij = scale * Q_i K_j^T on the unmasked entries.
    for (int r = ty; r < rows; r += kThreadsY) {
      const int n = unmasked_cols(row0 + r, col0, cols);
      for (int c = tx; c < n; c += kThreadsX) {
        float s = 0.0f;
        for (int x = 0; x < d; ++x) s += Q_s[r * d + x] * K_s[c * K_pitch + x];
        S_s[r * B_c + c] = s * scale;
      }
    }
    // Guards S_s: a row of S is complete before its statistics and P V use it.
    __syncthreads();

    // Online softmax and the O update, one warp per row (r is uniform across a warp).
    for (int r = ty; r < rows; r += kThreadsY) {
      const int row = row0 + r;
      const int n = unmasked_cols(row, col0, cols);
      if (n == 0) continue;  // causal shortcut: this row's part of the tile is masked out
      const float m_old = m_bh[row];
      const float l_old = l_bh[row];
      // Guards m_bh[row], l_bh[row]: every lane has read the old values before lane 0
      // overwrites them.
      __syncwarp();
      if (tx == 0) {
        float m_tilde = -INFINITY;
        for (int c = 0; c < n; ++c) m_tilde = fmaxf(m_tilde, S_s[r * B_c + c]);
        float l_tilde = 0.0f;
        for (int c = 0; c < n; ++c) l_tilde += expf(S_s[r * B_c + c] - m_tilde);
        const float m_new = fmaxf(m_old, m_tilde);
        m_bh[row] = m_new;
        l_bh[row] = expf(m_old - m_new) * l_old + expf(m_tilde - m_new) * l_tilde;
      }
      // Guards m_bh[row], l_bh[row]: lane 0's new statistics are visible to the warp.
      __syncwarp();
      const float m_new = m_bh[row];
      const float l_new = l_bh[row];
      // O_i = diag(l_new)^-1 (diag(l_old) e^(m_old - m_new) O_i + exp(S_ij - m_new) V_j)
      for (int x = tx; x < d; x += kThreadsX) {
        float pv = 0.0f;
        for (int c = 0; c < n; ++c) {
          pv += expf(S_s[r * B_c + c] - m_new) / l_new * V_s[c * d + x];
        }
        const float o_old = o_bh[row * C + x];
        o_bh[row * C + x] = o_old * (l_old * expf(m_old - m_new) / l_new) + pv;
      }
    }
  }
}

}  // namespace

Requirements requirements() { return {/*strided_inputs=*/false, /*alignment_bytes=*/4}; }

size_t workspace_bytes(const Args& a) {
  return 2 * sizeof(float) * static_cast<size_t>(a.batch * a.num_heads * a.seq_len);  // m, l
}

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
  const Tiles t = kTiles;  // B_r and B_c are kernel arguments
  const int T = static_cast<int>(a.seq_len);
  const int H = static_cast<int>(a.num_heads);
  float* m = static_cast<float*>(a.workspace);
  float* l = m + a.batch * a.num_heads * a.seq_len;
  const float scale = 1.0f / sqrtf(static_cast<float>(kHeadDim));
  causal_attention_kernel<<<cfg.grid, cfg.block, cfg.smem_bytes, stream>>>(
      a.q, a.k, a.v, a.out, m, l, T, H, kHeadDim, t.B_r, t.B_c, scale);
  return cudaGetLastError();
}

}  // namespace causal_attention
