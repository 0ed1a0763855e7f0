// Version 19: version 18 with its work split between warpgroups. A producer warpgroup
// loads and splits each K/V tile once for two consumer warpgroups, which compute a query
// tile of B_r = 128 rows (64 each) and take turns at the tensor cores.
//
// Version 18 is one warpgroup per block, and each block runs its tile's steps in a row:
// copy, split K, S = Q K^T, split V, softmax, P V. Two blocks per SM overlap those chains
// only in part (ncu at B=8, T=4096: tensor pipe 56% busy). Its shared memory is the
// tighter unit: every block splits every K_j and V_j it reads, so each tile is split once
// per row block of 64 rows (experiments/tools/split_once_model.py). This version changes who
// does what:
//   - the producer warpgroup (128 threads) issues the cp.async copies of raw K_j, V_j two
//     tiles ahead, splits each landed tile into K_j's and V_j^T's TF32 hi and lo parts
//     (version 18's split passes, unchanged) into one of two stages, and announces it on
//     the stage's "ready" mbarrier;
//   - two consumer warpgroups compute S, the softmax and P V of 64 query rows each, both
//     from the same split stage, so each tile is split once per 128 rows: half of version
//     18's split work per product;
//   - the consumers issue their products in turns (two named barriers): one issues S, the
//     other its own S, then the first its P V, ... so that one warpgroup's softmax runs
//     while the other's wgmma keep the tensor cores busy (FlashAttention-3's ping-pong);
//   - setmaxnreg moves registers from the producer (56) to the consumers (224): Q's split
//     fragments stay in registers as in version 18.
// The arithmetic is version 18's (TF32 x 3, float32 accumulation, the same online
// softmax); version 17's split keys and merge kernel carry over for small grids.
//
// Register layouts (PTX ISA, "Register Fragments" of wgmma .m64nNk8), g = lane / 4,
// t = lane % 4, rows of warp w of a warpgroup offset by 16w:
//   A (64 x 8, TF32):   a0 = A[g][t], a1 = A[g + 8][t], a2 = A[g][t + 4], a3 = A[g + 8][t + 4]
//   D (64 x 64, f32):   d[n][0] = D[g][8n + 2t], d[n][1] = D[g][8n + 2t + 1],
//                       d[n][2] = D[g + 8][8n + 2t], d[n][3] = D[g + 8][8n + 2t + 1]
// the same as mma.m16n8k8's per warp, so the softmax and the C-to-A reuse of P are version
// 16's. experiments/tools/wgmma_tf32_probe.cu checks both layouts and the shared-memory one.
//
// Shared-memory operands (B of both products) are K-major: each of the 64 rows (n) holds
// its k values contiguously, in 128-byte rows of 32 TF32 with the 128-byte swizzle: in
// row r the 16-byte chunk c is stored at chunk c ^ (r % 8). 8 rows make a 1,024-byte atom;
// the 64 rows are 8 atoms (8 KB), and the 64 values of k two such 8 KB halves. A k step
// of 8 is the descriptor's start address moved by 32 bytes inside the half.
//
// The scale 1/sqrt(d) and log2(e) are folded into Q once, so P_ij = 2^(S_ij - m).
// O is kept unnormalised, diag(l)^-1 is applied once at the end (or by the merge).
//
// Causal shortcuts: tiles entirely right of a block's last diagonal are never loaded; a
// consumer skips the tile right of its own diagonal; only a consumer's diagonal tile is
// masked; row blocks start longest-first.
#include "../common/attention_launch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error \
    "version 19 uses wgmma and setmaxnreg, which exist only in the arch-specific target sm_90a (compute capability 9.0)"
#endif

namespace causal_attention {
namespace {

constexpr int kLanes = 32;
constexpr int kWarpgroupThreads = 128;  // 4 warps issue one wgmma together
constexpr int kConsumers = 2;           // consumer warpgroups, 64 query rows each
constexpr int kConsumerThreads = kConsumers * kWarpgroupThreads;
constexpr int kThreads = kConsumerThreads + kWarpgroupThreads;  // and the producer warpgroup
// Registers per thread: what __launch_bounds__(kThreads, 1) gives every thread at launch
// (65,536 / 384, rounded down to a multiple of 8), then after setmaxnreg the producer's and
// the consumers'. The consumers can only claim what the producer gave back.
constexpr int kLaunchRegisters = 65536 / kThreads / 8 * 8;  // 168
constexpr int kProducerRegisters = 56;
constexpr int kConsumerRegisters = 224;
static_assert(kConsumerThreads * kConsumerRegisters + kWarpgroupThreads * kProducerRegisters <=
                  kThreads * kLaunchRegisters,
              "setmaxnreg cannot hand out more registers than the block was launched with");
constexpr int kMmaM = 16;     // rows of one warp's part of a wgmma ...
constexpr int kMmaN = 8;      // ... columns of one accumulator slice ...
constexpr int kMmaK = 8;      // ... and the k of one TF32 wgmma
constexpr int kRowLanes = 4;  // lanes holding one row of D (the same g)
constexpr int kWarpgroupRows = kMmaM * kWarpgroupThreads / kLanes;  // 64: the m of every wgmma

struct Tiles {
  int B_r;  // query rows per tile
  int B_c;  // key/value rows per tile
};

constexpr Tiles kTiles = {/*B_r=*/kConsumers * kWarpgroupRows, /*B_c=*/64};
static_assert(kTiles.B_r == 128 && kTiles.B_c == 64 && kHeadDim == 64,
              "one m64n64 wgmma per k step: 64 rows per consumer, 64 keys, d = 64");
// Each consumer's 64 rows lie inside one key tile, consumer w's diagonal tile is the
// block's first plus w, and the block's last consumer reaches its last tile.
static_assert(kWarpgroupRows == kTiles.B_c, "consumer w's diagonal tile is 2 i + w");
constexpr int kSlicesS = kTiles.B_c / kMmaN;  // 8-column slices of S_ij
constexpr int kSlicesO = kHeadDim / kMmaN;    // 8-column slices of O_i
constexpr int kStepsQK = kHeadDim / kMmaK;    // k steps of Q K^T (over d)
constexpr int kStepsPV = kTiles.B_c / kMmaK;  // k steps of P V (over the keys)

// The swizzled operand: 64 rows x 64 k floats in two halves of k (32 each), each half 8
// atoms of 8 rows x 128 bytes.
constexpr int kAtomBytes = 1024;
constexpr int kHalfBytes = 64 * 128;           // 64 rows of one half of k
constexpr int kOperandBytes = 2 * kHalfBytes;  // 16 KB
// Raw tiles as cp.async lands them, 16 KB each. Raw K_j is already in the operand layout
// (rows of keys, d contiguous, swizzled), so its split pass reads and writes one offset.
// Raw V_j keeps V's rows (key, 64 floats of d = 16 chunks of 16 bytes), with chunk q of
// key kappa stored at chunk q ^ raw_v_swizzle(kappa): the transposing split pass then
// reads it without bank conflicts (see there).
constexpr int kRawBytes = kTiles.B_c * kHeadDim * sizeof(float);
static_assert(kRawBytes == kOperandBytes, "raw K_j is stored as an operand");

// A stage holds one split tile: K hi, K lo, V^T hi, V^T lo. Two stages: the producer splits
// tile t + 1 while the consumers compute tile t. Two raw buffers (raw K_j and raw V_j
// each): the copies of tile t + 1 land while tile t is split.
constexpr int kStages = 2;
constexpr int kStageBytes = 4 * kOperandBytes;
constexpr int kRawBuffers = 2;
constexpr int kRawTileBytes = 2 * kRawBytes;
// Per stage a "ready" barrier (the producer's 128 threads arrive once their split stores
// are in place) and a "released" one (the consumers' 256 threads arrive once their wgmma
// have read the stage).
constexpr int kBarriers = 2 * kStages;

// Shared memory: the stages, the raw buffers (all 1,024-byte aligned for the swizzle), the
// mbarriers, and 1 KB to align the start: 197,664 bytes, one block per SM.
size_t smem_bytes(Tiles) {
  return static_cast<size_t>(kStages) * kStageBytes + kRawBuffers * kRawTileBytes +
         kBarriers * sizeof(uint64_t) + kAtomBytes;
}

__host__ __device__ int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Thread blocks one SM holds at once: one (197,664 bytes of shared memory, 384 threads of
// 168 registers at launch). The split plan counts on it.
constexpr int kBlocksPerSm = 1;

// Consumer w's diagonal key tile in row block i: the tile holding its 64 rows.
__host__ __device__ int diagonal_tile(int i, int w) {
  return (i * kTiles.B_r + w * kWarpgroupRows) / kTiles.B_c;
}
// The key tiles row block i walks: up to its last consumer's diagonal, within T.
__host__ __device__ int tiles_of_row_block(int i, int T_c) {
  return min(diagonal_tile(i, kConsumers - 1) + 1, T_c);
}

// How the keys are split. Row block i's n_i tiles are cut, from its last tile back, into
// splits of at most L >= 2 tiles: split s holds [n_i - (s + 1) L, n_i - s L), so split 0
// holds the diagonal tiles. The grid has max_splits slots per row block; blocks in slots a
// row block does not use return at once.
struct SplitPlan {
  int row_blocks;       // T_r
  int key_tiles;        // T_c
  int tiles_per_split;  // L
  int max_splits;       // splits of the longest row block
};

// The causal work, the key tiles of every row block of every (batch, head), spread evenly
// over every SM's block slots would give each slot L tiles. When the longest row block
// walks more than that, the row blocks are cut into splits of at most L tiles, so that no
// block runs much longer than the average slot's share. L is at least 2, so that split 0
// reaches its first consumer's diagonal (the tile before the last). (At B = 1: T = 512
// gives L = 2, T = 2048 gives L = 20; from T = 4096, and at B = 8, no split.)
SplitPlan plan_splits(const Args& a, const DeviceLimits& limits) {
  const int T = static_cast<int>(a.seq_len);
  const int T_r = ceil_div(T, kTiles.B_r), T_c = ceil_div(T, kTiles.B_c);
  const int64_t heads = a.batch * a.num_heads;
  const int64_t slots = static_cast<int64_t>(limits.sm_count) * kBlocksPerSm;
  int64_t work = 0;  // key tiles of every row block of one (batch, head)
  for (int i = 0; i < T_r; ++i) work += tiles_of_row_block(i, T_c);
  const int longest = tiles_of_row_block(T_r - 1, T_c);
  const int64_t L = std::max<int64_t>((heads * work + slots - 1) / slots, 2);
  if (L >= longest) return {T_r, T_c, longest, 1};
  return {T_r, T_c, static_cast<int>(L), ceil_div(longest, static_cast<int>(L))};
}

// Floats of partial results per split slot: O (B_r x d) and (m, l) per row.
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

// Waits until every copy this thread has committed, or all but its last group, has landed
// in shared memory (its own copies only: a barrier then makes everyone's visible).
__device__ void copy_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
__device__ void copy_async_wait_all_but_one() {
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

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

// Byte offset, in a swizzled operand, of row n (0..63) and k index c (0..63); c % 4 == 0
// gives the start of a 16-byte chunk.
__device__ int swizzled_offset(int n, int c) {
  const int chunk = (c % 32) / 4;
  return (c / 32) * kHalfBytes + (n / 8) * kAtomBytes + (n % 8) * 128 + ((chunk ^ (n % 8)) * 16) +
         (c % 4) * 4;
}

// P's A fragment of k step k takes keys in the order 2t, 2t + 1 -> logical t, t + 4 (see
// the P V product), so V^T stores key kappa of each group of 8 at position
// (kappa % 2) * 4 + (kappa % 8) / 2 of the group.
__host__ __device__ constexpr int permuted_key(int kappa) {
  return (kappa / 8) * 8 + (kappa % 2) * 4 + (kappa % 8) / 2;
}

// The chunk swizzle of raw V: key kappa's 16-byte chunks are XORed with 2 (kappa / 8) +
// kappa % 2 (mod 8). The split pass's quarter warps read keys 8m + b + 2r for m = 0..3,
// b = 0, 1 (one r), and those 8 keys get 8 different XORs: 8 different bank groups.
__host__ __device__ constexpr int raw_v_swizzle(int kappa) {
  return (2 * (kappa / 8) + kappa % 2) % 8;
}

// What V's split pass relies on (see v_read in the kernel): the keys it reads for chunk
// cc of V^T's half hv, 32 hv + 8 (cc / 2) + cc % 2 + 2 r, r = 0..3, sit at positions
// 32 hv + 4 cc + r of V^T's rows, and raw V stores all four with the chunk XOR cc.
constexpr bool split_pass_keys_line_up() {
  for (int hv = 0; hv < 2; ++hv)
    for (int cc = 0; cc < 8; ++cc)
      for (int r = 0; r < 4; ++r) {
        const int kappa = 32 * hv + 8 * (cc / 2) + cc % 2 + 2 * r;
        if (permuted_key(kappa) != 32 * hv + 4 * cc + r || raw_v_swizzle(kappa) != cc) return false;
      }
  return true;
}
static_assert(split_pass_keys_line_up(), "V's split pass reads the wrong keys or chunks");

// The copies of raw V store row kv = row + 8 p (row = 0..7, pass p) with the chunk XOR
// row % 2 ^ 2 (p % 4), which must be raw_v_swizzle(kv).
constexpr bool raw_v_swizzle_of_a_pass() {
  for (int row = 0; row < 8; ++row)
    for (int p = 0; p < 8; ++p)
      if (raw_v_swizzle(row + 8 * p) != (row % 2 ^ 2 * (p % 4))) return false;
  return true;
}
static_assert(raw_v_swizzle_of_a_pass(),
              "the copies of raw V store chunks the split pass does not expect");

// The shared-memory matrix descriptor of k step `step` (8 TF32) of a swizzled operand:
// start address >> 4 (bits 0-13), leading byte offset (unused for swizzled K-major; 1),
// stride byte offset between atoms of 8 rows >> 4 (bits 32-45), 128-byte swizzle (mode 1,
// bits 62-63).
__device__ uint64_t operand_descriptor(uint32_t operand_smem, int step) {
  const uint32_t start = operand_smem + (step / 4) * kHalfBytes + (step % 4) * 32;
  return static_cast<uint64_t>((start & 0x3FFFF) >> 4) | static_cast<uint64_t>(1) << 16 |
         static_cast<uint64_t>(kAtomBytes >> 4) << 32 | static_cast<uint64_t>(1) << 62;
}

// Orders this thread's register writes (accumulators, A fragments) before the wgmma that
// follow; needed before the first wgmma of each batch.
__device__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until every wgmma this warpgroup committed has completed: their accumulators can
// be read and their shared-memory operands overwritten.
__device__ void wgmma_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
// Shared memory written by ordinary stores is read by wgmma through the async proxy.
__device__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving reads or writes of these registers across the wgmma that
// own them (the asm of a wgmma names them only at its issue), or the computation of A
// fragments past the fence before their wgmma (ptxas would then fence again itself).
__device__ void pin(float (&r)[kSlicesS][4]) {
#pragma unroll
  for (int n = 0; n < kSlicesS; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(r[n][e])::"memory");
}
__device__ void pin(uint32_t (&r)[kStepsPV][4]) {
#pragma unroll
  for (int n = 0; n < kStepsPV; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(r[n][e])::"memory");
}

// D (this warp's 16 x 64 part of 64 x 64) += A B: A from registers, B by descriptor.
__device__ void wgmma_tf32(float (&d)[kSlicesS][4], const uint32_t (&a)[4], uint64_t b_desc) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, 1, 1, 1;\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc)
      : "memory");
}

// D += A B at float32 accuracy for the 8 k steps of one product: A's split fragments per
// step, B's hi and lo operands. In each step the two small cross terms go first.
__device__ void wgmma_tf32x3(float (&d)[kSlicesS][4],
                             const uint32_t (&a_hi)[8][4],
                             const uint32_t (&a_lo)[8][4],
                             uint32_t b_hi_smem,
                             uint32_t b_lo_smem) {
#pragma unroll
  for (int step = 0; step < 8; ++step) {
    wgmma_tf32(d, a_lo[step], operand_descriptor(b_hi_smem, step));
    wgmma_tf32(d, a_hi[step], operand_descriptor(b_lo_smem, step));
    wgmma_tf32(d, a_hi[step], operand_descriptor(b_hi_smem, step));
  }
}

__device__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// mbarriers: a 64-bit object in shared memory that counts arrivals; a wait on phase parity
// p returns once phase p has completed (the arrivals it was initialised with have come).
__device__ void barrier_init(uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(arrivals)
               : "memory");
}
// This thread's arrival; its earlier writes to shared memory are released to whoever waits
// for the phase.
__device__ void barrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(bar)) : "memory");
}
__device__ void barrier_wait(uint64_t* bar, unsigned parity) {
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

// Named barriers (0 is __syncthreads). 1 and 2 pass the turn at the tensor cores between
// the consumers: consumer w waits on barrier 1 + w until the other, which arrives there
// without waiting, has issued its products; each completes with the 128 threads that wait
// and the 128 that arrive. 3 is the producer warpgroup's own block-wide barrier.
constexpr int kTurnThreads = 2 * kWarpgroupThreads;
__device__ void wait_turn(int wg) {
  if (wg == 0)
    asm volatile("bar.sync 1, %0;\n" ::"n"(kTurnThreads) : "memory");
  else
    asm volatile("bar.sync 2, %0;\n" ::"n"(kTurnThreads) : "memory");
}
__device__ void pass_turn(int wg) {
  if (wg == 0)
    asm volatile("bar.arrive 2, %0;\n" ::"n"(kTurnThreads) : "memory");
  else
    asm volatile("bar.arrive 1, %0;\n" ::"n"(kTurnThreads) : "memory");
}
__device__ void producer_sync() {
  asm volatile("bar.sync 3, %0;\n" ::"n"(kWarpgroupThreads) : "memory");
}

// Moves registers between warpgroups (sm_90a): the whole warpgroup executes it.
template <int kRegisters>
__device__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
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
// the tile is the consumer's diagonal tile (kMasked; no other tile it computes has a
// masked entry in a row below T), takes each row's max over its 4 lanes, turns s into
// P_ij = 2^(S_ij - m_new) in place, and updates m and this lane's part of l; alpha gets
// each row's 2^(m_old - m_new), by which O is rescaled. Element e of slice n sits in row
// g + 8 (e / 2), column 8n + 2t + e % 2.
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

// The producer warpgroup (128 threads, ptid = 0..127): copies raw K_j, V_j two tiles ahead
// and splits each landed tile into a stage, for the split's n tiles from j_begin on.
template <int d, int B_c>
__device__ void produce(unsigned char* stage_base,
                        unsigned char* raw_base,
                        uint64_t* ready,
                        uint64_t* released,
                        const float* k_bh,
                        const float* v_bh,
                        Strides k_stride,
                        Strides v_stride,
                        int T,
                        int j_begin,
                        int n,
                        int ptid) {
  constexpr int kChunks = d / 4;                                 // 16-byte chunks in a row
  constexpr int kRowsPerPass = kWarpgroupThreads / kChunks;      // rows one pass covers
  constexpr int kPasses = B_c / kRowsPerPass;                    // passes per tile
  static_assert(kRowsPerPass == 8 && kPasses == 8, "one atom of 8 rows per pass");

  // The copies and K's split pass give thread ptid the 16-byte chunk x = ptid % 16 of rows
  // ptid / 16 + 8 p, pass p = 0..7: row ptid / 16 of atom p, so in the swizzled layout its
  // offset is the same in every atom, and each quarter warp covers the 8 chunks of one
  // row (of one half of d): no bank conflicts.
  const int copy_row = ptid / kChunks, copy_chunk = ptid % kChunks;
  const int k_offset = swizzled_offset(copy_row, 4 * copy_chunk);  // + p * kAtomBytes

  // Issues the copy of raw K_j or raw V_j into `raw`: in pass p, chunk copy_chunk of row
  // copy_row + 8 p goes to byte offset dst(p) there. Rows past T are zero-filled; only the
  // last tile can have them, so full tiles take pointer increments alone.
  auto load_tile = [&](unsigned char* raw, const float* src_bh, int src_row_stride, int j,
                       auto dst) {
    const int cols = min(B_c, T - j * B_c);
    const float* src =
        src_bh + static_cast<int64_t>(j * B_c + copy_row) * src_row_stride + 4 * copy_chunk;
    const int64_t pass_stride = static_cast<int64_t>(kRowsPerPass) * src_row_stride;
    if (cols == B_c) {
#pragma unroll
      for (int p = 0; p < kPasses; ++p) copy_async_16(raw + dst(p), src + p * pass_stride, 16);
    } else {
#pragma unroll
      for (int p = 0; p < kPasses; ++p) {
        const int kv = copy_row + kRowsPerPass * p;
        const bool in_range = kv < cols;  // else: a valid address (row 0), nothing read
        copy_async_16(raw + dst(p),
                      in_range ? src + p * pass_stride : src - copy_row * src_row_stride,
                      in_range ? 16 : 0);
      }
    }
  };
  // Raw K: chunk copy_chunk of row copy_row + 8 p at the swizzled offset of K_hi.
  auto k_dst = [&](int p) { return k_offset + p * kAtomBytes; };
  // Raw V: row copy_row + 8 p, chunk copy_chunk stored at copy_chunk ^ raw_v_swizzle(row).
  // (copy_row < 8, so raw_v_swizzle(copy_row + 8 p) = copy_row % 2 ^ 2 (p % 4): see
  // raw_v_swizzle_of_a_pass.)
  const int v_chunk = copy_chunk ^ (copy_row % 2);
  auto v_dst = [&](int p) {
    return (copy_row + kRowsPerPass * p) * d * static_cast<int>(sizeof(float)) +
           16 * (v_chunk ^ (2 * (p % 4)));
  };
  // Tile t of the split (raw buffer t % 2): raw K then raw V, one commit group.
  auto load = [&](int t) {
    unsigned char* raw = raw_base + (t % kRawBuffers) * kRawTileBytes;
    load_tile(raw, k_bh, k_stride.row, j_begin + t, k_dst);
    load_tile(raw + kRawBytes, v_bh, v_stride.row, j_begin + t, v_dst);
    copy_async_commit();
  };

  // V's split pass transposes 4 x 4 blocks in registers: thread ptid takes the 4 d
  // values 4 dg .. 4 dg + 3 (dg = ptid / 8) of 4 keys that V^T stores side by side, in
  // chunk cc = ptid % 8 of each half hv of V^T's rows. By permuted_key those are keys
  // 32 hv + 8 (cc / 2) + cc % 2 + 2 r, r = 0..3, whose raw_v_swizzle is cc: the raw
  // chunk read is dg ^ cc, 8 different bank groups in a quarter warp (cc = 0..7). Each
  // of the 4 rows 4 dg + e of V^T gets one 16-byte store, at chunk cc ^ ((4 dg + e) % 8)
  // of its row: again 8 different bank groups.
  const int dg = ptid / 8, cc = ptid % 8;
  const int v_read = (8 * (cc / 2) + cc % 2) * d * sizeof(float) + 16 * (dg ^ cc);  // + hv, r

  load(0);
  if (n > 1) load(1);
  for (int t = 0; t < n; ++t) {
    if (t + 1 < n)
      copy_async_wait_all_but_one();  // this thread's copies of tile t have landed ...
    else
      copy_async_wait_all();  // ... (the last tile has no successor in flight)
    // Guards raw tile t: every producer thread's copies of it have landed.
    producer_sync();
    const int st = t % kStages;
    // The stage's previous tile, t - 2, must have been read by both consumers' wgmma (phase
    // t / 2 - 1 of its "released" barrier) before the split overwrites it.
    if (t >= kStages) barrier_wait(&released[st], (t / kStages - 1) % 2);
    const unsigned char* K_raw = raw_base + (t % kRawBuffers) * kRawTileBytes;
    const unsigned char* V_raw = K_raw + kRawBytes;
    unsigned char* K_hi = stage_base + st * kStageBytes;  // K_j's hi parts, swizzled [key][d]
    unsigned char* K_lo = K_hi + kOperandBytes;           // ... lo parts
    unsigned char* Vt_hi = K_hi + 2 * kOperandBytes;      // V_j^T's hi parts, swizzled [d][key]
    unsigned char* Vt_lo = K_hi + 3 * kOperandBytes;      // ... lo parts

    // K's split pass: in place of the layout, raw K_j to K_hi and K_lo.
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int offset = k_offset + p * kAtomBytes;
      const float4 x = *reinterpret_cast<const float4*>(K_raw + offset);
      const Split p0 = split_tf32(x.x), p1 = split_tf32(x.y), p2 = split_tf32(x.z),
                  p3 = split_tf32(x.w);
      *reinterpret_cast<uint4*>(K_hi + offset) = make_uint4(p0.hi, p1.hi, p2.hi, p3.hi);
      *reinterpret_cast<uint4*>(K_lo + offset) = make_uint4(p0.lo, p1.lo, p2.lo, p3.lo);
    }
    // V's split pass: raw V_j to V_j^T's hi and lo parts (4 x 4 blocks, see v_read).
#pragma unroll
    for (int hv = 0; hv < 2; ++hv) {
      float x[4][4];  // x[r][e] = V[key r][4 dg + e]
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float4 row = *reinterpret_cast<const float4*>(V_raw + v_read +
                                                            (32 * hv + 2 * r) * d * sizeof(float));
        x[r][0] = row.x, x[r][1] = row.y, x[r][2] = row.z, x[r][3] = row.w;
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const Split p0 = split_tf32(x[0][e]), p1 = split_tf32(x[1][e]), p2 = split_tf32(x[2][e]),
                    p3 = split_tf32(x[3][e]);
        const int offset = swizzled_offset(4 * dg + e, 4 * cc) + hv * kHalfBytes;
        *reinterpret_cast<uint4*>(Vt_hi + offset) = make_uint4(p0.hi, p1.hi, p2.hi, p3.hi);
        *reinterpret_cast<uint4*>(Vt_lo + offset) = make_uint4(p0.lo, p1.lo, p2.lo, p3.lo);
      }
    }
    fence_proxy_async();  // this thread's stores above are read next by wgmma (async proxy)
    barrier_arrive(&ready[st]);  // the consumers may read the stage once all 128 arrived
    // Guards raw buffer t % 2: every producer thread has read it before the copies of tile
    // t + 2 overwrite it.
    producer_sync();
    if (t + 2 < n) load(t + 2);
  }
}

// __launch_bounds__ with a block count gives the kernel a register cap at entry
// (kLaunchRegisters), which setmaxnreg then redistributes.
template <int d, int B_r, int B_c>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    causal_attention_kernel(const float* __restrict__ q,
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
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // The swizzle is a function of the address bits, so the operands start on a 1,024-byte
  // boundary.
  const uint32_t raw_shared = smem_address(smem_raw);
  unsigned char* smem = smem_raw + (kAtomBytes - raw_shared % kAtomBytes) % kAtomBytes;
  unsigned char* stage_base = smem;  // [kStages][K hi, K lo, V^T hi, V^T lo]
  unsigned char* raw_base = smem + kStages * kStageBytes;  // [kRawBuffers][raw K, raw V]
  uint64_t* ready = reinterpret_cast<uint64_t*>(raw_base + kRawBuffers * kRawTileBytes);
  uint64_t* released = ready + kStages;

  const int C = H * d;
  const int b = blockIdx.x / H;
  const int h = blockIdx.x % H;
  // blockIdx.y = (T_r - 1 - i) * max_splits + split: row blocks longest-first, and the
  // splits of one row block next to each other.
  const int T_r = gridDim.y / max_splits;
  const int i = T_r - 1 - blockIdx.y / max_splits;  // query tile
  const int split = blockIdx.y % max_splits;
  const int T_c = ceil_div(T, B_c);
  const int n_i = tiles_of_row_block(i, T_c);
  const int splits = ceil_div(n_i, tiles_per_split);
  if (split >= splits) return;  // a slot this row block does not use: the whole block leaves
  // This split's key tiles: [j_begin, j_begin + n), counted from the row block's last tile
  // back; split 0 holds the diagonal tiles.
  const int j_end = n_i - split * tiles_per_split;
  const int j_begin = max(0, j_end - tiles_per_split);
  const int n = j_end - j_begin;
  const int tid = threadIdx.x;

  if (tid == 0) {
    for (int st = 0; st < kStages; ++st) {
      barrier_init(&ready[st], kWarpgroupThreads);  // every producer thread arrives
      barrier_init(&released[st], kConsumerThreads);  // every consumer thread arrives
    }
  }
  // Guards the barriers: initialised before anyone uses them. The last block-wide barrier:
  // from here on the producer and the consumers go their own ways (one branch each, as
  // setmaxnreg wants).
  __syncthreads();

  if (tid >= kConsumerThreads) {
    release_registers<kProducerRegisters>();
    produce<d, B_c>(stage_base, raw_base, ready, released, k + b * k_stride.batch + h * d,
                    v + b * v_stride.batch + h * d, k_stride, v_stride, T, j_begin, n,
                    tid - kConsumerThreads);
    return;
  }
  claim_registers<kConsumerRegisters>();

  // Which 64 rows (0 or 1); read through a shuffle from lane 0 so that the compiler knows it
  // is the same in every lane of a warp (its branches on it need no reconvergence).
  const int wg = __shfl_sync(0xffffffffu, tid / kWarpgroupThreads, 0);
  const int warp = tid % kWarpgroupThreads / kLanes;  // within the warpgroup
  const int lane = tid % kLanes;
  const int g = lane / kRowLanes, t = lane % kRowLanes;

  const float* q_bh = q + b * q_stride.batch + h * d;
  float* o_bh = out + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * d;  // contiguous
  const int row0 = i * B_r;

  // This warp's rows of Q_i, times scale * log2(e), split once as the A fragments of
  // the 8 k steps of Q K^T: lane (g, t) holds rows g and g + 8, columns 8k + t and
  // 8k + t + 4 (a0..a3 above). Rows past T are zero, so their scores are finite (they
  // are never stored).
  const int row_g = row0 + wg * kWarpgroupRows + kMmaM * warp + g;
  uint32_t q_hi[kStepsQK][4], q_lo[kStepsQK][4];
#pragma unroll
  for (int kq = 0; kq < kStepsQK; ++kq)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = row_g + 8 * (e % 2), col = kMmaK * kq + t + 4 * (e / 2);
      const float x = row < T ? q_bh[static_cast<int64_t>(row) * q_stride.row + col] : 0.0f;
      const Split part = split_tf32(x * q_scale);
      q_hi[kq][e] = part.hi;
      q_lo[kq][e] = part.lo;
    }

  // This lane's rows (g and g + 8 of the warp), their statistics (m equal across the
  // row's 4 lanes, l this lane's part) and its part of O_i, in D-fragment layout.
  float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.0f, 0.0f};
  float o[kSlicesO][4] = {};
  // The tiles this consumer computes: all n, or n - 1 when the split's last tile lies right
  // of its diagonal (consumer 0 in split 0; at least one, since L >= 2).
  const int diagonal = diagonal_tile(i, wg);
  const int computed = min(j_end, diagonal + 1) - j_begin;
  const uint32_t stage_s = smem_address(stage_base);
  // Waits until tile t's stage is split and in place.
  const auto wait_ready = [&](int tile) {
    barrier_wait(&ready[tile % kStages], (tile / kStages) % 2);
  };
  // Every consumer thread arrives once it (and so its warpgroup: the wgmma that read the
  // stage completed for all of it) is done with tile t's stage. A consumer that skips a tile
  // still waits for it to be ready first, so that its arrivals count in that tile's phase.
  const auto release = [&](int tile) { barrier_arrive(&released[tile % kStages]); };

  // Turns: consumer 0 issues first; the consumers alternate, one batch of products (S or
  // P V) per turn, 2n turns each. Consumer 1 passes the first turn to consumer 0 before it
  // waits for its own, and its last turn passes to nobody.
  const bool last_wg = wg == kConsumers - 1;
  if (last_wg) pass_turn(wg);

  for (int tile = 0; tile < computed; ++tile) {
    const int j = j_begin + tile;
    const uint32_t K_hi_s = stage_s + (tile % kStages) * kStageBytes;
    const uint32_t K_lo_s = K_hi_s + kOperandBytes;
    const uint32_t Vt_hi_s = K_hi_s + 2 * kOperandBytes;
    const uint32_t Vt_lo_s = K_hi_s + 3 * kOperandBytes;
    wait_ready(tile);

    // S_ij = Q_i K_j^T (already scaled), in this consumer's turn.
    float s[kSlicesS][4] = {};
    wait_turn(wg);
    wgmma_fence();
    wgmma_tf32x3(s, q_hi, q_lo, K_hi_s, K_lo_s);
    wgmma_commit();
    pass_turn(wg);
    wgmma_wait_all();
    pin(s);

    // Online softmax, in registers. The consumer's diagonal tile is masked; every earlier
    // tile is unmasked in its rows below T.
    float alpha[2];
    if (j == diagonal)
      softmax_rows<true>(s, row_g, j * B_c, T, m_i, l_i, alpha);
    else
      softmax_rows<false>(s, row_g, j * B_c, T, m_i, l_i, alpha);

    // O_i += P_ij V_j. The A fragment of k step k (keys 8k .. 8k + 7) comes straight
    // from D slice k of S, with the keys inside the step renumbered so no lane needs
    // another's value: logical column t is key 2t and t + 4 is key 2t + 1, so a0, a1,
    // a2, a3 = d0, d2, d1, d3; V^T holds its keys in the same order (permuted_key). P is
    // 0 past the last key, and V's rows there are zero. The tile's product accumulates
    // from zero and joins O in one rounded FFMA per element, as in version 16.
    uint32_t p_hi[kStepsPV][4], p_lo[kStepsPV][4];
#pragma unroll
    for (int kp = 0; kp < kStepsPV; ++kp) {
      const float a[4] = {s[kp][0], s[kp][2], s[kp][1], s[kp][3]};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const Split part = split_tf32(a[e]);
        p_hi[kp][e] = part.hi;
        p_lo[kp][e] = part.lo;
      }
    }
    pin(p_hi);
    pin(p_lo);
    float pv[kSlicesO][4] = {};
    wait_turn(wg);
    wgmma_fence();
    wgmma_tf32x3(pv, p_hi, p_lo, Vt_hi_s, Vt_lo_s);
    wgmma_commit();
    if (!(last_wg && tile == computed - 1)) pass_turn(wg);
    wgmma_wait_all();
    pin(pv);
    release(tile);  // both products of the tile have read the stage
#pragma unroll
    for (int nn = 0; nn < kSlicesO; ++nn)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[nn][e] = fmaf(o[nn][e], alpha[e / 2], pv[nn][e]);
  }
  if (computed < n) {
    // The tile right of this consumer's diagonal: released once it is ready, and its two
    // turns taken, so that releases and turns stay balanced.
    wait_ready(n - 1);
    release(n - 1);
    for (int turn = 0; turn < 2; ++turn) {
      wait_turn(wg);
      pass_turn(wg);
    }
  }

  if (splits == 1) {
    // O_i = diag(l)^-1 O_i, straight from registers to global memory: lane (g, t)
    // stores columns 8n + 2t, 8n + 2t + 1 of rows g and g + 8, a float2 each.
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float inv_l = 1.0f / row_sum(l_i[hh]);  // all lanes: the shuffles need them
      const int row = row_g + 8 * hh;
      if (row >= T) continue;
      float* o_row = o_bh + static_cast<size_t>(row) * C;
#pragma unroll
      for (int nn = 0; nn < kSlicesO; ++nn)
        *reinterpret_cast<float2*>(o_row + kMmaN * nn + 2 * t) =
            make_float2(o[nn][2 * hh] * inv_l, o[nn][2 * hh + 1] * inv_l);
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
    const int r = wg * kWarpgroupRows + kMmaM * warp + g + 8 * hh;  // row within the tile
#pragma unroll
    for (int nn = 0; nn < kSlicesO; ++nn)
      *reinterpret_cast<float2*>(slot + r * d + kMmaN * nn + 2 * t) =
          make_float2(o[nn][2 * hh], o[nn][2 * hh + 1]);
    if (t == 0) *reinterpret_cast<float2*>(stats + 2 * r) = make_float2(m_i[hh], l);
  }
}

constexpr int kMergeThreads = 512;  // 4 per row of a 128-row tile, 16 columns each

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
    int key_tiles,
    int tiles_per_split,
    int max_splits) {
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
          dim3(kThreads), smem_bytes(t)};
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
      partial, a.out, T, H, plan.key_tiles, plan.tiles_per_split, plan.max_splits);
  return cudaGetLastError();
}

}  // namespace causal_attention
