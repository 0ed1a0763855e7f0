// Version 10: version 9 with register tiling over rows as well: each thread of the
// 16 x 32 block computes a 2 x 2 tile of S_ij (rows y and y + 32, columns x and x + 16),
// so every Q and K value it loads is used twice, and B_r grows from 32 to 64.
//
// One thread block computes one tile of B_r query rows of one (batch, head): Q_i stays
// in shared memory while the block walks over the key/value tiles K_j, V_j (j < T_c)
// left of the diagonal. Rows r and r + 32 of the tile belong to one half-warp (16 lanes)
// for the whole kernel, so the running softmax statistics m (row max) and l (row sum of
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
constexpr int kThreadsY = 32;  // blockDim.y: threads down the tile (two rows each)
constexpr int kColsPerThread = 2;  // the register tile: columns x and x + 16 of S_ij ...
constexpr int kRowsPerThread = 2;  // ... in rows y and y + 32
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

// Thread (x, y) computes S_ij[y + 32 a][x + 16 b] for a, b in {0, 1}: B_r = 64, B_c = 32.
// Shared memory: (64 * 64 + 32 * 65 + 32 * 64 + 64 * 32 + 64 * 64) * 4 = 57,472 bytes,
// over the 48 KB default: the launcher opts in to more (Hopper allows up to 227 KB).
constexpr Tiles kTiles = {/*B_r=*/kRowsPerThread * kThreadsY,
                          /*B_c=*/kColsPerThread * kThreadsX};
static_assert(kTiles.B_r == kRowsPerThread * kThreadsY &&
                  kTiles.B_c == kColsPerThread * kThreadsX,
              "thread (x, y) owns a 2 x 2 tile of S_ij: half-warp y owns rows y and y + 32");

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
  // This thread's place in S_ij, and the statistics of its two rows (equal in its
  // 16 lanes). Arrays indexed only by unrolled loops stay in registers.
  const int r[kRowsPerThread] = {ty, ty + kThreadsY};
  const int c0 = tx, c1 = tx + kThreadsX;
  float m_i[kRowsPerThread] = {-INFINITY, -INFINITY};
  float l_i[kRowsPerThread] = {0.0f, 0.0f};
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

    // S_ij = scale * Q_i K_j^T on the unmasked entries: each Q value and each K value
    // loaded from shared memory feeds two products.
    int n[kRowsPerThread];  // unmasked columns per row, uniform across the half-warp
#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a)
      n[a] = r[a] < rows ? unmasked_cols(row0 + r[a], col0, cols) : 0;
    // Rows of a warp can differ in n on the diagonal tile, so nobody leaves the loop
    // early: the shuffles below need all 32 lanes. Rows with n == 0 add nothing.
    float s0[kRowsPerThread] = {0.0f, 0.0f}, s1[kRowsPerThread] = {0.0f, 0.0f};
#pragma unroll
    for (int x = 0; x < d; ++x) {
      const float k_c0 = K_s[c0 * K_pitch + x];
      const float k_c1 = K_s[c1 * K_pitch + x];
#pragma unroll
      for (int a = 0; a < kRowsPerThread; ++a) {
        const float q_rx = Q_s[r[a] * d + x];
        s0[a] += q_rx * k_c0;
        s1[a] += q_rx * k_c1;
      }
    }

    // Online softmax per row: max and sum come from shuffles within the half-warp.
    float m_new[kRowsPerThread], l_new[kRowsPerThread];
#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a) {
      s0[a] = c0 < n[a] ? s0[a] * scale : -INFINITY;
      s1[a] = c1 < n[a] ? s1[a] * scale : -INFINITY;
      S_s[r[a] * B_c + c0] = s0[a];
      S_s[r[a] * B_c + c1] = s1[a];
      const float m_tilde = row_max(fmaxf(s0[a], s1[a]));
      const float p_sum =
          (c0 < n[a] ? expf(s0[a] - m_tilde) : 0.0f) + (c1 < n[a] ? expf(s1[a] - m_tilde) : 0.0f);
      const float l_tilde = row_sum(p_sum);
      m_new[a] = fmaxf(m_i[a], m_tilde);
      l_new[a] = expf(m_i[a] - m_new[a]) * l_i[a] + expf(m_tilde - m_new[a]) * l_tilde;
    }
    // Guards rows r[0], r[1] of S_s: every lane's entries are written before the half
    // reads the rows.
    __syncwarp();

    // O_i = diag(l_new)^-1 (diag(l_i) e^(m_i - m_new) O_i + exp(S_ij - m_new) V_j), for
    // both rows at once: each V value loaded feeds both. Lane x owns columns 4x .. 4x + 3.
    // (n[1] >= n[0] unless row r[1] lies past T, where n[1] = 0: hence the max.)
    float4 pv[kRowsPerThread] = {make_float4(0.f, 0.f, 0.f, 0.f), make_float4(0.f, 0.f, 0.f, 0.f)};
    const int n_max = max(n[0], n[1]);
    for (int cc = 0; cc < n_max; ++cc) {
      const float4 v4 = reinterpret_cast<const float4*>(V_s + cc * d)[tx];
#pragma unroll
      for (int a = 0; a < kRowsPerThread; ++a) {
        const float p = cc < n[a] ? expf(S_s[r[a] * B_c + cc] - m_new[a]) : 0.0f;
        pv[a].x += p * v4.x;
        pv[a].y += p * v4.y;
        pv[a].z += p * v4.z;
        pv[a].w += p * v4.w;
      }
    }
#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a) {
      if (n[a] == 0) continue;  // nothing was added to this row
      const float o_scale = l_i[a] * expf(m_i[a] - m_new[a]);
      float4* o4 = reinterpret_cast<float4*>(O_s + r[a] * d) + tx;
      const float4 o_old = *o4;
      *o4 = make_float4((o_old.x * o_scale + pv[a].x) / l_new[a],
                        (o_old.y * o_scale + pv[a].y) / l_new[a],
                        (o_old.z * o_scale + pv[a].z) / l_new[a],
                        (o_old.w * o_scale + pv[a].w) / l_new[a]);
      m_i[a] = m_new[a];
      l_i[a] = l_new[a];
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
  // More than the default 48 KB per block needs the device's opt-in limit and an
  // explicit opt-in for this kernel.
  if (cfg.smem_bytes > static_cast<size_t>(limits.smem_per_block_optin))
    return cudaErrorInvalidConfiguration;
  auto* kernel = causal_attention_kernel<kHeadDim, kTiles.B_r, kTiles.B_c>;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(cfg.smem_bytes));
  if (err != cudaSuccess) return err;
  const int T = static_cast<int>(a.seq_len);
  const int H = static_cast<int>(a.num_heads);
  const float scale = 1.0f / sqrtf(static_cast<float>(kHeadDim));
  kernel<<<cfg.grid, cfg.block, cfg.smem_bytes, stream>>>(a.q, a.k, a.v, a.out, T, H, scale);
  return cudaGetLastError();
}

}  // namespace causal_attention
