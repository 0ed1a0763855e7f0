// Half-precision version 2: half-precision version 1 with both products on Hopper's
// warpgroup MMA (wgmma) and the tiles brought into shared memory by the tensor memory
// accelerator (TMA).
//
// Version h01 fed mma.sync from registers: every warp loaded all of K_j and V_j from shared
// memory by ldmatrix for its own 16 rows, 64 KB per 64 x 64 tile and block of 4 warps, more
// than the shared-memory bandwidth delivers while the tensor cores work (ncu: bound by it).
// wgmma.mma_async is issued by a warpgroup (4 warps, 128 threads) for 64 rows at once and
// reads its B operand (and A, when it is in shared memory) straight from shared memory
// through a matrix descriptor, once per warpgroup: 16 KB per 64 x 64 tile. It runs
// asynchronously; the warps wait for it when they need the result. It exists only in the
// arch-specific target sm_90a: this version is built for it alone and runs on compute
// capability 9.0.
//
// The copies change with it. One thread issues cp.async.bulk.tensor for a whole 64 x 64
// tile (8 KB): the TMA reads the tile through a tensor map that describes q, k or v in
// global memory (any row and batch stride), writes it to shared memory in the 128-byte
// swizzled layout wgmma reads, fills rows past T with zeros, and signals an mbarrier
// when the bytes have landed. No thread computes an address or waits on a copy of its own.
//
// One thread block is two warpgroups, 256 threads: warpgroup w owns rows 64 w .. 64 w + 63
// of a tile of B_r = 128 query rows of one (batch, head), and both read the same K_j, V_j
// (B_c = 64), so each tile is brought in once per 128 rows. Per key/value tile, each
// warpgroup:
//   1. S = Q K_j^T: 4 wgmma m64n64k16 (k = d in steps of 16), A = its rows of Q in shared
//      memory, B = K_j in shared memory, both K-major (d contiguous); then waits for them;
//   2. the online softmax on S in registers, as in h01;
//   3. O += P V_j: 4 wgmma m64n64k16 (k = keys), A = P from registers, B = V_j in shared
//      memory, N-major (d contiguous: V as stored, the descriptor's transpose flag); waits.
// The tiles are three stages deep: while one is computed the next two are being copied.
//
// Register layouts (PTX ISA, "Register Fragments" of wgmma .m64nNk16), g = lane / 4,
// t = lane % 4, rows of warp w (of the warpgroup) offset by 16 w:
//   A (64 x 16, 16-bit pairs): a01 = A[g][2t, 2t+1], a23 = A[g + 8][2t, 2t+1],
//                              a45 = A[g][2t+8, 2t+9], a67 = A[g + 8][2t+8, 2t+9]
//   D (64 x 64, f32):          d[n][0] = D[g][8n + 2t], d[n][1] = D[g][8n + 2t + 1],
//                              d[n][2] = D[g + 8][8n + 2t], d[n][3] = D[g + 8][8n + 2t + 1]
// the same as mma.m16n8k16's per warp, so the softmax and the C-to-A reuse of P are h01's.
//
// Shared-memory operands: rows of 64 16-bit values (128 bytes), 8 rows an atom of 1,024
// bytes, chunk c of row r stored at chunk c ^ (r % 8) (the TMA's 128-byte swizzle, which
// is the layout the descriptors name). K-major (Q, K): the 16 values of a k step are 32
// bytes of each row, the step's descriptor starts 32 bytes further; rows (m or n) in atoms
// 1,024 bytes apart. N-major (V): the 16 keys of a k step are 16 rows, two atoms, 2,048
// bytes per step; d runs along each row.
//
// The scores stay unscaled: P_ij = 2^(c S_ij - c m) with c = log2(e) / sqrt(d), as in h01.
// Causal shortcuts: tiles entirely right of a warpgroup's diagonal are skipped (for the
// first warpgroup, the block's last tile); only diagonal tiles are masked; row blocks
// start longest-first; keys are split across blocks at small grids (h01's plan).
#include "../common/attention_launch.h"

#include <cuda.h>  // CUtensorMap and its enums (types only: the driver is reached at run time)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error \
    "half-precision version 2 uses wgmma, which exists only in the arch-specific target sm_90a (compute capability 9.0)"
#endif

namespace causal_attention {
namespace {

constexpr int kWarpgroups = 2;          // consumers of every tile, 64 rows each
constexpr int kWarpgroupThreads = 128;  // 4 warps issue one wgmma together
constexpr int kThreads = kWarpgroups * kWarpgroupThreads;
constexpr int kLanes = 32;
constexpr int kMmaM = 16;     // rows of one warp's part of a wgmma ...
constexpr int kMmaN = 8;      // ... columns of one accumulator slice ...
constexpr int kMmaK = 16;     // ... and the k of one 16-bit wgmma
constexpr int kRowLanes = 4;  // lanes holding one row of D (the same g)

struct Tiles {
  int B_r;  // query rows per tile
  int B_c;  // key/value rows per tile
};

constexpr int kWarpgroupRows = 64;  // the m of every wgmma
constexpr Tiles kTiles = {/*B_r=*/kWarpgroupRows * kWarpgroups, /*B_c=*/64};
static_assert(kTiles.B_c == 64 && kHeadDim == 64, "m64n64k16 wgmma: 64 keys, d = 64");
constexpr int kSlicesS = kTiles.B_c / kMmaN;  // 8-column slices of S_ij
constexpr int kSlicesO = kHeadDim / kMmaN;    // 8-column slices of O_i
constexpr int kStepsQK = kHeadDim / kMmaK;    // k steps of Q K^T (over d)
constexpr int kStepsPV = kTiles.B_c / kMmaK;  // k steps of P V (over the keys)

constexpr int kStages = 3;  // K/V tiles in flight: j computed while j + 1, j + 2 land

// A 64 x 64 tile of 16-bit values: 64 rows of 128 bytes, 8 atoms of 8 rows.
constexpr int kRowBytes = kHeadDim * 2;
constexpr int kAtomBytes = 8 * kRowBytes;  // 1,024: the swizzle's period
constexpr int kTileBytes = 64 * kRowBytes;  // 8 KB

// Shared memory, every tile 1,024-byte aligned for the swizzle: Q_i (two 8 KB halves, one
// per warpgroup), kStages x (K_j, V_j), then the mbarriers; 1 KB of slack to align the
// start: 66,592 bytes, over the 48 KB default (the launcher opts in).
constexpr int kTilesInSmem = kWarpgroups + 2 * kStages;
constexpr int kBarriers = kStages + 1;  // a "tile landed" barrier per stage, one for Q_i
size_t smem_bytes(Tiles) {
  return kAtomBytes + static_cast<size_t>(kTilesInSmem) * kTileBytes + kBarriers * sizeof(uint64_t);
}

__host__ __device__ int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Thread blocks one SM holds at once: 66 KB of shared memory each allow three of the
// H100's 228 KB; registers (capped at 128 per thread by __launch_bounds__, 32 K per
// block) allow two. The split plan counts on two.
constexpr int kBlocksPerSm = 2;

// How the keys are split (h01's plan, in tiles of B_c keys). Row block i (of T_r, B_r rows)
// reaches key tile n_i - 1, n_i = min(2 (i + 1), T_c); its tiles are cut into splits of at
// most L tiles, L even, so that only a row block's last split holds its two diagonal tiles.
struct SplitPlan {
  int row_blocks;       // T_r
  int key_tiles;        // T_c
  int tiles_per_split;  // L
  int max_splits;       // splits of the longest row block
};

__host__ __device__ int tiles_of_row_block(int i, int T_c) { return min(2 * (i + 1), T_c); }

SplitPlan plan_splits(const HalfArgs& a, const DeviceLimits& limits) {
  const int T = static_cast<int>(a.seq_len);
  const int T_r = ceil_div(T, kTiles.B_r), T_c = ceil_div(T, kTiles.B_c);
  const int64_t heads = a.batch * a.num_heads;
  const int64_t slots = static_cast<int64_t>(limits.sm_count) * kBlocksPerSm;
  int64_t work = 0;  // key tiles of every row block of one (batch, head)
  for (int i = 0; i < T_r; ++i) work += tiles_of_row_block(i, T_c);
  const int longest = tiles_of_row_block(T_r - 1, T_c);
  int64_t L = (heads * work + slots - 1) / slots;
  L += L % 2;  // even: splits start on a row block's 128-key boundaries
  if (L >= longest) return {T_r, T_c, longest, 1};
  return {T_r, T_c, static_cast<int>(L), ceil_div(longest, static_cast<int>(L))};
}

// Floats of partial results per split slot: O (B_r x d) and (c m, l) per row.
constexpr size_t kPartialFloats = static_cast<size_t>(kTiles.B_r) * (kHeadDim + 2);

// The two 16-bit types: how a pair of floats becomes one register of two values, and the
// wgmma instructions that multiply them (m64n64k16, float32 accumulators).
template <typename Element>
struct HalfOps;

#define ATTN_WGMMA_D                                                                            \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define ATTN_WGMMA_D_OPERANDS(d)                                                                \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),     \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), \
      "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
      "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), \
      "+f"(d[7][2]), "+f"(d[7][3])

// D (= or +=, kAccumulate) A B with A and B in shared memory, both K-major; and D += A B
// with A from registers and B N-major in shared memory (imm-trans-b = 1).
#define ATTN_HALF_OPS(TYPE, PTX_TYPE, PACK)                                                      \
  template <>                                                                                    \
  struct HalfOps<TYPE> {                                                                         \
    __device__ static uint32_t pack(float lo, float hi) { return PACK; }                         \
    template <int kAccumulate>                                                                   \
    __device__ static void wgmma_ss(float (&d)[8][4], uint64_t a_desc, uint64_t b_desc) {        \
      asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32." PTX_TYPE "." PTX_TYPE           \
                   " " ATTN_WGMMA_D ", %32, %33, %34, 1, 1, 0, 0;\n"                             \
                   : ATTN_WGMMA_D_OPERANDS(d)                                                    \
                   : "l"(a_desc), "l"(b_desc), "n"(kAccumulate)                                  \
                   : "memory");                                                                  \
    }                                                                                            \
    __device__ static void wgmma_rs(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b_desc) { \
      asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32." PTX_TYPE "." PTX_TYPE           \
                   " " ATTN_WGMMA_D ", {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"                 \
                   : ATTN_WGMMA_D_OPERANDS(d)                                                    \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc)                     \
                   : "memory");                                                                  \
    }                                                                                            \
  };

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);  // lo in the low 16 bits
  return *reinterpret_cast<const uint32_t*>(&pair);
}
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  const __half2 pair = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&pair);
}
ATTN_HALF_OPS(__nv_bfloat16, "bf16", pack_bf16(lo, hi))
ATTN_HALF_OPS(__half, "f16", pack_f16(lo, hi))
#undef ATTN_HALF_OPS
#undef ATTN_WGMMA_D
#undef ATTN_WGMMA_D_OPERANDS

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The shared-memory matrix descriptor of an operand starting at `start` (a byte address in
// shared memory): start >> 4 (bits 0-13), leading byte offset >> 4 (bits 16-29), stride
// byte offset >> 4 (bits 32-45), 128-byte swizzle (mode 1, bits 62-63). Both offsets are
// the atom, 1,024 bytes: for K-major operands the stride between atoms of 8 rows (the
// leading offset is unused); for the N-major V the stride between the two atoms of 8 keys
// of a k step, and, unused with 64 columns of d (one atom wide), the leading offset.
__device__ __forceinline__ uint64_t operand_descriptor(uint32_t start) {
  return static_cast<uint64_t>((start & 0x3FFFF) >> 4) |
         static_cast<uint64_t>(kAtomBytes >> 4) << 16 |
         static_cast<uint64_t>(kAtomBytes >> 4) << 32 | static_cast<uint64_t>(1) << 62;
}

// Orders this warpgroup's register writes (accumulators, A fragments) before the wgmma
// that follow; needed before the first wgmma of each batch.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until every wgmma this warpgroup committed has completed: their accumulators can be
// read and their shared-memory operands overwritten.
__device__ __forceinline__ void wgmma_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
// Keeps the compiler from moving reads or writes of these registers across the wgmma that
// own them (the asm of the wgmma itself names them only at its issue).
__device__ __forceinline__ void pin(float (&r)[8][4]) {
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(r[n][e])::"memory");
}

// mbarriers: a 64-bit object in shared memory that counts arrivals and, for the TMA,
// transaction bytes; a wait on phase parity p returns once phase p has completed.
__device__ __forceinline__ void barrier_init(uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(arrivals)
               : "memory");
}
// Makes the initialised barriers visible to the TMA (the async proxy).
__device__ __forceinline__ void barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// This thread's arrival, announcing `bytes` that copies will deliver before the phase ends.
__device__ __forceinline__ void barrier_expect_bytes(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void barrier_wait(uint64_t* bar, unsigned parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// Where the TMA finds rows: the tensor maps' second and third coordinates are (row, batch),
// or (batch, row) when the batch stride is the smaller one (a (T, B, C) tensor seen as
// (B, T, C)); dims are ordered by stride.
struct RowCoords {
  int batch_first;  // 1: coordinates (c, b, t); 0: (c, t, b)
};

// One 64-row box of q, k or v: columns c .. c + 63 (head h's d), rows t .. t + 63 of batch
// item b, into shared memory at dst; completion counted on bar.
__device__ __forceinline__ void tma_load_tile(
    void* dst, const CUtensorMap& map, int c, int t, int b, RowCoords coords, uint64_t* bar) {
  const int y = coords.batch_first ? b : t, z = coords.batch_first ? t : b;
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c), "r"(y), "r"(z), "r"(smem_address(bar))
      : "memory");
}

// Butterfly reductions over the 4 lanes of a row (lanes 4g .. 4g + 3); every lane gets its
// row's result.
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

// The online softmax for this lane's two rows (h01's): rows g and g + 8 of the warp,
// absolute rows row_g and row_g + 8, of the tile starting at column col0; masks if the tile
// crosses the diagonal or T's end (kMasked), turns s into P_ij = 2^(c s - c m_new) in place,
// updates m and this lane's part of l; alpha gets each row's 2^(c m_old - c m_new). Element
// e of slice n sits in row g + 8 (e / 2), column 8n + 2t + e % 2.
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
    // Every row has an unmasked entry in the first tile it meets (its own column, or for
    // rows past T column 0), and m never decreases, so m_new is finite.
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

// __launch_bounds__ caps registers so that kBlocksPerSm blocks fit on an SM.
template <typename Element>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    causal_attention_kernel(const __grid_constant__ CUtensorMap q_map,
                            const __grid_constant__ CUtensorMap k_map,
                            const __grid_constant__ CUtensorMap v_map,
                            RowCoords q_coords,
                            RowCoords k_coords,
                            RowCoords v_coords,
                            Element* __restrict__ out,
                            int T,
                            int H,
                            float c,
                            int tiles_per_split,
                            int max_splits,
                            float* __restrict__ partial) {
  using Ops = HalfOps<Element>;
  constexpr int d = kHeadDim, B_r = kTiles.B_r, B_c = kTiles.B_c;
  extern __shared__ __align__(128) char smem_raw[];
  // The swizzle repeats every 1,024 bytes and the descriptors assume tiles start on it.
  char* smem = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem_raw) + kAtomBytes - 1) &
                                       ~static_cast<uintptr_t>(kAtomBytes - 1));
  char* Q_s = smem;                                  // [2][64][d]: each warpgroup's rows
  char* K_buf = Q_s + kWarpgroups * kTileBytes;      // [kStages][B_c][d]
  char* V_buf = K_buf + kStages * kTileBytes;        // [kStages][B_c][d]
  uint64_t* landed = reinterpret_cast<uint64_t*>(V_buf + kStages * kTileBytes);  // [kStages]
  uint64_t* q_landed = landed + kStages;

  const int C = H * d;
  const int b = blockIdx.x / H;
  const int h = blockIdx.x % H;
  const int T_c = ceil_div(T, B_c);
  // blockIdx.y = (T_r - 1 - i) * max_splits + split: row blocks longest-first, and the
  // splits of one row block next to each other.
  const int i = gridDim.y / max_splits - 1 - blockIdx.y / max_splits;  // query tile
  const int split = blockIdx.y % max_splits;
  const int n_i = tiles_of_row_block(i, T_c);
  const int splits = ceil_div(n_i, tiles_per_split);
  if (split >= splits) return;  // a slot this row block does not use: the whole block leaves
  // This split's key tiles: [j_begin, j_end). The last split holds the diagonal tiles.
  const int j_begin = split * tiles_per_split;
  const int j_end = min(j_begin + tiles_per_split, n_i);
  const int wg = threadIdx.x / kWarpgroupThreads;                // 0 or 1: which 64 rows
  const int warp = threadIdx.x % kWarpgroupThreads / kLanes;     // within the warpgroup
  const int lane = threadIdx.x % kLanes;
  const int g = lane / kRowLanes, t = lane % kRowLanes;
  const int row0 = i * B_r;
  // This warpgroup's diagonal tile: key tiles after it are entirely masked for its rows.
  const int diagonal = 2 * i + wg;

  // Starts the copy of K_j, V_j into stage (j - j_begin) % kStages.
  auto load_tile = [&](int j) {
    const int stage = (j - j_begin) % kStages;
    barrier_expect_bytes(&landed[stage], 2 * kTileBytes);
    tma_load_tile(K_buf + stage * kTileBytes, k_map, h * d, j * B_c, b, k_coords, &landed[stage]);
    tma_load_tile(V_buf + stage * kTileBytes, v_map, h * d, j * B_c, b, v_coords, &landed[stage]);
  };

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) barrier_init(&landed[s], 1);  // the issuing thread's arrival
    barrier_init(q_landed, 1);
    barrier_init_fence();
  }
  // Guards the barriers: initialised before anyone waits on them.
  __syncthreads();
  if (threadIdx.x == 0) {
    barrier_expect_bytes(q_landed, kWarpgroups * kTileBytes);
    for (int w = 0; w < kWarpgroups; ++w)
      tma_load_tile(Q_s + w * kTileBytes, q_map, h * d, row0 + w * kWarpgroupRows, b, q_coords,
                    q_landed);
    for (int j = j_begin; j < min(j_begin + kStages, j_end); ++j) load_tile(j);
  }

  // This lane's rows (g and g + 8 of its warp of its warpgroup), their statistics (m equal
  // across the row's 4 lanes, l this lane's part) and its part of O_i, in D-fragment layout.
  const int row_g = row0 + wg * kWarpgroupRows + kMmaM * warp + g;
  float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.0f, 0.0f};
  float o[kSlicesO][4] = {};
  const uint32_t q_smem = smem_address(Q_s + wg * kTileBytes);
  barrier_wait(q_landed, 0);

  for (int j = j_begin; j < j_end; ++j) {
    const int stage = (j - j_begin) % kStages;
    barrier_wait(&landed[stage], ((j - j_begin) / kStages) % 2);  // K_j, V_j have landed
    if (j <= diagonal) {
      const uint32_t k_smem = smem_address(K_buf + stage * kTileBytes);
      const uint32_t v_smem = smem_address(V_buf + stage * kTileBytes);
      // S_ij = Q_i K_j^T: k step kq reads columns 16 kq .. of Q's and K's rows, 32 bytes
      // into each (swizzled) row.
      float s[kSlicesS][4];
      wgmma_fence();
      Ops::template wgmma_ss<0>(s, operand_descriptor(q_smem), operand_descriptor(k_smem));
#pragma unroll
      for (int kq = 1; kq < kStepsQK; ++kq)
        Ops::template wgmma_ss<1>(s, operand_descriptor(q_smem + 32 * kq),
                                  operand_descriptor(k_smem + 32 * kq));
      wgmma_commit();
      wgmma_wait_all();
      pin(s);

      // Online softmax, in registers. The diagonal tile and the tile holding T's end are
      // masked; every earlier tile is entirely visible.
      float alpha[2];
      if (j == diagonal || j == T_c - 1)
        softmax_rows<true>(s, row_g, j * B_c, T, c, m_i, l_i, alpha);
      else
        softmax_rows<false>(s, row_g, j * B_c, T, c, m_i, l_i, alpha);
#pragma unroll
      for (int n = 0; n < kSlicesO; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[n][e] *= alpha[e / 2];

      // O_i += P_ij V_j: the A fragment of k step kp (keys 16 kp ..) is S slices 2 kp and
      // 2 kp + 1 rounded to 16 bits in pairs (h01's C-to-A reuse); B = V_j, N-major, the
      // step's 16 keys two atoms (2,048 bytes) further.
      uint32_t p_frag[kStepsPV][4];
#pragma unroll
      for (int kp = 0; kp < kStepsPV; ++kp) {
        p_frag[kp][0] = Ops::pack(s[2 * kp][0], s[2 * kp][1]);
        p_frag[kp][1] = Ops::pack(s[2 * kp][2], s[2 * kp][3]);
        p_frag[kp][2] = Ops::pack(s[2 * kp + 1][0], s[2 * kp + 1][1]);
        p_frag[kp][3] = Ops::pack(s[2 * kp + 1][2], s[2 * kp + 1][3]);
      }
      pin(o);
      wgmma_fence();
#pragma unroll
      for (int kp = 0; kp < kStepsPV; ++kp)
        Ops::wgmma_rs(o, p_frag[kp], operand_descriptor(v_smem + 2 * kAtomBytes * kp));
      wgmma_commit();
      wgmma_wait_all();
      pin(o);
    }
    // Guards stage `stage`: both warpgroups' wgmma on K_j and V_j have completed (waited
    // above), so the copy of tile j + kStages may overwrite it.
    __syncthreads();
    if (threadIdx.x == 0 && j + kStages < j_end) load_tile(j + kStages);
  }

  const int rows = min(B_r, T - row0);  // the last tile may be partial
  if (splits == 1) {
    // O_i = diag(l)^-1 O_i, rounded once, straight from registers to global memory: lane
    // (g, t) stores columns 8n + 2t, 8n + 2t + 1 of rows g and g + 8, a pair each.
    Element* o_bh = out + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * d;
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
  // A partial result for merge_splits: unnormalised O in float32, then (c m, l) per row, in
  // this split's slot of the workspace (rows past T included: the merge skips them). Every
  // split gives both warpgroups a tile: L is even, so a row block's last split starts at or
  // before tile 2i, the first warpgroup's diagonal.
  float* slot =
      partial + ((static_cast<size_t>(blockIdx.x) * gridDim.y + blockIdx.y) * kPartialFloats);
  float* stats = slot + B_r * d;  // [B_r][2]: c m, l
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const float l = row_sum(l_i[hh]);  // all lanes: the shuffles need them
    const int r = wg * kWarpgroupRows + kMmaM * warp + g + 8 * hh;  // row within the tile
#pragma unroll
    for (int n = 0; n < kSlicesO; ++n)
      *reinterpret_cast<float2*>(slot + r * d + kMmaN * n + 2 * t) =
          make_float2(o[n][2 * hh], o[n][2 * hh + 1]);
    if (t == 0) *reinterpret_cast<float2*>(stats + 2 * r) = make_float2(c * m_i[hh], l);
  }
}

constexpr int kMergeThreads = 512;  // 4 per row of a 128-row tile, 16 columns each

// Merges the partial results of every row block that was split (h01's merge, 128 rows);
// one thread block per (batch, head) and row block, thread (r, quarter) combines row r's
// columns 16 quarter .. 16 quarter + 15 over the row block's splits, with m in powers of 2
// (c m): m = max_s m_s, l = sum_s 2^(m_s - m) l_s, O = sum_s 2^(m_s - m) O_s / l.
template <typename Element, int d, int B_r>
__global__ void __launch_bounds__(kMergeThreads) merge_splits(
    const float* __restrict__ partial,
    Element* __restrict__ out,
    int T,
    int H,
    int key_tiles,
    int tiles_per_split,
    int max_splits) {
  using Ops = HalfOps<Element>;
  constexpr int kColsPerThread = d * B_r / kMergeThreads;
  static_assert(kColsPerThread == 16, "4 threads per row, 16 columns (four float4) each");
  const int i = gridDim.y - 1 - blockIdx.y;  // query tile, numbered as in the kernel
  const int splits = ceil_div(tiles_of_row_block(i, key_tiles), tiles_per_split);
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
    const float w = exp2f(slot[B_r * d + 2 * r] - m);  // 2^(m_s - m), in [0, 1]
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

// cuTensorMapEncodeTiled, reached through the runtime (no link against the driver library).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess)
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// The tensor map of one operand: (B, T, C) 16-bit elements with the given row and batch
// strides (elements), boxes of 64 columns x 64 rows, 128-byte swizzle, rows past T read as
// zeros. Dimensions 1 and 2 go in order of increasing stride (RowCoords says which is
// which); a stride that no element uses (B = 1, T = 1) is replaced by a harmless one.
cudaError_t make_tensor_map(CUtensorMap* map,
                            RowCoords* coords,
                            const void* base,
                            HalfType dtype,
                            int64_t B,
                            int64_t T,
                            int64_t C,
                            int64_t row_stride,
                            int64_t batch_stride) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  const uint64_t row_bytes =
      T > 1 ? static_cast<uint64_t>(row_stride) * 2 : static_cast<uint64_t>(C) * 2;
  const uint64_t batch_bytes = B > 1 ? static_cast<uint64_t>(batch_stride) * 2 : row_bytes * T;
  coords->batch_first = batch_bytes < row_bytes;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(C),
                              static_cast<cuuint64_t>(coords->batch_first ? B : T),
                              static_cast<cuuint64_t>(coords->batch_first ? T : B)};
  const cuuint64_t strides[2] = {coords->batch_first ? batch_bytes : row_bytes,
                                 coords->batch_first ? row_bytes : batch_bytes};
  const cuuint32_t box[3] = {kHeadDim, coords->batch_first ? 1u : 64u,
                             coords->batch_first ? 64u : 1u};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult result =
      encode(map,
             dtype == HalfType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                          : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             3, const_cast<void*>(base), dims, strides, box, element_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return result == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

template <typename Element>
cudaError_t launch_typed(const HalfArgs& a,
                         const LaunchConfig& cfg,
                         const SplitPlan& plan,
                         cudaStream_t stream) {
  auto* kernel = causal_attention_kernel<Element>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(cfg.smem_bytes));
  if (err != cudaSuccess) return err;
  const int64_t C = a.num_heads * kHeadDim;
  CUtensorMap maps[3];
  RowCoords coords[3];
  const void* bases[3] = {a.q, a.k, a.v};
  const int64_t row_strides[3] = {a.q_row_stride, a.k_row_stride, a.v_row_stride};
  const int64_t batch_strides[3] = {a.q_batch_stride, a.k_batch_stride, a.v_batch_stride};
  for (int x = 0; x < 3; ++x) {
    err = make_tensor_map(&maps[x], &coords[x], bases[x], a.dtype, a.batch, a.seq_len, C,
                          row_strides[x], batch_strides[x]);
    if (err != cudaSuccess) return err;
  }
  // log2(e) / sqrt(d): the kernel works in powers of 2.
  const float c = 1.4426950408889634f / sqrtf(static_cast<float>(kHeadDim));
  float* partial = static_cast<float*>(a.workspace);
  if (plan.max_splits > 1 && partial == nullptr) return cudaErrorInvalidValue;
  const int T = static_cast<int>(a.seq_len), H = static_cast<int>(a.num_heads);
  auto* out = static_cast<Element*>(a.out);
  kernel<<<cfg.grid, cfg.block, cfg.smem_bytes, stream>>>(
      maps[0], maps[1], maps[2], coords[0], coords[1], coords[2], out, T, H, c,
      plan.tiles_per_split, plan.max_splits, partial);
  err = cudaGetLastError();
  if (err != cudaSuccess || plan.max_splits == 1) return err;
  const dim3 merge_grid(cfg.grid.x, plan.row_blocks);
  merge_splits<Element, kHeadDim, kTiles.B_r><<<merge_grid, kMergeThreads, 0, stream>>>(
      partial, out, T, H, plan.key_tiles, plan.tiles_per_split, plan.max_splits);
  return cudaGetLastError();
}

}  // namespace

// Any row and batch stride, as long as rows stay 16-byte aligned (the TMA's rule for global
// addresses and strides): the glue checks the pointers and strides. 16-bit inputs.
Requirements requirements() {
  return {/*strided_inputs=*/true, /*alignment_bytes=*/16, /*half_precision=*/true};
}

// The partial results of split row blocks: one slot per block of the grid. Nothing when no
// row block is split.
size_t workspace_bytes(const HalfArgs& a) {
  DeviceLimits limits;
  if (query_limits(a.device, &limits) != cudaSuccess) return 0;  // launch() reports it
  const SplitPlan plan = plan_splits(a, limits);
  if (plan.max_splits == 1) return 0;
  return sizeof(float) * kPartialFloats * static_cast<size_t>(a.batch * a.num_heads) *
         plan.row_blocks * plan.max_splits;
}

LaunchConfig launch_config(const HalfArgs& a, const DeviceLimits& limits) {
  const SplitPlan plan = plan_splits(a, limits);
  return {dim3(static_cast<unsigned>(a.batch * a.num_heads), plan.row_blocks * plan.max_splits),
          dim3(kThreads), smem_bytes(kTiles)};
}

cudaError_t launch(const HalfArgs& a, cudaStream_t stream) {
  DeviceLimits limits;
  const cudaError_t err = query_limits(a.device, &limits);
  if (err != cudaSuccess) return err;
  const LaunchConfig cfg = launch_config(a, limits);
  if (cfg.smem_bytes > static_cast<size_t>(limits.smem_per_block_optin))
    return cudaErrorInvalidConfiguration;
  const SplitPlan plan = plan_splits(a, limits);
  return a.dtype == HalfType::kBFloat16 ? launch_typed<__nv_bfloat16>(a, cfg, plan, stream)
                                        : launch_typed<__half>(a, cfg, plan, stream);
}

}  // namespace causal_attention
