// Version 27: version 26 with piece 0 of a split narrow row block, which merges, a tile
// shorter than L where piece 1 can take the rest: L - 1 tiles, piece 1 the other i + 2 - L
// (at most L). In version 26's timeline (B=1, T=512, L=5) the pieces 0 of row blocks 5-7
// (5 tiles, then the merge) ended about 600 cycles after the unsplit row block 4 (5 tiles,
// no merge); here they take 4 tiles (row block 7: 4 + 4, 6: 4 + 3, 5: 4 + 2), and the
// unsplit row blocks of L tiles end the call. Nothing else changes.
//
// Version 26's notes, kept as they were:
//
// Version 26: version 25 with the two pieces of a split narrow row block launched as a
// thread-block cluster of two, merged through distributed shared memory instead of global
// memory.
//
// Version 24's merge went through global memory: the last piece to finish looked at the
// other's counter (an acquire load), then read the other's partial result (16.5 KB from L2),
// one round trip after the other: about 2,000 cycles at the end of the longest chain (B=1,
// T=512, the timeline), with the writes, the counters and the workspace besides. Here the
// two pieces of row block i are the two blocks of one cluster: piece 0 (the diagonal, the
// longer) merges; piece 1 (the shorter, usually done first) stores its unnormalised O_i, m
// and l straight into piece 0's shared memory (st.async, 18 KB, each store counted on an
// mbarrier there) and exits. Piece 0 waits on that barrier, reads the partial from its own
// shared memory and stores the rows. Unsplit row blocks are paired in clusters too (two
// independent blocks). No counters, no workspace, one launch as before. Every other plan
// is version 25's.
//
// Version 25's notes, kept as they were:
//
// Version 25: version 24 with the narrow kernel's Q_i copied by its consumer into shared
// memory in 16-byte chunks (cp.async, whole rows per warp), then read into the A fragments,
// instead of 32 scalar loads per thread straight into them.
//
// In versions 22-24's timelines the fragments were ready about 500 cycles after K_0's split,
// on every narrow block's critical path: each scalar load touched 8 rows. The copies are
// issued first thing, before the block's first barrier; the rows are padded to 68 floats so
// that the fragments' reads are free of bank conflicts. Nothing else changes.
//
// Version 24's notes, kept as they were:
//
// Version 24: version 23 with the narrow blocks' keys cut into two pieces where one wave of
// the SMs leaves room for them (B=1, H=12: 320 < T <= 512), merged inside the kernel: the
// last piece of a row block to finish merges the other's partial result and stores the
// rows. No second launch, and no memset.
//
// At B=1, T=512 version 23 runs 96 narrow blocks on 132 SMs, and the longest (8 key tiles)
// decides the call. Here row block i's tiles are cut, from its diagonal back, into pieces
// of at most L tiles (T=512: L=5, 132 blocks, one wave, the longest chain 5 tiles); the
// plan cuts only where it saves at least 3 tiles of the longest chain, and into at most 2
// pieces. A piece that finds the other already finished (an acquire load of the row
// block's counter) merges at once, without writing its own partial; otherwise it writes
// its partial (unnormalised O, m, l) to the workspace and counts itself finished, and the
// one that counts last merges. The counters are tagged with the launch's grid id, so a
// stale counter (an earlier call's, or whatever the workspace held) reads as 0: the memset
// node that would otherwise start every call cost 2.2 µs. Every other plan is version 23's.
//
// Version 23's notes, kept as they were:
//
// Version 23: version 22 with the producer's split pass of K reading its raw tile before
// writing any split part (in two halves of 4 passes, 16 registers each).
//
// Both kernels' producer splits raw K_j, landed by cp.async, into K_hi and K_lo in 8 passes.
// The compiler cannot tell the raw buffer from the stage (both are bytes of shared memory),
// so it kept each pass's read behind the previous pass's stores, and the passes ran one
// after the other: about 900 cycles for K's pass in version 22's timeline (B=1, T=512).
// V's pass already read each half's 4 rows before storing them. Nothing else changes.
//
// Version 22's notes, kept as they were:
//
// Version 22: version 21's narrow kernel with P V of the last tile issued behind this
// tile's S, in three parts around the softmax, so that the tensor cores run it while the
// softmax does; K and V of a stage released apart, so that the producer can split K of
// tile j + 2 while V_j is still read.
//
// Version 21's consumer ran S_j, the softmax of S_j, P_j's split and P_j V_j one after the
// other. Step j here issues S_j, then P_{j-1} V_{j-1}, waits for S_j alone, runs the
// softmax of S_j while P_{j-1} V_{j-1} runs, then joins O and splits P_j. Step 0 (S_0 and
// its softmax) runs before the loop and the last P V after it, so that every step of the
// loop issues the same products (ptxas serialises wgmma behind a run-time branch). The
// producer's role is read warp-uniformly (a shuffle from lane 0): decided per thread, it
// made ptxas guard the softmax's shuffles with a divergent path, and that serialised every
// wgmma beside one in flight (remark C7518). The three-consumer kernel is version 21's,
// releasing K and V of a stage together.
//
// Version 21's notes, kept as they were:
//
// Version 21: version 20 with narrow row blocks in a kernel of their own: 64 rows, one
// consumer warpgroup and the producer warpgroup, unsplit, where B H ceil(T / 64) of them
// take at most kNarrowWaves waves of the SMs (B=1, H=12: T <= 1,408).
//
// At B=1 and T <= 512 version 20 runs few 128-row blocks (12 at T=128, 48 at T=512), splits
// their keys (L = 2 at T=512) and merges the splits in a second kernel; each block's two
// consumers take turns at the tensor cores. Half-precision versions 14-16 measured what a
// call that small needs instead: more, shorter chains (64-row blocks, all of them on the
// SMs at once), no merge, and a lone consumer that waits for no turn (h16: B=1 T=512 0.75x
// cuDNN, from 0.83x). Here narrow_attention_kernel does that in float32: block x computes
// the 64 rows of row block i = T_n - 1 - x / (B H) of head x % (B H) (longest first), with
// key tiles 0 .. i (its diagonal tile is its last, B_c = 64); the producer warpgroup copies
// and splits each tile once, as version 19's does; the consumer runs version 20's loop for
// its tiles without turns, and stores its rows. Every other plan is version 20's, unchanged.
//
// Version 20's notes, kept as they were:
//
// Version 20: version 19 with its blocks launched in groups of heads sized to the L2.
//
// Version 19 launches its grid (B H, T_r x splits) x-major: the longest row block of every
// (batch, head), then the next longest, as versions 13-18 do. At B=8, T=4096 the 132 blocks
// in flight belong to 96 different heads, whose K and V (2 MB each in float32, 192 MB in
// all) are four times the 50 MB L2: a head's next row block, one wave later, finds its K
// and V evicted, and ncu counts 2.5 GB read from DRAM for 201 MB of distinct K and V.
// Half-precision version 8 (h08) measured the cure: launch the heads in groups small enough
// that two groups' K and V (the one finishing and the one starting) fit in 32 MB of L2, and
// keep the longest-first order inside each group. Here a group is 8 heads at T=4096. Where
// every head's K and V fit in that budget together (B=1 up to T=4096), there is one group:
// the order, and the balance of the SMs, stay version 19's.
//
// Nothing else changes: version 19's producer, consumers, turns and merge.
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
    "version 20 uses wgmma and setmaxnreg, which exist only in the arch-specific target sm_90a (compute capability 9.0)"
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
// Per stage and per operand (K apart from V): a "ready" barrier (the producer's 128 threads
// arrive once their split stores of it are in place) and a "released" one (the consumers'
// threads arrive once their wgmma have read it). The narrow kernel reads K_j one step
// before it is done with V_j (its P V runs a step behind S), so the producer may split
// K_{j+2} while V_j is still being read.
struct StageBarriers {
  uint64_t* k_ready;     // [kStages]
  uint64_t* v_ready;     // [kStages]
  uint64_t* k_released;  // [kStages]
  uint64_t* v_released;  // [kStages]
};
constexpr int kBarriers = 4 * kStages;
// The barriers from their place in shared memory on.
__device__ StageBarriers stage_barriers(uint64_t* first) {
  return {first, first + kStages, first + 2 * kStages, first + 3 * kStages};
}

// Shared memory: the stages, the raw buffers (all 1,024-byte aligned for the swizzle), the
// mbarriers, and 1 KB to align the start: 197,696 bytes, one block per SM.
size_t smem_bytes(Tiles) {
  return static_cast<size_t>(kStages) * kStageBytes + kRawBuffers * kRawTileBytes +
         kBarriers * sizeof(uint64_t) + kAtomBytes;
}
// The narrow kernel's Q_i as its consumer copies it: 64 rows of 64 floats, each row padded
// to 68 floats (272 bytes, 16-byte aligned), so that the A fragments' reads (rows g,
// columns t of a k step, g = 0..7, t = 0..3) fall in 32 different banks. After the
// barriers: 215,104 bytes in all.
constexpr int kQRowFloats = kHeadDim + 4;
constexpr int kNarrowQBytes = 64 * kQRowFloats * sizeof(float);
// The same bytes, once Q is in registers, are piece 0's inbox for piece 1's partial result:
// per consumer thread (tid) its 32 floats of O in D-fragment order, then (m, l) of its two
// rows, 36 floats (144 bytes, so that a quarter warp's 16-byte reads hit 32 different
// banks); thread tid of piece 0 holds the same rows and columns, and reads slot tid.
constexpr int kInboxFloats = 36;
constexpr int kInboxBytes = kWarpgroupThreads * kInboxFloats * sizeof(float);  // 18,432
constexpr int kNarrowRegionBytes = std::max(kNarrowQBytes, kInboxBytes);
// The region, then the inbox's mbarrier: 216,136 bytes in all.
size_t narrow_smem_bytes(Tiles t) { return smem_bytes(t) + kNarrowRegionBytes + sizeof(uint64_t); }

__host__ __device__ int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Thread blocks one SM holds at once: one (197,696 bytes of shared memory, 384 threads of
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

// Heads per group: a head's K and V take 2 x T x 64 x 4 = 512 T bytes, and two groups (the one
// finishing and the one starting) should fit in 32 MB of the 50 MB L2: 8 heads at T = 4096.
// When every head fits in those 32 MB together, all heads are one group: smaller groups would
// keep nothing more in L2, and each would end in its own tail of short row blocks (h07's
// notes measured that tail).
constexpr int64_t kGroupBytes = 16 << 20;
int heads_per_group(int64_t heads, int64_t T) {
  const int64_t head_bytes = 512 * T;
  if (heads * head_bytes <= 2 * kGroupBytes) return static_cast<int>(heads);
  return static_cast<int>(std::max<int64_t>(1, kGroupBytes / head_bytes));
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
// Waits until all but the last committed group have completed (the narrow kernel: S_j,
// while P_{j-1} V_{j-1}, committed after it, may still run).
__device__ void wgmma_wait_all_but_one() {
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
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

// D (this warp's 16 x 64 part of 64 x 64) += A B, or = A B where kAccumulate is 0 (D's
// registers are then not read): A from registers, B by descriptor.
template <int kAccumulate>
__device__ void wgmma_tf32(float (&d)[kSlicesS][4], const uint32_t (&a)[4], uint64_t b_desc) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, %37, 1, 1;\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "n"(kAccumulate)
      : "memory");
}

// D += A B at float32 accuracy for the 8 k steps of one product, or D = A B (kOverwrite:
// the first wgmma ignores D, which then need not be zeroed): A's split fragments per step,
// B's hi and lo operands. In each step the two small cross terms go first.
//
// kBegin, kEnd: the k steps [kBegin, kEnd) only (the narrow kernel issues P V in parts).
template <bool kOverwrite = false, int kBegin = 0, int kEnd = 8>
__device__ void wgmma_tf32x3(float (&d)[kSlicesS][4],
                             const uint32_t (&a_hi)[8][4],
                             const uint32_t (&a_lo)[8][4],
                             uint32_t b_hi_smem,
                             uint32_t b_lo_smem) {
#pragma unroll
  for (int step = kBegin; step < kEnd; ++step) {
    if (kOverwrite && step == 0)  // known at compile time once the loop is unrolled
      wgmma_tf32<0>(d, a_lo[step], operand_descriptor(b_hi_smem, step));
    else
      wgmma_tf32<1>(d, a_lo[step], operand_descriptor(b_hi_smem, step));
    wgmma_tf32<1>(d, a_hi[step], operand_descriptor(b_lo_smem, step));
    wgmma_tf32<1>(d, a_hi[step], operand_descriptor(b_hi_smem, step));
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

// Gives every barrier of the stages its arrival count: the producer's 128 threads for
// "ready", the consumers' threads for "released". Thread 0 alone, before a block-wide
// barrier.
__device__ void init_stage_barriers(const StageBarriers& bars, unsigned consumer_threads) {
  for (int st = 0; st < kStages; ++st) {
    barrier_init(&bars.k_ready[st], kWarpgroupThreads);
    barrier_init(&bars.v_ready[st], kWarpgroupThreads);
    barrier_init(&bars.k_released[st], consumer_threads);
    barrier_init(&bars.v_released[st], consumer_threads);
  }
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
// The narrow kernel's consumer warpgroup's own barrier (it takes no turns: 1 is free there).
__device__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kWarpgroupThreads) : "memory");
}

// Thread-block clusters (sm_90). The narrow plan with pieces launches clusters of two
// blocks along x: blocks 2c and 2c + 1 are cluster c, ranks 0 and 1.
// The cluster barrier: every thread of the cluster that has not exited arrives once; a
// wait returns once they all have. Arrive releases this thread's earlier writes (the
// inbox's barrier initialised, the reads of Q done), wait acquires the others'.
__device__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The address, in the cluster's shared-memory window, of this block's shared address
// `local` in the block of rank `rank`.
__device__ uint32_t peer_address(uint32_t local, unsigned rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
}
// Stores 16 bytes into another block's shared memory and counts them on that block's
// mbarrier `bar` (its transaction count): the waiting block sees the bytes once the
// barrier's phase completes. Fire and forget.
__device__ void store_to_peer(uint32_t remote, float4 v, uint32_t remote_bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, "
      "[%5];\n" ::"r"(remote),
      "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(remote_bar)
      : "memory");
}
// The one arrival of the inbox's barrier, which also makes its phase wait for `bytes` of
// stores (store_to_peer).
__device__ void barrier_arrive_expect(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)),
               "r"(bytes)
               : "memory");
}
// Makes an mbarrier's initialisation visible to the other blocks of the cluster.
__device__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
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
//
// after_max runs once the rows' maxima are known, after_half once half the exponentials
// are done: the narrow kernel issues the rest of its P V there, a part at a time, so that
// the tensor cores always have some queued (see there).
struct Nothing {
  __device__ void operator()() const {}
};
template <bool kMasked, typename AfterMax = Nothing, typename AfterHalf = Nothing>
__device__ void softmax_rows(float (&s)[kSlicesS][4],
                             int row_g,
                             int col0,
                             int T,
                             float (&m)[2],
                             float (&l)[2],
                             float (&alpha)[2],
                             AfterMax after_max = {},
                             AfterHalf after_half = {}) {
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
  after_max();
#pragma unroll
  for (int n = 0; n < kSlicesS; ++n) {
    if (n == kSlicesS / 2) after_half();
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = exp2f(s[n][e] - m[e / 2]);  // 2^-inf = 0 for masked entries
      l[e / 2] += s[n][e];
    }
  }
}

// The producer warpgroup (128 threads, ptid = 0..127): copies raw K_j, V_j two tiles ahead
// and splits each landed tile into a stage, for the split's n tiles from j_begin on.
template <int d, int B_c>
__device__ void produce(unsigned char* stage_base,
                        unsigned char* raw_base,
                        const StageBarriers& bars,
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
    // The stage's previous tile, t - 2: its K must have been read by the consumers' wgmma
    // (phase t / 2 - 1 of the stage's "K released" barrier) before K's split overwrites it.
    if (t >= kStages) barrier_wait(&bars.k_released[st], (t / kStages - 1) % 2);
    const unsigned char* K_raw = raw_base + (t % kRawBuffers) * kRawTileBytes;
    const unsigned char* V_raw = K_raw + kRawBytes;
    unsigned char* K_hi = stage_base + st * kStageBytes;  // K_j's hi parts, swizzled [key][d]
    unsigned char* K_lo = K_hi + kOperandBytes;           // ... lo parts
    unsigned char* Vt_hi = K_hi + 2 * kOperandBytes;      // V_j^T's hi parts, swizzled [d][key]
    unsigned char* Vt_lo = K_hi + 3 * kOperandBytes;      // ... lo parts

    // K's split pass: in place of the layout, raw K_j to K_hi and K_lo, in two halves of 4
    // passes, each reading its 4 chunks before storing any part. The compiler cannot tell
    // the raw buffer from the stage (both are bytes of shared memory), so it kept each
    // pass's read behind the last pass's stores, and the 8 passes ran one after the other
    // (the timeline: about 900 cycles for K's pass, experiments/v22/v22t_1_timeline.patch).
    // Halves, not all 8 at once: 16 registers of reads, where the three-consumer kernel's
    // producer has 56 (all 8 spilled there). V's pass below already reads each half's 4
    // rows before storing them.
    constexpr int kBatch = kPasses / 2;
#pragma unroll
    for (int p0 = 0; p0 < kPasses; p0 += kBatch) {
      float4 x[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
        x[b] = *reinterpret_cast<const float4*>(K_raw + k_offset + (p0 + b) * kAtomBytes);
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int offset = k_offset + (p0 + b) * kAtomBytes;
        const Split e0 = split_tf32(x[b].x), e1 = split_tf32(x[b].y), e2 = split_tf32(x[b].z),
                    e3 = split_tf32(x[b].w);
        *reinterpret_cast<uint4*>(K_hi + offset) = make_uint4(e0.hi, e1.hi, e2.hi, e3.hi);
        *reinterpret_cast<uint4*>(K_lo + offset) = make_uint4(e0.lo, e1.lo, e2.lo, e3.lo);
      }
    }
    fence_proxy_async();  // this thread's stores of K are read next by wgmma (async proxy)
    barrier_arrive(&bars.k_ready[st]);  // the consumers may read K once all 128 arrived
    // The same for V_{t-2}, read one step later than K_{t-2} in the narrow kernel.
    if (t >= kStages) barrier_wait(&bars.v_released[st], (t / kStages - 1) % 2);
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
    fence_proxy_async();  // this thread's stores of V^T are read next by wgmma (async proxy)
    barrier_arrive(&bars.v_ready[st]);  // the consumers may read V^T once all 128 arrived
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
                            int group_heads,
                            float* __restrict__ partial) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // The swizzle is a function of the address bits, so the operands start on a 1,024-byte
  // boundary.
  const uint32_t raw_shared = smem_address(smem_raw);
  unsigned char* smem = smem_raw + (kAtomBytes - raw_shared % kAtomBytes) % kAtomBytes;
  unsigned char* stage_base = smem;  // [kStages][K hi, K lo, V^T hi, V^T lo]
  unsigned char* raw_base = smem + kStages * kStageBytes;  // [kRawBuffers][raw K, raw V]
  const StageBarriers bars =
      stage_barriers(reinterpret_cast<uint64_t*>(raw_base + kRawBuffers * kRawTileBytes));

  const int C = H * d;
  // The blocks run in groups of group_heads heads (B H = gridDim.x heads in all), so that a
  // group's K and V stay in L2 while its row blocks read them: launch index x + y gridDim.x
  // is block `local` of group `group`, which is slot y' = local / in_group of head
  // local % in_group of the group: every head's longest row block first.
  const int launch = blockIdx.y * gridDim.x + blockIdx.x;
  const int per_head = gridDim.y;
  const int group = launch / (group_heads * per_head);
  const int in_group = min(group_heads, static_cast<int>(gridDim.x) - group * group_heads);
  const int local = launch - group * group_heads * per_head;
  const int bh = group * group_heads + local % in_group, y = local / in_group;
  const int b = bh / H;
  const int h = bh % H;
  // y = (T_r - 1 - i) * max_splits + split: row blocks longest-first, and the splits of one
  // row block next to each other.
  const int T_r = gridDim.y / max_splits;
  const int i = T_r - 1 - y / max_splits;  // query tile
  const int split = y % max_splits;
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

  if (tid == 0) init_stage_barriers(bars, kConsumerThreads);
  // Guards the barriers: initialised before anyone uses them. The last block-wide barrier:
  // from here on the producer and the consumers go their own ways (one branch each, as
  // setmaxnreg wants).
  __syncthreads();

  if (tid >= kConsumerThreads) {
    release_registers<kProducerRegisters>();
    produce<d, B_c>(stage_base, raw_base, bars, k + b * k_stride.batch + h * d,
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
  // Waits until tile t's stage (K and V) is split and in place.
  const auto wait_ready = [&](int tile) {
    barrier_wait(&bars.k_ready[tile % kStages], (tile / kStages) % 2);
    barrier_wait(&bars.v_ready[tile % kStages], (tile / kStages) % 2);
  };
  // Every consumer thread arrives once it (and so its warpgroup: the wgmma that read the
  // stage completed for all of it) is done with tile t's stage, K and V at once here. A
  // consumer that skips a tile still waits for it to be ready first, so that its arrivals
  // count in that tile's phase.
  const auto release = [&](int tile) {
    barrier_arrive(&bars.k_released[tile % kStages]);
    barrier_arrive(&bars.v_released[tile % kStages]);
  };

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
  float* slot = partial + ((static_cast<size_t>(bh) * gridDim.y + y) * kPartialFloats);
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

// The narrow plan: 64-row blocks (one consumer's rows) where B H ceil(T / 64) of them take
// at most kNarrowWaves waves of the SMs; the blocks go longest first, so a second wave is the
// short ones, handed by the hardware to the SMs that finish first.
constexpr int kNarrowWaves = 2;
constexpr int kNarrowRows = kWarpgroupRows;  // B_r of the narrow kernel: 64
static_assert(kNarrowRows == kTiles.B_c, "a narrow block's diagonal tile is its last key tile");
constexpr int kNarrowThreads = 2 * kWarpgroupThreads;  // the consumer, then the producer
int narrow_row_blocks(const Args& a, const DeviceLimits& limits) {
  const int64_t T_n = ceil_div(static_cast<int>(a.seq_len), kNarrowRows);
  const int64_t slots = static_cast<int64_t>(limits.sm_count) * kBlocksPerSm;
  return a.batch * a.num_heads * T_n <= kNarrowWaves * slots ? static_cast<int>(T_n) : 0;
}

// The narrow plan's pieces. Where the narrow blocks take one wave with SMs to spare (B=1,
// H=12: T <= 704), each row block's key tiles are cut, from its diagonal back, into pieces
// of at most L tiles, with L the smallest for which every piece still has an SM of its own
// and no row block has more than kMaxPieces: row block i (i + 1 tiles) has
// ceil((i + 1) / L) pieces, and piece s holds tiles [i + 1 - (s + 1) L, i + 1 - s L), so
// piece 0 holds the diagonal. The cut is made only where it shortens the longest chain by
// kMinTilesSaved tiles or more (B=1, H=12: T=384 L=3, 108 blocks; T=448 L=4, 120; T=512
// L=5, 132); elsewhere, as where the blocks take two waves (B=1: 704 < T <= 1,408), L is
// every row block's whole length: one piece each, version 23's plan.
//
// With pieces, the grid is clusters of two blocks: first, longest first and head by head,
// one cluster per split row block (rank 0 piece 0, rank 1 piece 1); then the unsplit row
// blocks, longest first, two to a cluster (the last cluster's rank 1 idle where their
// number is odd). Rank 1 of a split row block stores its partial result into rank 0's
// shared memory, and rank 0 merges it and stores the rows. (Four pieces of one tile at
// T=256 took 4.3 µs to merge through global memory in version 24's first form.)
constexpr int kMaxPieces = 2;
constexpr int kMinTilesSaved = 3;
constexpr int kClusterBlocks = kMaxPieces;  // a split row block's pieces, one cluster
struct NarrowPlan {
  int row_blocks;       // T_n
  int tiles_per_piece;  // L: row blocks 0 .. L - 1 are whole, L .. T_n - 1 in two pieces
  int max_pieces;       // pieces of the longest row block
  int blocks;           // the grid
};
__host__ __device__ int pieces_of_row_block(int i, int L) { return ceil_div(i + 1, L); }
// Blocks of the grid: one per row block without pieces; else two per split row block, and
// the unsplit ones two to a cluster.
__host__ __device__ int narrow_blocks(int64_t heads, int T_n, int L) {
  if (L >= T_n) return static_cast<int>(heads * T_n);
  const int64_t clusters = heads * (T_n - L) + (heads * L + 1) / 2;
  return static_cast<int>(kClusterBlocks * clusters);
}
NarrowPlan narrow_plan(const Args& a, const DeviceLimits& limits) {
  const int T_n = narrow_row_blocks(a, limits);
  const int64_t heads = a.batch * a.num_heads;
  const int64_t slots = static_cast<int64_t>(limits.sm_count) * kBlocksPerSm;
  int L = T_n;
  if (heads * T_n <= slots)
    while (L - 1 >= ceil_div(T_n, kMaxPieces) && narrow_blocks(heads, T_n, L - 1) <= slots) --L;
  // The merge costs about two tiles of the chain in version 24 (the timeline: 2.6 µs for
  // one partial at T=512, experiments/v24/v24t_1_timeline.patch), so the pieces must save more.
  if (T_n - L < kMinTilesSaved) L = T_n;
  return {T_n, L, pieces_of_row_block(T_n - 1, L), narrow_blocks(heads, T_n, L)};
}
// The plan as launched: with pieces only where the GPU holds every cluster of the grid at
// once (a cluster's blocks share a GPC; each block takes an SM). Without a GPU to ask (the
// launch probe), the plan as computed.
NarrowPlan launched_narrow_plan(const Args& a,
                                const DeviceLimits& limits,
                                const void* kernel,
                                size_t smem) {
  NarrowPlan plan = narrow_plan(a, limits);
  if (plan.max_pieces == 1) return plan;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(plan.blocks));
  config.blockDim = dim3(kNarrowThreads);
  config.dynamicSmemBytes = smem;
  cudaLaunchAttribute cluster[1] = {};
  cluster[0].id = cudaLaunchAttributeClusterDimension;
  cluster[0].val.clusterDim.x = kClusterBlocks;
  cluster[0].val.clusterDim.y = cluster[0].val.clusterDim.z = 1;
  config.attrs = cluster;
  config.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();  // no device here: keep the plan
    return plan;
  }
  if (static_cast<int64_t>(clusters) * kClusterBlocks >= plan.blocks) return plan;
  const int T_n = plan.row_blocks;
  return {T_n, T_n, 1, narrow_blocks(a.batch * a.num_heads, T_n, T_n)};
}

// Warps 0-3 are the consumer, warps 4-7 the producer (version 19's produce). 256 threads:
// up to 255 registers each, so no setmaxnreg. Shared memory as version 20's.
template <int d, int B_c>
__global__ void __launch_bounds__(kNarrowThreads, 1)
    narrow_attention_kernel(const float* __restrict__ q,
                            const float* __restrict__ k,
                            const float* __restrict__ v,
                            float* __restrict__ out,
                            Strides q_stride,
                            Strides k_stride,
                            Strides v_stride,
                            int T,
                            int H,
                            float q_scale,
                            int tiles_per_piece,
                            int heads) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // The swizzle is a function of the address bits, so the operands start on a 1,024-byte
  // boundary.
  const uint32_t raw_shared = smem_address(smem_raw);
  unsigned char* smem = smem_raw + (kAtomBytes - raw_shared % kAtomBytes) % kAtomBytes;
  unsigned char* stage_base = smem;  // [kStages][K hi, K lo, V^T hi, V^T lo]
  unsigned char* raw_base = smem + kStages * kStageBytes;  // [kRawBuffers][raw K, raw V]
  uint64_t* const barrier_base =
      reinterpret_cast<uint64_t*>(raw_base + kRawBuffers * kRawTileBytes);
  const StageBarriers bars = stage_barriers(barrier_base);
  // Q_i's copies ([64][kQRowFloats]), later piece 0's inbox ([128][kInboxFloats]), then the
  // inbox's barrier.
  float* q_s = reinterpret_cast<float*>(barrier_base + kBarriers);
  float* inbox = q_s;
  uint64_t* inbox_landed =
      reinterpret_cast<uint64_t*>(reinterpret_cast<unsigned char*>(q_s) + kNarrowRegionBytes);

  const int C = H * d;
  // Which row block (and piece) this block computes; row block i's rows are 64 i .. 64 i +
  // 63, and piece s holds its key tiles [j_begin, j_begin + n), the diagonal tile last in
  // piece 0. Without pieces (L = T_n), block x is row block T_n - 1 - x / (B H) of head
  // x % (B H): every head's longest first (version 23's order). With pieces, cluster
  // c = x / 2 is the split row block T_n - 1 - c / (B H) of head c % (B H), rank r = x % 2
  // its piece r, while c < B H (T_n - L); after those, the unsplit row blocks two to a
  // cluster, u = 2 (c - B H (T_n - L)) + r taking row block L - 1 - u / (B H) of head
  // u % (B H) (none past the last: an idle rank 1).
  const int T_n = ceil_div(T, kNarrowRows), L = tiles_per_piece;
  const int x = static_cast<int>(blockIdx.x);
  int bh = x % heads, i = T_n - 1 - x / heads, s = 0;
  if (L < T_n) {
    const int c = x / kClusterBlocks, rank = x % kClusterBlocks, split = heads * (T_n - L);
    if (c < split) {
      bh = c % heads;
      i = T_n - 1 - c / heads;
      s = rank;
    } else {
      const int u = kClusterBlocks * (c - split) + rank;
      if (u >= heads * L) return;  // the idle rank: nothing of the cluster waits for it
      bh = u % heads;
      i = L - 1 - u / heads;
    }
  }
  const int pieces = pieces_of_row_block(i, L);
  // Piece 0 also merges, so it takes a tile fewer than L where piece 1 can take the rest
  // (at most L): its chain then ends before the longest unsplit row block's (L tiles).
  const int first = pieces == 1 ? i + 1 : (i + 2 - L <= L ? L - 1 : L);  // piece 0's tiles
  const int j_end = s == 0 ? i + 1 : i + 1 - first;
  const int j_begin = s == 0 ? i + 1 - first : 0;
  const int n = j_end - j_begin;
  const bool diagonal_piece = s == 0;  // its last tile is the row block's diagonal
  const int b = bh / H, h = bh % H;
  const int tid = threadIdx.x;

  // The consumer's copies of Q_i, first thing: 16-byte chunks, 16 threads to a row, rows
  // past T zero-filled. Version 24 loaded Q with 32 scalar loads per thread straight into
  // the A fragments, each load touching 8 rows: the fragments were ready about 500 cycles
  // after K_0's split (the timeline), on every narrow block's critical path.
  const float* q_bh = q + b * q_stride.batch + h * d;
  if (tid < kWarpgroupThreads) {
    constexpr int kChunks = kHeadDim / 4;  // 16-byte chunks in a row
#pragma unroll
    for (int p = 0; p < kNarrowRows * kChunks / kWarpgroupThreads; ++p) {
      const int chunk = tid + kWarpgroupThreads * p, r = chunk / kChunks, c = chunk % kChunks;
      const int row = i * kNarrowRows + r;
      const float* src = q_bh + static_cast<int64_t>(row < T ? row : 0) * q_stride.row + 4 * c;
      copy_async_16(q_s + r * kQRowFloats + 4 * c, src, row < T ? 16 : 0);
    }
    copy_async_commit();
  }
  if (tid == 0) {
    init_stage_barriers(bars, kWarpgroupThreads);
    if (pieces > 1 && s == 0) {
      // Piece 0's inbox: one arrival (this one) and piece 1's 18,432 bytes complete it.
      barrier_init(inbox_landed, 1);
      barrier_arrive_expect(inbox_landed, kInboxBytes);
      fence_barrier_init();  // piece 1 counts its stores on it
    }
  }
  // Guards the barriers: initialised before anyone uses them. The last block-wide barrier.
  __syncthreads();

  // The role, read through a shuffle from lane 0 so that the compiler knows every warp takes
  // one branch whole. Otherwise it guards each of the softmax's shuffles with a divergent
  // path, and one of those beside a wgmma in flight serialises every wgmma (C7518).
  const bool producer = __shfl_sync(0xffffffffu, tid / kWarpgroupThreads, 0) == 1;
  // Every thread of a cluster arrives once at the cluster barrier, which piece 1 waits on
  // before it stores into piece 0's inbox: the producer here, the consumer once it has read
  // Q's copies (whose bytes the inbox reuses).
  const bool clustered = L < T_n;
  if (producer) {
    if (clustered) cluster_arrive();
    produce<d, B_c>(stage_base, raw_base, bars, k + b * k_stride.batch + h * d,
                    v + b * v_stride.batch + h * d, k_stride, v_stride, T, j_begin, n,
                    tid - kWarpgroupThreads);
    return;
  }

  const int warp = tid / kLanes;
  const int lane = tid % kLanes;
  const int g = lane / kRowLanes, t = lane % kRowLanes;

  float* o_bh = out + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * d;  // contiguous

  // This warp's rows of Q_i, scaled and split once (version 20's A fragments), from the
  // copies. Rows past T are zero, so their scores are finite (they are never stored).
  copy_async_wait_all();  // this thread's copies of Q_i have landed ...
  // ... and everyone's: guards q_s, written by the consumer's copies, read below.
  consumer_sync();
  const int row_g = i * kNarrowRows + kMmaM * warp + g;
  uint32_t q_hi[kStepsQK][4], q_lo[kStepsQK][4];
#pragma unroll
  for (int kq = 0; kq < kStepsQK; ++kq)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = kMmaM * warp + g + 8 * (e % 2), col = kMmaK * kq + t + 4 * (e / 2);
      const float x = q_s[r * kQRowFloats + col];
      const Split part = split_tf32(x * q_scale);
      q_hi[kq][e] = part.hi;
      q_lo[kq][e] = part.lo;
    }
  if (clustered) cluster_arrive();  // this consumer is done with q_s

  float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.0f, 0.0f};
  float o[kSlicesO][4] = {};
  const uint32_t stage_s = smem_address(stage_base);
  const auto K_hi_s = [&](int j) { return stage_s + (j % kStages) * kStageBytes; };
  const auto K_lo_s = [&](int j) { return K_hi_s(j) + kOperandBytes; };
  const auto Vt_hi_s = [&](int j) { return K_hi_s(j) + 2 * kOperandBytes; };
  const auto Vt_lo_s = [&](int j) { return K_hi_s(j) + 3 * kOperandBytes; };
  // Waits until K_j, or V_j^T, is split and in place in its stage.
  const auto wait_k = [&](int j) { barrier_wait(&bars.k_ready[j % kStages], (j / kStages) % 2); };
  const auto wait_v = [&](int j) { barrier_wait(&bars.v_ready[j % kStages], (j / kStages) % 2); };
  // Every consumer thread arrives once its warpgroup's wgmma that read K_j, or V_j^T,
  // completed.
  const auto release_k = [&](int j) { barrier_arrive(&bars.k_released[j % kStages]); };
  const auto release_v = [&](int j) { barrier_arrive(&bars.v_released[j % kStages]); };

  // Version 21's loop ran S_j, the softmax of S_j and P_j V_j one after the other: the
  // tensor cores idled through each softmax and each split of P. Here P_{j-1} V_{j-1} is
  // issued right behind S_j, so that it runs while S_j's softmax does; the tensor cores wait
  // only for P's split between the steps.
  //
  // Step j: S_j = Q_i K_j^T, then pv = P_{j-1} V_{j-1} behind it; the softmax of S_j once
  // S_j is complete; once pv is complete, O joins it and P_j is split (p_hi, p_lo are free
  // then). Step 0 runs alone before the loop (S_0 and its softmax) and the last P V after
  // it, so that every step of the loop issues the same products: ptxas serialises every
  // wgmma behind a run-time branch (remark C7520). (A first form ran step 0 in the loop with
  // P = 0 times K_0 as its product: 0.3-0.5 µs slower per block, on the H200.)
  //
  // Both products overwrite their accumulator (kOverwrite) instead of adding to zeros, which
  // saves zeroing 64 registers a step. (Zeros written between S_j's issue and pv's were also
  // copies of a register ptxas took for one of S's in flight: it waited for S to read them,
  // remark C7517. The join between the two issues met the same remark, so it waits for the
  // end of the step, beside P's split.)
  //
  // O is rescaled one softmax late: step j's join makes O^(j-1) = alpha_{j-1} O^(j-2) +
  // P_{j-1} V_{j-1}, after the softmax of S_j has computed alpha_j. Each tile's product is
  // accumulated apart and joins O in one rounded FFMA per element, as in version 16.
  uint32_t p_hi[kStepsPV][4], p_lo[kStepsPV][4];  // P_{j-1}, split
  // alpha_k = 2^(m_{k-1} - m_k) per row: alpha_j once S_j's softmax is done, and alpha_{j-1}.
  float alpha[2][2];
  // O = scale O + pv, one rounded FFMA per element (e = 0, 1 in row g, 2, 3 in row g + 8).
  const auto join = [&](const float(&scale)[2], const float(&pv)[kSlicesO][4]) {
#pragma unroll
    for (int nn = 0; nn < kSlicesO; ++nn) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o[nn][e] = fmaf(o[nn][e], scale[e / 2], pv[nn][e]);
    }
  };
  // P_j split as in version 20: the A fragment of k step k (keys 8k .. 8k + 7) comes
  // from D slice k of S, a0..a3 = d0, d2, d1, d3 (V^T's keys in permuted_key order).
  const auto split_p = [&](const float(&s)[kSlicesS][4]) {
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
  };
  // Step 0 alone: S_0 and its softmax, no product yet.
  {
    wait_k(0);
    float s[kSlicesS][4];
    wgmma_fence();
    wgmma_tf32x3</*kOverwrite=*/true>(s, q_hi, q_lo, K_hi_s(0), K_lo_s(0));
    wgmma_commit();
    wgmma_wait_all();
    pin(s);
    release_k(0);
    if (n == 1 && diagonal_piece)
      softmax_rows<true>(s, row_g, j_begin * B_c, T, m_i, l_i, alpha[0]);
    else
      softmax_rows<false>(s, row_g, j_begin * B_c, T, m_i, l_i, alpha[0]);
    split_p(s);
  }
  for (int j = 1; j < n; ++j) {
    // S_ij = Q_i K_j^T (already scaled). The step's waits come first, before any wgmma is
    // in flight.
    wait_k(j);
    wait_v(j - 1);
    const uint32_t v_hi = Vt_hi_s(j - 1);
    const uint32_t v_lo = Vt_lo_s(j - 1);
    float s[kSlicesS][4], pv[kSlicesO][4];
    wgmma_fence();
    wgmma_tf32x3</*kOverwrite=*/true>(s, q_hi, q_lo, K_hi_s(j), K_lo_s(j));
    wgmma_commit();
    // P_{j-1} V_{j-1} behind S_j, in three parts: k steps 0-2 now, 3-5 once the softmax has
    // the rows' maxima, 6-7 halfway through its exponentials. A warpgroup's issue waits
    // while the tensor cores hold about 8 wgmma (experiments/tools/overlap_probe.cu), so the 48
    // of S and P V issued at once kept the softmax waiting until most of P V had run (the
    // timeline, experiments/v22/v22t_1_timeline.patch); issued in parts, each part is taken
    // at once, and the tensor cores still always have the next one queued.
    wgmma_fence();
    wgmma_tf32x3</*kOverwrite=*/true, 0, 3>(pv, p_hi, p_lo, v_hi, v_lo);
    wgmma_commit();
    wgmma_wait_all_but_one();  // S_j is complete; P_{j-1} V_{j-1} may still run
    pin(s);
    release_k(j);
    const auto issue_pv_3_to_5 = [&] {
      wgmma_fence();
      wgmma_tf32x3<false, 3, 6>(pv, p_hi, p_lo, v_hi, v_lo);
      wgmma_commit();
    };
    const auto issue_pv_6_to_7 = [&] {
      wgmma_fence();
      wgmma_tf32x3<false, 6, 8>(pv, p_hi, p_lo, v_hi, v_lo);
      wgmma_commit();
    };

    // Online softmax of S_j, in registers, beside P_{j-1} V_{j-1}. The diagonal tile, the
    // last of piece 0, is masked (by column and by T); every other tile is unmasked in the
    // rows below T.
#pragma unroll
    for (int r = 0; r < 2; ++r) alpha[1][r] = alpha[0][r];
    if (j == n - 1 && diagonal_piece)
      softmax_rows<true>(s, row_g, (j_begin + j) * B_c, T, m_i, l_i, alpha[0], issue_pv_3_to_5,
                         issue_pv_6_to_7);
    else
      softmax_rows<false>(s, row_g, (j_begin + j) * B_c, T, m_i, l_i, alpha[0], issue_pv_3_to_5,
                          issue_pv_6_to_7);

    wgmma_wait_all();  // P_{j-1} V_{j-1} is complete: V_{j-1}^T and p_hi, p_lo are free
    pin(pv);
    release_v(j - 1);
    join(alpha[1], pv);  // O = O^(j-1)
    split_p(s);
  }
  // The last product, P_{n-1} V_{n-1}: O = O^(n-1).
  wait_v(n - 1);
  float pv[kSlicesO][4];
  wgmma_fence();
  wgmma_tf32x3</*kOverwrite=*/true>(pv, p_hi, p_lo, Vt_hi_s(n - 1), Vt_lo_s(n - 1));
  wgmma_commit();
  wgmma_wait_all();
  pin(pv);
  release_v(n - 1);
  join(alpha[0], pv);

  float l_row[2] = {row_sum(l_i[0]), row_sum(l_i[1])};  // all lanes: the shuffles need them
  if (pieces > 1 && s == 1) {
    // Piece 1: its partial result (unnormalised O, m, l) into piece 0's inbox, slot tid,
    // each 16 bytes counted on piece 0's barrier; then it is done.
    cluster_wait();  // piece 0's barrier is initialised and its consumer is done with q_s
    const uint32_t slot = peer_address(smem_address(inbox + tid * kInboxFloats), 0);
    const uint32_t landed = peer_address(smem_address(inbox_landed), 0);
#pragma unroll
    for (int nn = 0; nn < kSlicesO; ++nn)
      store_to_peer(slot + 16 * nn, make_float4(o[nn][0], o[nn][1], o[nn][2], o[nn][3]), landed);
    store_to_peer(slot + 16 * kSlicesO, make_float4(m_i[0], m_i[1], l_row[0], l_row[1]), landed);
    return;
  }
  if (pieces > 1) {
    // Piece 0: piece 1's partial, from its own shared memory once all of it has landed,
    // merged into its registers: m = max of the two, each part scaled by 2^(its m - m).
    barrier_wait(inbox_landed, 0);
    const float4* other = reinterpret_cast<const float4*>(inbox + tid * kInboxFloats);
    const float4 ml = other[kSlicesO];  // m of rows g, g + 8, then their l
    const float m_other[2] = {ml.x, ml.y}, l_other[2] = {ml.z, ml.w};
    float a[2], a_other[2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float m_new = fmaxf(m_i[hh], m_other[hh]);  // both finite: each piece sees each row
      a[hh] = exp2f(m_i[hh] - m_new);
      a_other[hh] = exp2f(m_other[hh] - m_new);
      m_i[hh] = m_new;
      l_row[hh] = a[hh] * l_row[hh] + a_other[hh] * l_other[hh];
    }
#pragma unroll
    for (int nn = 0; nn < kSlicesO; ++nn) {
      const float4 x = other[nn];
      o[nn][0] = a[0] * o[nn][0] + a_other[0] * x.x;
      o[nn][1] = a[0] * o[nn][1] + a_other[0] * x.y;
      o[nn][2] = a[1] * o[nn][2] + a_other[1] * x.z;
      o[nn][3] = a[1] * o[nn][3] + a_other[1] * x.w;
    }
  }

  // O_i = diag(l)^-1 O_i, straight from registers to global memory (version 20's store).
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const float inv_l = 1.0f / l_row[hh];
    const int row = row_g + 8 * hh;
    if (row >= T) continue;
    float* o_row = o_bh + static_cast<size_t>(row) * C;
#pragma unroll
    for (int nn = 0; nn < kSlicesO; ++nn)
      *reinterpret_cast<float2*>(o_row + kMmaN * nn + 2 * t) =
          make_float2(o[nn][2 * hh] * inv_l, o[nn][2 * hh + 1] * inv_l);
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
  if (narrow_row_blocks(a, limits) > 0) return 0;  // its pieces merge on chip
  const SplitPlan plan = plan_splits(a, limits);
  if (plan.max_splits == 1) return 0;
  return sizeof(float) * kPartialFloats * static_cast<size_t>(a.batch * a.num_heads) *
         plan.row_blocks * plan.max_splits;
}

LaunchConfig launch_config(const Args& a, const DeviceLimits& limits) {
  const Tiles t = kTiles;
  // The narrow plan: one block of kNarrowThreads per 64-row block.
  if (narrow_row_blocks(a, limits) > 0)
    return {dim3(static_cast<unsigned>(narrow_plan(a, limits).blocks)), dim3(kNarrowThreads),
            narrow_smem_bytes(t)};
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
  // 1/sqrt(d) and log2(e), folded into Q: the kernel works in powers of 2.
  const float q_scale = 1.4426950408889634f / sqrtf(static_cast<float>(kHeadDim));
  const Strides q_stride{a.q_batch_stride, static_cast<int>(a.q_row_stride)};
  const Strides k_stride{a.k_batch_stride, static_cast<int>(a.k_row_stride)};
  const Strides v_stride{a.v_batch_stride, static_cast<int>(a.v_row_stride)};
  const int T = static_cast<int>(a.seq_len), H = static_cast<int>(a.num_heads);
  if (narrow_row_blocks(a, limits) > 0) {
    auto* narrow = narrow_attention_kernel<kHeadDim, kTiles.B_c>;
    err = cudaFuncSetAttribute(narrow, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(cfg.smem_bytes));
    if (err != cudaSuccess) return err;
    const NarrowPlan plan =
        launched_narrow_plan(a, limits, reinterpret_cast<const void*>(narrow), cfg.smem_bytes);
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(plan.blocks));
    config.blockDim = cfg.block;
    config.dynamicSmemBytes = cfg.smem_bytes;
    config.stream = stream;
    cudaLaunchAttribute cluster[1] = {};
    cluster[0].id = cudaLaunchAttributeClusterDimension;
    cluster[0].val.clusterDim.x = kClusterBlocks;
    cluster[0].val.clusterDim.y = cluster[0].val.clusterDim.z = 1;
    if (plan.max_pieces > 1) {  // the pieces of a row block are one cluster
      config.attrs = cluster;
      config.numAttrs = 1;
    }
    return cudaLaunchKernelEx(&config, narrow, a.q, a.k, a.v, a.out, q_stride, k_stride, v_stride,
                              T, H, q_scale, plan.tiles_per_piece,
                              static_cast<int>(a.batch * a.num_heads));
  }
  auto* kernel = causal_attention_kernel<kHeadDim, kTiles.B_r, kTiles.B_c>;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(cfg.smem_bytes));
  if (err != cudaSuccess) return err;
  const SplitPlan plan = plan_splits(a, limits);
  // The kernel decodes its launch index x + y gridDim.x as an int.
  if (static_cast<int64_t>(cfg.grid.x) * cfg.grid.y > INT32_MAX)
    return cudaErrorInvalidConfiguration;
  float* partial = static_cast<float*>(a.workspace);
  if (plan.max_splits > 1 && partial == nullptr) return cudaErrorInvalidValue;
  kernel<<<cfg.grid, cfg.block, cfg.smem_bytes, stream>>>(
      a.q, a.k, a.v, a.out, q_stride, k_stride, v_stride, T, H, q_scale, plan.tiles_per_split,
      plan.max_splits, heads_per_group(a.batch * a.num_heads, T), partial);
  err = cudaGetLastError();
  if (err != cudaSuccess || plan.max_splits == 1) return err;
  const dim3 merge_grid(cfg.grid.x, plan.row_blocks);
  merge_splits<kHeadDim, kTiles.B_r><<<merge_grid, kMergeThreads, 0, stream>>>(
      partial, a.out, T, H, plan.key_tiles, plan.tiles_per_split, plan.max_splits);
  return cudaGetLastError();
}

}  // namespace causal_attention
