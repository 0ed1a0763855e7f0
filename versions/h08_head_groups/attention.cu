// Half-precision version 8: half-precision version 7 with the heads in groups sized to the L2
// cache, each group's blocks longest-first.
//
// h07 numbered its blocks head-major, so a head's K and V came from DRAM about once (ncu at
// B=8, T=4096: 151 MB read instead of h04's 898). But h04's order had a second virtue: it
// was longest-first across the whole grid, and the hardware's greedy hand-out of
// longest-first blocks balanced the SMs. Head-major, the next head's longest row block waits
// behind the current head's short ones: 46% slower at B=1, T=4096, and at B=8 the
// imbalance ate the memory's gain (experiments/tools/persistent_schedule.py models both).
//
// Here the heads go in groups of heads_per_group(T): as many as keep two groups' K and V
// (256 T bytes a head) within 32 MB of the 50 MB L2: 16 heads at T=4096 (GPT-2's 12 heads at
// B=1 form one group up to T=5461). Inside a group the blocks keep h04's order among the
// group's heads: the longest row block of each, then the next longest. Block k of the
// one-dimensional grid belongs to group k / (heads_per_group x T_r x splits); the last group
// may hold fewer heads. With one group (B H <= heads_per_group) this is h04's order exactly.
//
// Nothing else changes: h04's kernel, and the partial results in h04's slots (head x (T_r x
// splits) + slot), so the merge is h04's.
#include "../common/attention_launch.h"

#include <cuda.h>  // CUtensorMap and its enums (types only: the driver is reached at run time)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error \
    "half-precision version 2 uses wgmma, which exists only in the arch-specific target sm_90a (compute capability 9.0)"
#endif

namespace causal_attention {
namespace {

constexpr int kWarpgroups = 3;  // consumers of every tile, 64 rows each
constexpr int kWarpgroupThreads = 128;  // 4 warps issue one wgmma together
constexpr int kConsumerThreads = kWarpgroups * kWarpgroupThreads;
constexpr int kThreads = kConsumerThreads + kWarpgroupThreads;  // and the producer warpgroup
// Registers per thread after setmaxnreg: the producer's and the consumers' (multiples of 8).
constexpr int kProducerRegisters = 24;
constexpr int kConsumerRegisters = 160;
constexpr int kLanes = 32;
constexpr int kMmaM = 16;  // rows of one warp's part of a wgmma ...
constexpr int kMmaN = 8;  // ... columns of one accumulator slice ...
constexpr int kMmaK = 16;  // ... and the k of one 16-bit wgmma
constexpr int kRowLanes = 4;  // lanes holding one row of D (the same g)

struct Tiles {
  int B_r;  // query rows per tile
  int B_c;  // key/value rows per tile
};

constexpr int kWarpgroupRows = 64;  // the m of every wgmma
constexpr Tiles kTiles = {/*B_r=*/kWarpgroupRows * kWarpgroups, /*B_c=*/128};
static_assert(kTiles.B_c == 128 && kTiles.B_r == 192 && kHeadDim == 64,
              "m64n128k16 wgmma for S (128 keys), m64n64k16 for P V (d = 64); 3 x 64 rows");
// Each warpgroup's 64 rows lie inside one key tile (64 divides B_c), and a block's rows span
// at most one more tile than its first warpgroup's: d_2 = d_0 + 1.
static_assert(kTiles.B_c % kWarpgroupRows == 0 && kTiles.B_r - kWarpgroupRows == kTiles.B_c,
              "the diagonal tiles of a block's warpgroups are d_0 and d_0 + 1");
constexpr int kSlicesS = kTiles.B_c / kMmaN;  // 8-column slices of S_ij
constexpr int kSlicesO = kHeadDim / kMmaN;  // 8-column slices of O_i
constexpr int kStepsQK = kHeadDim / kMmaK;  // k steps of Q K^T (over d)
constexpr int kStepsPV = kTiles.B_c / kMmaK;  // k steps of P V (over the keys)

constexpr int kStages = 4;  // K/V tiles in flight: the producer runs up to 4 tiles ahead

// Rows of 64 16-bit values, 128 bytes; 8 rows make the swizzle's 1,024-byte atom.
constexpr int kRowBytes = kHeadDim * 2;
constexpr int kAtomBytes = 8 * kRowBytes;
constexpr int kQTileBytes = kWarpgroupRows * kRowBytes;  // one warpgroup's rows of Q_i: 8 KB
constexpr int kKVTileBytes = kTiles.B_c * kRowBytes;  // K_j or V_j: 16 KB

// Shared memory, every tile 1,024-byte aligned for the swizzle: Q_i (two 8 KB halves, one
// per warpgroup), kStages x (K_j, V_j), then the mbarriers; 1 KB of slack to align the
// start: 156,744 bytes, over the 48 KB default (the launcher opts in).
// Per stage a "tile landed" and a "tile released" barrier, and one for Q_i.
constexpr int kBarriers = 2 * kStages + 1;
size_t smem_bytes(Tiles) {
  return kAtomBytes + static_cast<size_t>(kWarpgroups) * kQTileBytes +
         static_cast<size_t>(2 * kStages) * kKVTileBytes + kBarriers * sizeof(uint64_t);
}

__host__ __device__ int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Thread blocks one SM holds at once: one (512 threads of 128 registers at launch, and 153 KB
// of shared memory). The split plan counts on one.
constexpr int kBlocksPerSm = 1;

// Warpgroup w's diagonal key tile in row block i: the tile holding its 64 rows.
__host__ __device__ int diagonal_tile(int i, int w) {
  return (i * kTiles.B_r + w * kWarpgroupRows) / kTiles.B_c;
}
// The key tiles row block i walks: up to its last warpgroup's diagonal, within T.
__host__ __device__ int tiles_of_row_block(int i, int T_c) {
  return min(diagonal_tile(i, kWarpgroups - 1) + 1, T_c);
}

// How the keys are split (h01's plan). Row block i's n_i tiles are cut, from its last tile
// back, into splits of at most L >= 2 tiles: split s holds [n_i - (s + 1) L, n_i - s L).
struct SplitPlan {
  int row_blocks;  // T_r
  int key_tiles;  // T_c
  int tiles_per_split;  // L
  int max_splits;  // splits of the longest row block
};

SplitPlan plan_splits(const HalfArgs& a, const DeviceLimits& limits) {
  const int T = static_cast<int>(a.seq_len);
  const int T_r = ceil_div(T, kTiles.B_r), T_c = ceil_div(T, kTiles.B_c);
  const int64_t heads = a.batch * a.num_heads;
  const int64_t slots = static_cast<int64_t>(limits.sm_count) * kBlocksPerSm;
  int64_t work = 0;  // key tiles of every row block of one (batch, head)
  for (int i = 0; i < T_r; ++i) work += tiles_of_row_block(i, T_c);
  const int longest = tiles_of_row_block(T_r - 1, T_c);
  // At least 2, so that a row block's first split reaches its first warpgroup's diagonal.
  const int64_t L = std::max<int64_t>((heads * work + slots - 1) / slots, 2);
  if (L >= longest) return {T_r, T_c, longest, 1};
  return {T_r, T_c, static_cast<int>(L), ceil_div(longest, static_cast<int>(L))};
}

// Heads per group: a head's K and V take 2 x T x 64 x 2 = 256 T bytes, and two groups (the one
// finishing and the one starting) should fit in 32 MB of the 50 MB L2: 16 heads at T = 4096.
constexpr int64_t kGroupBytes = 16 << 20;
int heads_per_group(int64_t T) {
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(kGroupBytes / (256 * T), 1 << 20)));
}

// Floats of partial results per split slot: O (B_r x d) and (c m, l) per row.
constexpr size_t kPartialFloats = static_cast<size_t>(kTiles.B_r) * (kHeadDim + 2);

// The two 16-bit types: how a pair of floats becomes one register of two values, and the
// wgmma instructions that multiply them (float32 accumulators): S (m64n128k16, A and B in
// shared memory, both K-major; D = or +=, kAccumulate) and P V (m64n64k16, A from
// registers, B N-major in shared memory, imm-trans-b = 1; D +=).
template <typename Element>
struct HalfOps;

// The accumulator operands of a wgmma, d[slice][element] in the D-fragment order.
#define ATTN_D128                                                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
  "%56, %57, %58, %59, %60, %61, %62, %63}"
#define ATTN_D64                                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define ATTN_D_OPERANDS_16(d)                                                                     \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),       \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),   \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),   \
      "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),   \
      "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),   \
      "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),   \
      "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), \
      "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]),             \
      "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]),             \
      "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]),             \
      "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]),             \
      "+f"(d[15][2]), "+f"(d[15][3])
#define ATTN_D_OPERANDS_8(d)                                                                    \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),     \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), \
      "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
      "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), \
      "+f"(d[7][2]), "+f"(d[7][3])

#define ATTN_HALF_OPS(TYPE, PTX_TYPE, PACK)                                                      \
  template <>                                                                                    \
  struct HalfOps<TYPE> {                                                                         \
    __device__ static uint32_t pack(float lo, float hi) { return PACK; }                         \
    template <int kAccumulate>                                                                   \
    __device__ static void wgmma_s(float (&d)[16][4], uint64_t a_desc, uint64_t b_desc) {        \
      asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX_TYPE "." PTX_TYPE          \
                   " " ATTN_D128 ", %64, %65, %66, 1, 1, 0, 0;\n"                                \
                   : ATTN_D_OPERANDS_16(d)                                                       \
                   : "l"(a_desc), "l"(b_desc), "n"(kAccumulate)                                  \
                   : "memory");                                                                  \
    }                                                                                            \
    __device__ static void wgmma_pv(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b_desc) { \
      asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32." PTX_TYPE "." PTX_TYPE           \
                   " " ATTN_D64 ", {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"                     \
                   : ATTN_D_OPERANDS_8(d)                                                        \
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
#undef ATTN_D128
#undef ATTN_D64
#undef ATTN_D_OPERANDS_16
#undef ATTN_D_OPERANDS_8

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
// Waits until all but the most recent committed group have completed.
__device__ __forceinline__ void wgmma_wait_all_but_one() {
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}
// Keeps the compiler from moving reads or writes of these registers across the wgmma that
// own them (the asm of the wgmma itself names them only at its issue).
template <int kSlices>
__device__ __forceinline__ void pin(float (&r)[kSlices][4]) {
#pragma unroll
  for (int n = 0; n < kSlices; ++n)
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

// A plain arrival (the consumers' release of a stage).
__device__ __forceinline__ void barrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(bar)) : "memory");
}

// Named barriers (ids 1-3; 0 is __syncthreads) pass the turn at the tensor cores round the
// three consumers: warpgroup w waits on barrier 1 + w until warpgroup w - 1 (mod 3), which
// arrives there without waiting, has issued its products. Each barrier completes with the
// 128 threads that wait and the 128 that arrive.
constexpr int kTurnThreads = 2 * kWarpgroupThreads;
__device__ __forceinline__ void wait_turn(int wg) {
  if (wg == 0)
    asm volatile("bar.sync 1, %0;\n" ::"n"(kTurnThreads) : "memory");
  else if (wg == 1)
    asm volatile("bar.sync 2, %0;\n" ::"n"(kTurnThreads) : "memory");
  else
    asm volatile("bar.sync 3, %0;\n" ::"n"(kTurnThreads) : "memory");
}
__device__ __forceinline__ void pass_turn(int wg) {
  if (wg == 0)
    asm volatile("bar.arrive 2, %0;\n" ::"n"(kTurnThreads) : "memory");
  else if (wg == 1)
    asm volatile("bar.arrive 3, %0;\n" ::"n"(kTurnThreads) : "memory");
  else
    asm volatile("bar.arrive 1, %0;\n" ::"n"(kTurnThreads) : "memory");
}

// Moves registers between warpgroups (sm_90a): the whole warpgroup executes it.
template <int kRegisters>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// Where the TMA finds rows: the tensor maps' second and third coordinates are (row, batch),
// or (batch, row) when the batch stride is the smaller one (a (T, B, C) tensor seen as
// (B, T, C)); dims are ordered by stride.
struct RowCoords {
  int batch_first;  // 1: coordinates (c, b, t); 0: (c, t, b)
};

// One box of q (64 rows), k or v (128 rows): columns c .. c + 63 (head h's d), rows t ..
// of batch item b, into shared memory at dst; completion counted on bar.
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

// Reduces kParts partial values of each of the lane's two rows to one, pairwise: the
// partials are independent chains, so the 32 values of a row take 32 / kParts + log2(kParts)
// dependent steps instead of 32 (ncu on the serial form: warps stalled on "wait", the
// fixed latency of the previous FMNMX or FADD, 1.8 cycles per issued instruction).
constexpr int kParts = 8;
template <typename Op>
__device__ __forceinline__ float tree(float (&part)[kParts], Op op) {
#pragma unroll
  for (int width = kParts / 2; width > 0; width /= 2)
#pragma unroll
    for (int x = 0; x < width; ++x) part[x] = op(part[x], part[x + width]);
  return part[0];
}

// The online softmax for this lane's two rows (h01's, with the reductions as trees): rows g
// and g + 8 of the warp, absolute rows row_g and row_g + 8, of the tile starting at column
// col0; masks if the tile crosses the diagonal or T's end (kMasked), turns s into
// P_ij = 2^(c s - c m_new) in place, updates m and this lane's part of l; alpha gets each
// row's 2^(c m_old - c m_new). Element e of slice n sits in row g + 8 (e / 2), column
// 8n + 2t + e % 2; partial x of a row collects slices n with (2n + e % 2) % kParts == x.
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
  float part[2][kParts];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int x = 0; x < kParts; ++x) part[h][x] = -INFINITY;
#pragma unroll
  for (int n = 0; n < kSlicesS; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (kMasked) {
        const int row = row_g + 8 * (e / 2), col = col0 + kMmaN * n + 2 * t + e % 2;
        if (!(col <= row && col < T)) s[n][e] = -INFINITY;
      }
      float& p = part[e / 2][(2 * n + e % 2) % kParts];
      p = fmaxf(p, s[n][e]);
    }
  const auto max_op = [](float x, float y) { return fmaxf(x, y); };
  float neg_cm[2];  // -c m_new per row: the FFMA's addend
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // Every row has an unmasked entry in the first tile it meets (its own column, or for
    // rows past T column 0), and m never decreases, so m_new is finite.
    const float m_new = fmaxf(m[h], row_max(tree(part[h], max_op)));
    alpha[h] = exp2f(c * (m[h] - m_new));  // rescales the old O and l; 0 on the first tile
    m[h] = m_new;
    neg_cm[h] = -c * m_new;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int x = 0; x < kParts; ++x) part[h][x] = 0.0f;
#pragma unroll
  for (int n = 0; n < kSlicesS; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = exp2f(fmaf(c, s[n][e], neg_cm[e / 2]));  // 2^-inf = 0 for masked entries
      part[e / 2][(2 * n + e % 2) % kParts] += s[n][e];
    }
  const auto add_op = [](float x, float y) { return x + y; };
#pragma unroll
  for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + tree(part[h], add_op);
}

// P_t in 16 bits, as the A fragments of the 4 k steps of P V (h01's C-to-A reuse).
template <typename Ops>
__device__ __forceinline__ void pack_p(uint32_t (&p_frag)[kStepsPV][4],
                                       const float (&s)[kSlicesS][4]) {
#pragma unroll
  for (int kp = 0; kp < kStepsPV; ++kp) {
    p_frag[kp][0] = Ops::pack(s[2 * kp][0], s[2 * kp][1]);
    p_frag[kp][1] = Ops::pack(s[2 * kp][2], s[2 * kp][3]);
    p_frag[kp][2] = Ops::pack(s[2 * kp + 1][0], s[2 * kp + 1][1]);
    p_frag[kp][3] = Ops::pack(s[2 * kp + 1][2], s[2 * kp + 1][3]);
  }
}

// __launch_bounds__ with a block count gives the kernel a register cap at entry (168),
// which setmaxnreg then redistributes.
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
                            int row_blocks,
                            int group_heads,
                            int tiles_per_split,
                            int max_splits,
                            float* __restrict__ partial) {
  using Ops = HalfOps<Element>;
  constexpr int d = kHeadDim, B_r = kTiles.B_r, B_c = kTiles.B_c;
  extern __shared__ __align__(128) char smem_raw[];
  // The swizzle repeats every 1,024 bytes and the descriptors assume tiles start on it.
  char* smem = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem_raw) + kAtomBytes - 1) &
                                       ~static_cast<uintptr_t>(kAtomBytes - 1));
  char* Q_s = smem;  // [2][64][d]: each warpgroup's rows
  char* K_buf = Q_s + kWarpgroups * kQTileBytes;  // [kStages][B_c][d]
  char* V_buf = K_buf + kStages * kKVTileBytes;  // [kStages][B_c][d]
  uint64_t* landed = reinterpret_cast<uint64_t*>(V_buf + kStages * kKVTileBytes);  // [kStages]
  uint64_t* released = landed + kStages;  // [kStages]
  uint64_t* q_landed = released + kStages;

  const int C = H * d;
  // One block per (batch, head) x row block x split, in a 1-D grid of groups of heads (see
  // the top of this file). y = (T_r - 1 - i) * max_splits + split numbers a head's row blocks
  // longest-first, the splits of one row block next to each other.
  const int T_c = ceil_div(T, B_c);
  // Group `group` holds in_group heads (group_heads, or fewer in the last); its blocks run
  // y-major, so block `local` of the group is slot y = local / in_group of its head
  // local % in_group: every head's longest row block first.
  const int per_head = row_blocks * max_splits;
  const int heads = gridDim.x / per_head;
  const int group = blockIdx.x / (group_heads * per_head);
  const int in_group = min(group_heads, heads - group * group_heads);
  const int local = blockIdx.x - group * group_heads * per_head;
  const int bh = group * group_heads + local % in_group, y = local / in_group;
  const int b = bh / H;
  const int h = bh % H;
  const int i = row_blocks - 1 - y / max_splits;  // query tile
  const int split = y % max_splits;
  const int n_i = tiles_of_row_block(i, T_c);
  const int splits = ceil_div(n_i, tiles_per_split);
  if (split >= splits) return;  // a slot this row block does not use: the whole block leaves
  // This split's key tiles: [j_begin, j_begin + n), counted from the row block's last tile
  // back; split 0 holds the diagonal tiles.
  const int j_end = n_i - split * tiles_per_split;
  const int j_begin = max(0, j_end - tiles_per_split);
  const int n = j_end - j_begin;
  const int row0 = i * B_r;

  if (threadIdx.x == 0) {
    for (int st = 0; st < kStages; ++st) {
      barrier_init(&landed[st], 1);  // the producer's arrival (and the bytes)
      barrier_init(&released[st], kConsumerThreads);  // every consumer thread arrives
    }
    barrier_init(q_landed, 1);
    barrier_init_fence();
  }
  // Guards the barriers: initialised before anyone uses them. The last block-wide barrier:
  // from here on the producer and the consumers go their own ways (one branch each, as
  // setmaxnreg wants).
  __syncthreads();

  if (threadIdx.x >= kConsumerThreads) {
    // The producer warpgroup; one thread issues everything. Tile t goes into stage
    // t % kStages, its round r = t / kStages; from the second round on, the stage's previous
    // tile must have been released by both warpgroups (phase r - 1 of `released` completed).
    release_registers<kProducerRegisters>();
    if (threadIdx.x == kConsumerThreads) {
      barrier_expect_bytes(q_landed, kWarpgroups * kQTileBytes);
      for (int w = 0; w < kWarpgroups; ++w)
        tma_load_tile(Q_s + w * kQTileBytes, q_map, h * d, row0 + w * kWarpgroupRows, b, q_coords,
                      q_landed);
      for (int t = 0; t < n; ++t) {
        const int st = t % kStages, round = t / kStages;
        if (round > 0) barrier_wait(&released[st], (round - 1) % 2);
        barrier_expect_bytes(&landed[st], 2 * kKVTileBytes);
        const int row = (j_begin + t) * B_c;
        tma_load_tile(K_buf + st * kKVTileBytes, k_map, h * d, row, b, k_coords, &landed[st]);
        tma_load_tile(V_buf + st * kKVTileBytes, v_map, h * d, row, b, v_coords, &landed[st]);
      }
    }
    return;  // the copies in flight complete on their barriers without this warpgroup
  }
  claim_registers<kConsumerRegisters>();

  // Which 64 rows (0..2); read through a shuffle from lane 0 so that the compiler knows it
  // is the same in every lane of a warp (its branches on it need no reconvergence).
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / kWarpgroupThreads, 0);
  const int warp = threadIdx.x % kWarpgroupThreads / kLanes;  // within the warpgroup
  const int lane = threadIdx.x % kLanes;
  const int g = lane / kRowLanes, t4 = lane % kRowLanes;

  // This lane's rows (g and g + 8 of its warp of its warpgroup), their statistics (m equal
  // across the row's 4 lanes, l this lane's part) and its part of O_i, in D-fragment layout.
  const int row_g = row0 + wg * kWarpgroupRows + kMmaM * warp + g;
  float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.0f, 0.0f};
  float o[kSlicesO][4] = {};
  float s[kSlicesS][4];  // S_t, then P_t in float32, in place
  uint32_t p_frag[kStepsPV][4];  // P_t in 16 bits: the A operand of the next step's product
  const uint32_t q_smem = smem_address(Q_s + wg * kQTileBytes);
  // The tiles this warpgroup computes: all n, or n - 1 when the last lies right of its
  // diagonal (at least one: split 0 reaches d_0, the others end before it).
  const int diagonal = diagonal_tile(i, wg);
  const int computed = min(j_end, diagonal + 1) - j_begin;

  const auto wait_landed = [&](int t) { barrier_wait(&landed[t % kStages], (t / kStages) % 2); };
  // Every consumer thread arrives once it (and so its warpgroup: the wgmma that read the
  // stage completed for all of it) is done with the stage; a single elected thread per
  // warpgroup would cost each warp a divergent branch and a reconvergence per tile (ncu:
  // 5% of h04's stall samples on WARPSYNC). A warpgroup that skips a tile still waits for it
  // to land first, so that its arrivals count in that tile's phase.
  const auto release = [&](int t) { barrier_arrive(&released[t % kStages]); };
  // S_t = Q_i K_j^T, k step kq reading columns 16 kq .. of Q's and K's rows, 32 bytes into
  // each (swizzled) row; committed as one group.
  const auto issue_s = [&](int t) {
    const uint32_t k_smem = smem_address(K_buf + (t % kStages) * kKVTileBytes);
    Ops::template wgmma_s<0>(s, operand_descriptor(q_smem), operand_descriptor(k_smem));
#pragma unroll
    for (int kq = 1; kq < kStepsQK; ++kq)
      Ops::template wgmma_s<1>(s, operand_descriptor(q_smem + 32 * kq),
                               operand_descriptor(k_smem + 32 * kq));
    wgmma_commit();
  };
  // O_i += P_t V_j: B = V_j N-major, k step kp's 16 keys two atoms (2,048 bytes) further;
  // committed as one group.
  const auto issue_pv = [&](int t) {
    const uint32_t v_smem = smem_address(V_buf + (t % kStages) * kKVTileBytes);
#pragma unroll
    for (int kp = 0; kp < kStepsPV; ++kp)
      Ops::wgmma_pv(o, p_frag[kp], operand_descriptor(v_smem + 2 * kAtomBytes * kp));
    wgmma_commit();
  };
  // The online softmax of S_t in place; the warpgroup's diagonal tile and the tile holding
  // T's end are masked, every earlier tile is entirely visible.
  const auto softmax = [&](int t, float(&alpha)[2]) {
    const int j = j_begin + t;
    if (j == diagonal || j == T_c - 1)
      softmax_rows<true>(s, row_g, j * B_c, T, c, m_i, l_i, alpha);
    else
      softmax_rows<false>(s, row_g, j * B_c, T, c, m_i, l_i, alpha);
  };

  // O *= alpha, row by row (alpha of the softmax before the product that adds to O next).
  const auto rescale = [&](const float(&scale)[2]) {
    pin(o);
#pragma unroll
    for (int nn = 0; nn < kSlicesO; ++nn)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[nn][e] *= scale[e / 2];
    pin(o);
  };

  // The first turn is the first warpgroup's: the last warpgroup passes it before its first
  // wait. Each warpgroup takes n + 1 turns; the last warpgroup's last pass would go to nobody.
  const bool last_wg = wg == kWarpgroups - 1;
  if (last_wg) pass_turn(wg);
  barrier_wait(q_landed, 0);

  // Step 0: S_0 alone.
  wait_landed(0);
  wait_turn(wg);
  wgmma_fence();
  issue_s(0);
  pass_turn(wg);
  float alpha[2];
  wgmma_wait_all();
  pin(s);
  softmax(0, alpha);
  pack_p<Ops>(p_frag, s);
  // Steps 1 .. n - 1: S_t and P_{t-1} V_{t-1} issued together; the softmax of S_t runs while
  // the product does. (alpha_0 rescales an O that is still 0.)
  for (int t = 1; t < computed; ++t) {
    wait_landed(t);
    wait_turn(wg);
    wgmma_fence();
    issue_s(t);
    rescale(alpha);  // by alpha_{t-1}, while S_t runs, before P_{t-1} V_{t-1} adds to O
    wgmma_fence();
    issue_pv(t - 1);
    pass_turn(wg);
    wgmma_wait_all_but_one();  // S_t is complete
    pin(s);
    softmax(t, alpha);
    wgmma_wait_all();  // P_{t-1} V_{t-1} is complete: stage t - 1 and p_frag are free
    pin(o);
    release(t - 1);
    pack_p<Ops>(p_frag, s);
  }
  // The last product, P V of the last tile computed. The last warpgroup computes every tile,
  // so this is its last turn.
  wait_turn(wg);
  rescale(alpha);
  wgmma_fence();
  issue_pv(computed - 1);
  if (!last_wg) pass_turn(wg);
  wgmma_wait_all();
  pin(o);
  release(computed - 1);
  if (computed < n) {
    // The tile right of this warpgroup's diagonal: released once it has landed, and its turn
    // taken, so that releases and turns stay balanced.
    wait_landed(n - 1);
    release(n - 1);
    wait_turn(wg);
    pass_turn(wg);
  }

  const int rows = min(B_r, T - row0);  // the last tile may be partial
  if (splits == 1) {
    // O_i = diag(l)^-1 O_i, rounded once, straight from registers to global memory: lane
    // (g, t4) stores columns 8n + 2 t4, 8n + 2 t4 + 1 of rows g and g + 8, a pair each.
    Element* o_bh = out + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * d;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float inv_l = 1.0f / row_sum(l_i[hh]);  // all lanes: the shuffles need them
      const int row = row_g + 8 * hh;
      if (row >= row0 + rows) continue;
      Element* o_row = o_bh + static_cast<size_t>(row) * C;
#pragma unroll
      for (int nn = 0; nn < kSlicesO; ++nn)
        *reinterpret_cast<uint32_t*>(o_row + kMmaN * nn + 2 * t4) =
            Ops::pack(o[nn][2 * hh] * inv_l, o[nn][2 * hh + 1] * inv_l);
    }
    return;
  }
  // A partial result for merge_splits: unnormalised O in float32, then (c m, l) per row, in
  // this split's slot of the workspace (rows past T included: the merge skips them).
  float* slot = partial + (static_cast<size_t>(bh) * per_head + y) * kPartialFloats;
  float* stats = slot + B_r * d;  // [B_r][2]: c m, l
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const float l = row_sum(l_i[hh]);  // all lanes: the shuffles need them
    const int r = wg * kWarpgroupRows + kMmaM * warp + g + 8 * hh;  // row within the tile
#pragma unroll
    for (int nn = 0; nn < kSlicesO; ++nn)
      *reinterpret_cast<float2*>(slot + r * d + kMmaN * nn + 2 * t4) =
          make_float2(o[nn][2 * hh], o[nn][2 * hh + 1]);
    if (t4 == 0) *reinterpret_cast<float2*>(stats + 2 * r) = make_float2(c * m_i[hh], l);
  }
}

constexpr int kMergeThreads = 768;  // 4 per row of a 192-row tile, 16 columns each

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

  // The kernel's block for head x = blockIdx.x and slot y = blockIdx.y * max_splits + split
  // left its partial result in slot x * (T_r * max_splits) + y (its own block index).
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
// strides (elements), boxes of 64 columns x box_rows rows, 128-byte swizzle, rows past T
// read as zeros. Dimensions 1 and 2 go in order of increasing stride (RowCoords says which is
// which); a stride that no element uses (B = 1, T = 1) is replaced by a harmless one.
cudaError_t make_tensor_map(CUtensorMap* map,
                            RowCoords* coords,
                            const void* base,
                            HalfType dtype,
                            int64_t B,
                            int64_t T,
                            int64_t C,
                            int64_t row_stride,
                            int64_t batch_stride,
                            unsigned box_rows) {
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
  const cuuint32_t box[3] = {kHeadDim, coords->batch_first ? 1u : box_rows,
                             coords->batch_first ? box_rows : 1u};
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
  const unsigned box_rows[3] = {kWarpgroupRows, kTiles.B_c,
                                kTiles.B_c};  // Q per warpgroup; K, V per tile
  for (int x = 0; x < 3; ++x) {
    err = make_tensor_map(&maps[x], &coords[x], bases[x], a.dtype, a.batch, a.seq_len, C,
                          row_strides[x], batch_strides[x], box_rows[x]);
    if (err != cudaSuccess) return err;
  }
  // log2(e) / sqrt(d): the kernel works in powers of 2.
  const float c = 1.4426950408889634f / sqrtf(static_cast<float>(kHeadDim));
  float* partial = static_cast<float*>(a.workspace);
  if (plan.max_splits > 1 && partial == nullptr) return cudaErrorInvalidValue;
  const int T = static_cast<int>(a.seq_len), H = static_cast<int>(a.num_heads);
  auto* out = static_cast<Element*>(a.out);
  kernel<<<cfg.grid, cfg.block, cfg.smem_bytes, stream>>>(
      maps[0], maps[1], maps[2], coords[0], coords[1], coords[2], out, T, H, c, plan.row_blocks,
      heads_per_group(T), plan.tiles_per_split, plan.max_splits, partial);
  err = cudaGetLastError();
  if (err != cudaSuccess || plan.max_splits == 1) return err;
  const dim3 merge_grid(static_cast<unsigned>(a.batch * a.num_heads), plan.row_blocks);
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

// Blocks of the one-dimensional grid: every (batch, head) x row block x split. The kernel
// decodes its block index as an int.
int64_t grid_blocks(const HalfArgs& a, const SplitPlan& plan) {
  return a.batch * a.num_heads * plan.row_blocks * plan.max_splits;
}

LaunchConfig launch_config(const HalfArgs& a, const DeviceLimits& limits) {
  const SplitPlan plan = plan_splits(a, limits);
  return {dim3(static_cast<unsigned>(std::min<int64_t>(grid_blocks(a, plan), INT32_MAX))),
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
  if (grid_blocks(a, plan) > INT32_MAX) return cudaErrorInvalidConfiguration;  // 2^31 - 1 blocks
  return a.dtype == HalfType::kBFloat16 ? launch_typed<__nv_bfloat16>(a, cfg, plan, stream)
                                        : launch_typed<__half>(a, cfg, plan, stream);
}

}  // namespace causal_attention
