// Half-precision version 24: half-precision version 23 with a short form of the narrow kernel,
// two blocks of it per SM, for prompts of at most two key tiles (T <= 256).
// At batched short prompts (B >= 16, T <= 256) h23's narrow blocks (one per SM: 140 KB of
// shared memory for four K/V stages, 238 registers for two S buffers) took more than three
// waves, so the plan fell back to 192-row blocks: at B=64 T=64, 768 items of one key tile,
// six after one another on each SM, two of each block's three warpgroups without rows. A
// block of one or two key tiles has nothing to overlap from tile to tile, so its short form
// keeps one S buffer (S_t issued once P_{t-1} is packed, then waited for; P_{t-1} V_{t-1}
// still runs beside S_t's softmax) and two stages: 160 registers, no spills, 74,792 bytes
// of shared memory, and two blocks share an SM (__launch_bounds__(160, 2)). The plan counts
// two blocks per SM when it asks whether the narrow blocks take at most kNarrowWaves waves,
// so B=64 T=64, B=32 T=128 and B=16 T=256 (768 blocks each) run narrow now. Longer prompts
// run h23's narrow kernel or its three-consumer kernel, unchanged.
//
// h23's notes, kept as they were:
//
// Half-precision version 23: half-precision version 22 with the check for a grown maximum
// made of the exponentials themselves, on every tile after an item's first.
// h22 found the largest exponent x = c s - c m of each lane with 64 FMNMX beside the MUFU and
// voted on it. Here P carries a constant factor 2^-7 (P = 2^(c s - c m - 7), in every tile
// and row; O = (P V) / (P 1) cancels it), so a row grew past 2^8 exactly where some P
// reaches 2: float32 exponent 128, bit 30 of P's bits (inf and NaN too). The lane ORs P's
// bits together (33 LOP3, three operands each, instead of 71 FMNMX) and the warp votes on
// bit 30. The vote now depends on every exponential, so no compiler can move the
// exponentials behind the vote's branch; that let the masked tiles (the diagonal, T's
// end) take the exponentials-first path too, which in h22's form saw the vote hoisted
// above their MUFU.EX2. Each item's first tile (m = -inf) keeps the exact path.
//
// h22's notes, kept as they were:
//
// Half-precision version 22: half-precision version 21 with the exponentials of an unmasked
// tile before its maximum, in the three-consumer kernel.
// h21's softmax found each row's maximum first (a tree of FMNMX, two shuffles per row, the
// lazy vote) and only then started the 64 exponentials that the MUFU takes 8 cycles each to
// issue: about 300 cycles of every step's chain before the first MUFU.EX2. The lazy rescale
// keeps m unless a row's maximum grew past 2^8 in P's scale, so the exponent x = c s - c m
// is known as soon as S is, with the m the rows have. Here, for every unmasked tile after an
// item's first, P = 2^x at once, and the largest x of the lane is found beside the MUFU
// (from the FFMA's results, filling the MUFU's issue shadow); one vote after them asks
// whether a row of the warp would see P above 2^8 (exactly where h21 would move m). If none
// does, P is h21's, bit for bit. If one does, S is computed again for the warp's 16 rows
// by mma.sync from the tiles still in shared memory (P may have overflowed float32: c (s - m)
// >= 128), and h21's softmax takes the tile. Masked tiles and each item's first tile are
// h21's. The narrow kernel is h21's.
//
// h21's notes, kept as they were:
//
// Half-precision version 21: half-precision version 20 with fewer instructions in each step
// of the three-consumer kernel, two ways:
// - the lazy rescale (FlashAttention-4's): a warp moves its rows' maximum m only when one of
//   them grew by more than 2^8 in P's scale, so O's rescale (36 FMULs per thread) and the
//   exponential of alpha run only then, and P reaches up to 2^8 in between. The row sums of
//   the 16-bit P that multiplies V (h20's, from the tensor cores) keep this within the
//   study's bound; sums of the float32 P did not (h07's notes).
// - the wgmma descriptors stepped through k by adding to their low word: one add per k step
//   instead of the mask, shift and or of operand_descriptor (and, for P V, the ones' offset)
//   computed again for every k step; 43 fewer instructions in each step's turn.
// The narrow kernel is h20's.
//
// h20's notes, kept as they were:
//
// Half-precision version 20: half-precision version 19 with the three-consumer kernel's row
// sums l computed by the tensor cores: P V becomes m64n72k16, V's 64 columns and then 8
// columns of ones (a constant 2 KB of shared memory, reached through the descriptor's
// leading byte offset), so that the product's columns 64-71 hold each row's sum of P. The
// softmax no longer adds P's rows up (64 FADDs per thread per tile and their reduction
// trees); the sums come from the 16-bit P that multiplies V, and are rescaled with O. The
// narrow kernel is h19's (its softmax still sums).
//
// h19's notes, kept as they were:
//
// Half-precision version 19: half-precision version 18 with the three-consumer kernel's
// items back to back: an item's last product, P V of its last tile, is issued in the next
// item's first turn behind S_0 (as every step issues S_t and the previous P V) and runs
// while S_0's softmax does; the rows are stored once it is complete. h18 gave that product
// a turn of its own after the item, and S_0 one before the next: two turns with one product
// and nothing beside it. A warpgroup now takes n turns per item of n tiles, and one more
// after its block's last item. The narrow kernel is h18's.
//
// h18's notes, kept as they were:
//
// Half-precision version 18: half-precision version 17 with its narrow row blocks up to three
// waves of the SMs (B=1, H=12: T <= 2,112), not two.
//
// h14's three-wave trial (h14b_1) lost 16% at B=1 T=2048: 25 narrow tiles per SM in the
// three-consumer kernel took longer than h13's split plan. The narrow kernel of h16 and h17
// starts each block about 1.3 us sooner and takes no turns, and at T=2048 its 384 narrow
// blocks now beat the split plan and its merge by 1-3%. Only kNarrowWaves changes.
//
// h17's notes, kept as they were:
//
// Half-precision version 17: half-precision version 16 with S of the next tile issued before
// this tile's softmax in the narrow kernel.
//
// h16's lone warpgroup issued S_t with P_{t-1} V_{t-1} and then waited for S_t before its
// softmax: every tile's chain held S_t's 256 tensor cycles and their latency, then the
// softmax. Here the narrow kernel keeps two S buffers. Step t issues S_{t+1} and
// P_{t-1} V_{t-1} and runs the softmax of S_t, which completed during the step before, while
// they run (measured: 0.2-0.6 us less at B=1, T >= 256, a fixed part rather than one per tile;
// the notes have the numbers and the code size it costs). The wgmma queue takes about
// 8 at once (the experiments notes' overlap probe), so the step issues S_{t+1} and half of
// P V before the softmax and the other half once the rows' maxima are known. Each step waits
// for all its products before the next one, so that no accumulator is in flight across the
// loop's back edge (ptxas serialises every wgmma otherwise). Every step but the last is left
// of the diagonal, so only the last takes the masked softmax. The three-consumer kernel is
// h16's.
//
// h16's notes, kept as they were:
//
// Half-precision version 16: half-precision version 15 with its narrow row blocks in a kernel
// of their own: one consumer warpgroup and a producer warp, no turns.
//
// h14 and h15 ran a narrow block (64 rows) in the three-consumer kernel: its last warpgroup
// computed the rows and the other two idled, but still took part in every turn at the tensor
// cores, and the block carried the persistent grid's machinery for its one item (512
// threads, setmaxnreg, two Q buffers, the item decoded by the producer and again by every
// consumer). Here the narrow plan launches narrow_attention_kernel: warps 0-3 are the only
// consumer, warp 4 issues the copies, nothing waits for a turn, and block b computes item b.
// With 160 threads a block's registers are its own (up to 255 per thread, no setmaxnreg).
// (Measured: each block starts about 1.3 us sooner; a key tile costs what it did. The notes
// have the numbers.) Every other plan runs h15's kernel, unchanged.
//
// h15's notes, kept as they were:
//
// h14 used 64-row blocks where all of them fit on the SMs at once (B=1, H=12: T <= 704). At
// B=1 T=1024 its 192-row blocks were split and merged (1.06x cuDNN). Here the narrow blocks
// are used where they take up to two waves (B=1, H=12: T <= 1,408): the blocks go longest
// first, so the second wave is the short ones, and the hardware hands each to the SM that
// finishes first. Three waves lose (T=2048: a lone warpgroup's tiles cost more than h13's
// split blocks); the notes have the numbers.
//
// h14's notes, kept as they were:
//
// At B=1 and T <= 512 h13's 192-row blocks are few (24 at T=256) and each one's chain is long:
// the three warpgroups take turns at the tensor cores, so a key tile costs a block about three
// warpgroups' products and a softmax, and at T=512 the keys are split and merged by a second
// kernel. Here, where B H ceil(T / 64) blocks of 64 rows fit on the SMs at once, every row
// block is 64 rows: the block's last warpgroup computes them, alone at the tensor cores, and
// the other two are idle (h13's path for warpgroups without rows: they release each tile and
// pass the turns). No split, no merge: a block's chain is its own rows' key tiles, at most
// ceil(T / 128), each a single warpgroup's products and softmax.
//
// Everything else is h13's.
#include "../common/attention_launch.h"

#include <cuda.h>  // CUtensorMap and its enums (types only: the driver is reached at run time)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

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

// Shared memory, every tile 1,024-byte aligned for the swizzle: two Q_i buffers (three 8 KB
// thirds each, one per warpgroup), kStages x (K_j, V_j), the mbarriers, then the item number
// of each Q buffer; 1 KB of slack to align the start: 181,352 bytes, over the 48 KB default
// (the launcher opts in).
// Per stage a "tile landed" and a "tile released" barrier; per Q buffer a "landed" and a
// "released" one.
constexpr int kQBuffers = 2;  // this item's Q and the next one's
constexpr int kQBytes = kWarpgroups * kQTileBytes;  // one item's Q_i: 24 KB
constexpr int kBarriers = 2 * kStages + 2 * kQBuffers;
// Two atoms of ones (8 keys of 64 columns each, 2 KB): the columns 64-71 of P V's B operand,
// whose products are P's row sums.
constexpr int kOnesBytes = 2 * kAtomBytes;
size_t smem_bytes(Tiles) {
  return kAtomBytes + static_cast<size_t>(kQBuffers) * kQBytes +
         static_cast<size_t>(2 * kStages) * kKVTileBytes + kOnesBytes +
         kBarriers * sizeof(uint64_t) + kQBuffers * sizeof(int);
}

__host__ __device__ int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Thread blocks one SM holds at once: one (512 threads of 128 registers at launch, and 153 KB
// of shared memory). The split plan counts on one.
constexpr int kBlocksPerSm = 1;

// The row blocks: W warpgroups of rows each, W = 3 (192 rows, the blocks of h04-h13) or W = 1
// (narrow: 64 rows, computed by the block's last warpgroup while the other two are idle).
// They are laid from T's end: the last ends at T rounded up to a multiple of 64 rows (so that
// every warpgroup's rows start at a multiple of 64, as h12's diagonal halves need), and the
// first begins lead() = 0, 64 or 128 rows before row 0 (always 0 when narrow). A warpgroup
// whose rows lie before row 0, or outside a narrow block's 64, has nothing to compute.
struct RowBlocks {
  int T;  // the sequence length
  int W;  // warpgroups with rows per row block: 3, or 1 for narrow blocks
  __host__ __device__ int rows() const { return W * kWarpgroupRows; }  // B_r
  __host__ __device__ int count() const { return ceil_div(T, rows()); }  // T_r
  __host__ __device__ int lead() const {
    return count() * rows() - ceil_div(T, kWarpgroupRows) * kWarpgroupRows;
  }
  // The first row of warpgroup w of row block i: warpgroups 3 - W .. 2 hold the block's rows;
  // the rows of the others (and, in the first block, rows before row 0) are not computed.
  __host__ __device__ int warpgroup_row(int i, int w) const {
    return i * rows() - lead() + (w - (kWarpgroups - W)) * kWarpgroupRows;
  }
  __host__ __device__ bool has_rows(int i, int w) const {
    return w >= kWarpgroups - W && warpgroup_row(i, w) >= 0;
  }
  // Warpgroup w's diagonal key tile in row block i: the tile holding its 64 rows (for a
  // warpgroup that has rows).
  __host__ __device__ int diagonal_tile(int i, int w) const {
    return warpgroup_row(i, w) / kTiles.B_c;
  }
  // The key tiles row block i walks: up to its last warpgroup's diagonal, within T. The last
  // warpgroup always has rows (lead() <= 128 = B_r - 64 for W = 3; 0 for W = 1).
  __host__ __device__ int tiles(int i) const {
    return min(diagonal_tile(i, kWarpgroups - 1) + 1, ceil_div(T, kTiles.B_c));
  }
};

// How the keys are split (h01's plan). Row block i's n_i tiles are cut, from its last tile
// back, into splits of at most L >= 2 tiles: split s holds [n_i - (s + 1) L, n_i - s L).
// Narrow row blocks are used, unsplit, where they take at most kNarrowWaves waves of the SMs
// (B=1, H=12: T <= 2,112); elsewhere 192-row blocks, split as in h13.
constexpr int kNarrowWaves = 3;
// Where T is at most kShortStages key tiles, the narrow blocks run the short form
// of the narrow kernel (one S buffer, kShortStages stages: 160 registers and 73 KB), and
// kShortBlocksPerSm of them share an SM, so that more of them, and more bytes, are in flight.
constexpr int kShortStages = 2;
constexpr int kShortBlocksPerSm = 2;
struct SplitPlan {
  int warpgroups;  // W: 3, or 1 for narrow row blocks
  int row_blocks;  // T_r
  int tiles_per_split;  // L
  int max_splits;  // splits of the longest row block
  bool short_rows;  // narrow blocks in the short kernel (T <= kShortStages B_c)
};

SplitPlan plan_splits(const HalfArgs& a, const DeviceLimits& limits) {
  const int T = static_cast<int>(a.seq_len);
  const int64_t heads = a.batch * a.num_heads;
  const int64_t slots = static_cast<int64_t>(limits.sm_count) * kBlocksPerSm;
  const RowBlocks narrow = {T, 1};
  const bool short_rows = T <= kShortStages * kTiles.B_c;
  const int64_t narrow_slots =
      static_cast<int64_t>(limits.sm_count) * (short_rows ? kShortBlocksPerSm : 1);
  if (heads * narrow.count() <= kNarrowWaves * narrow_slots)
    return {narrow.W, narrow.count(), narrow.tiles(narrow.count() - 1), 1, short_rows};
  const RowBlocks rb = {T, kWarpgroups};
  const int T_r = rb.count();
  int64_t work = 0;  // key tiles of every row block of one (batch, head)
  for (int i = 0; i < T_r; ++i) work += rb.tiles(i);
  const int longest = rb.tiles(T_r - 1);
  // At least 2, so that a row block's first split reaches its first warpgroup's diagonal,
  // and the first row block (at most 2 tiles, with the warpgroups that have no rows) is
  // never split.
  int64_t L = std::max<int64_t>((heads * work + slots - 1) / slots, 2);
  // Splits of that length can make more items than SMs (B=1, T=1024: 144 items of up to 3
  // tiles on 132 SMs), and the last ones then run behind the first on the SMs that finish
  // first. One more tile per split is the better trade where it fits every item in one wave.
  const auto items_at = [&](int64_t length) {
    int64_t per_head = 0;
    for (int i = 0; i < T_r; ++i) per_head += (rb.tiles(i) + length - 1) / length;
    return heads * per_head;
  };
  if (L < longest && items_at(L) > slots && items_at(L + 1) <= slots) ++L;
  if (L >= longest) return {rb.W, T_r, longest, 1, false};
  return {rb.W, T_r, static_cast<int>(L), ceil_div(longest, static_cast<int>(L)), false};
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
#define ATTN_D72                                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35}"
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
    /* P V with a ninth slice of columns: V's 64, then 8 columns of ones (their sums). */        \
    __device__ static void wgmma_pv_sums(float (&d)[9][4],                                       \
                                         const uint32_t (&a)[4],                                 \
                                         uint64_t b_desc) {                                      \
      asm volatile("wgmma.mma_async.sync.aligned.m64n72k16.f32." PTX_TYPE "." PTX_TYPE           \
                   " " ATTN_D72 ", {%36, %37, %38, %39}, %40, 1, 1, 1, 1;\n"                     \
                   : ATTN_D_OPERANDS_8(d), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),          \
                     "+f"(d[8][3])                                                               \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc)                     \
                   : "memory");                                                                  \
    }                                                                                            \
    /* One warp's m16n8k16 (mma.sync): S again, from shared memory, on the rare slow path. */    \
    __device__ static void mma_s(float (&d)[4],                                                  \
                                 const uint32_t (&a)[4],                                         \
                                 uint32_t b0,                                                    \
                                 uint32_t b1) {                                                  \
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." PTX_TYPE "." PTX_TYPE                \
                   ".f32 "                                                                       \
                   "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"           \
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                              \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));              \
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
#undef ATTN_D72
#undef ATTN_D_OPERANDS_16
#undef ATTN_D_OPERANDS_8

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 matrices of 16-bit values from shared memory (ldmatrix): lane l gives the address
// of a 16-byte row of matrix l / 8 and gets, of each matrix x, the pair at row l / 4,
// columns 2 (l % 4) and 2 (l % 4) + 1 in r[x]: the A and B fragments of mma.sync.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
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

// The descriptor in two words: the high one (the stride, the swizzle) is the same for every
// operand here, and the low one holds start >> 4 (bits 0-13) and the leading byte offset >> 4
// (bits 16-29). The three-consumer kernel steps through k by adding to the low word alone:
// no field carries into the next (a start below 228 KB is below 2^14 x 16 bytes), where
// operand_descriptor's mask and shift would be computed again for every k step.
constexpr uint32_t kDescriptorHigh = (kAtomBytes >> 4) | 1u << 30;
__device__ __forceinline__ uint32_t descriptor_low(uint32_t start) {
  return (start & 0x3FFFF) >> 4 | (kAtomBytes >> 4) << 16;
}
__device__ __forceinline__ uint64_t descriptor(uint32_t low) {
  return static_cast<uint64_t>(kDescriptorHigh) << 32 | low;
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
// col0; masks as kMask says (below), turns s into
// P_ij = 2^(c s - c m_new) in place, updates m and this lane's part of l; alpha gets each
// row's 2^(c m_old - c m_new). Element e of slice n sits in row g + 8 (e / 2), column
// 8n + 2t + e % 2; partial x of a row collects slices n with (2n + e % 2) % kParts == x.
//
// Which entries a tile masks. A warpgroup's 64 rows start at column 0 or 64 of its diagonal
// tile (192 i + 64 w is a multiple of 64), so that tile is known half by half at compile
// time: with the rows at 0 (kDiagonalLow) columns 64-127 lie right of every row and cost
// nothing (P = 0, no exponential, no maximum), columns 0-63 are a triangle; with the rows at
// 64 (kDiagonalHigh) columns 0-63 are visible and 64-127 a triangle. kEdge masks by column
// and by T, for the tile holding T's end when T is not a multiple of B_c.
enum Mask { kNone, kEdge, kDiagonalLow, kDiagonalHigh };
template <Mask kMask>
__device__ __forceinline__ bool slice_masked(int n) {  // every entry of slice n is masked
  return kMask == kDiagonalLow && n >= kSlicesS / 2;
}
template <Mask kMask>
__device__ __forceinline__ bool slice_triangle(int n) {  // slice n crosses the diagonal
  return (kMask == kDiagonalLow && n < kSlicesS / 2) ||
         (kMask == kDiagonalHigh && n >= kSlicesS / 2);
}
// after_max runs once the rows' maxima are known, before the exponentials (the narrow
// kernel issues the rest of its P V there).
struct Nothing {
  __device__ void operator()() const {}
};
// kLazy (FlashAttention-4's lazy rescale): m moves only where a row of the warp would see
// P above 2^kLazyLog2 with the m it has; otherwise alpha = 1 and P = 2^(c s - c m) with the
// old m, up to 2^kLazyLog2. Only where the row sums are of the 16-bit P that multiplies V
// (the tensor cores' sums): with sums of the float32 P a stale m fails the study's bound
// (h07's notes).
constexpr float kLazyLog2 = 8.0f;
// With kLazy every P is 2^(c s - c m - kLazyBias): the same factor 2^-7 in every tile and
// every row, which O = (P V) / (P 1) cancels. P reaches 2 (float32 exponent 128: bit 30 set)
// exactly where 2^(c s - c m) reaches 2^kLazyLog2, so one OR of P's bits finds a row that
// grew past the bound (exponentials_first).
constexpr float kLazyBias = kLazyLog2 - 1.0f;
template <Mask kMask, typename AfterMax = Nothing, bool kRowSums = true, bool kLazy = false>
__device__ void softmax_rows(float (&s)[kSlicesS][4],
                             int row_g,
                             int col0,
                             int T,
                             float c,
                             float (&m)[2],
                             float (&l)[2],
                             float (&alpha)[2],
                             AfterMax after_max = {}) {
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
      if (slice_masked<kMask>(n)) continue;
      if (kMask == kEdge) {
        const int row = row_g + 8 * (e / 2), col = col0 + kMmaN * n + 2 * t + e % 2;
        if (!(col <= row && col < T)) s[n][e] = -INFINITY;
      }
      // Column 8n + e % 2 + (col0 + 2t) against the row: one compare with a constant.
      if (slice_triangle<kMask>(n) && kMmaN * n + e % 2 > row_g + 8 * (e / 2) - col0 - 2 * t)
        s[n][e] = -INFINITY;
      float& p = part[e / 2][(2 * n + e % 2) % kParts];
      p = fmaxf(p, s[n][e]);
    }
  const auto max_op = [](float x, float y) { return fmaxf(x, y); };
  float neg_cm[2];  // -c m_new per row: the FFMA's addend
  float tile_max[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) tile_max[h] = row_max(tree(part[h], max_op));
  // Lazy: the warp moves its rows' m only if one of them grew by more than 2^kLazyLog2 (a
  // warp-uniform branch); m = -inf before a row's first tile always moves.
  bool grow = true;
  if (kLazy) {
    grow = false;
#pragma unroll
    for (int h = 0; h < 2; ++h) grow = grow || c * (tile_max[h] - m[h]) > kLazyLog2;
    grow = __any_sync(0xffffffffu, grow);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // Every row has an unmasked entry in the first tile it meets (its own column, or for
    // rows past T column 0), and m never decreases, so m_new is finite.
    if (grow) {
      const float m_new = fmaxf(m[h], tile_max[h]);
      alpha[h] = exp2f(c * (m[h] - m_new));  // rescales the old O and l; 0 on the first tile
      m[h] = m_new;
    } else {
      alpha[h] = 1.0f;
    }
    neg_cm[h] = -c * m[h] - (kLazy ? kLazyBias : 0.0f);
  }
  after_max();
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int x = 0; x < kParts; ++x) part[h][x] = 0.0f;
#pragma unroll
  for (int n = 0; n < kSlicesS; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (slice_masked<kMask>(n)) {
        s[n][e] = 0.0f;
        continue;
      }
      s[n][e] = exp2f(fmaf(c, s[n][e], neg_cm[e / 2]));  // 2^-inf = 0 for masked entries
      if (kRowSums) part[e / 2][(2 * n + e % 2) % kParts] += s[n][e];
    }
  // Without kRowSums the caller sums P's rows elsewhere (the three-consumer kernel: at the
  // tensor cores, P times a column of ones).
  const auto add_op = [](float x, float y) { return x + y; };
  if (kRowSums) {
#pragma unroll
    for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + tree(part[h], add_op);
  }
}

// The lazy softmax of a tile with its exponentials first (h22, here for every mask).
// softmax_rows finds the rows' maxima (a tree of FMNMX, two shuffles per row, a vote) before
// the first exponential can start. Here every entry becomes P = 2^(x - kLazyBias),
// x = c s - c m, with the m the rows have (masked entries: P = 0), and the lane ORs P's
// bits together beside the MUFU. One vote after the last exponential asks the warp whether
// some P has bit 30 set (P >= 2, inf or NaN), i.e. whether some row would see x above
// kLazyLog2: exactly where softmax_rows with kLazy would move m. If none does, P is what
// softmax_rows would have made of S (alpha = 1, m kept), bit for bit. If one does (true is
// returned), s holds P, perhaps inf, and the caller computes S again and takes the exact
// path.
template <Mask kMask>
__device__ __forceinline__ bool exponentials_first(
    float (&s)[kSlicesS][4], int row_g, int col0, int T, float c, const float (&m)[2]) {
  const int t = threadIdx.x % kRowLanes;
  const float neg_cm[2] = {-c * m[0] - kLazyBias, -c * m[1] - kLazyBias};
  uint32_t bits[4] = {0u, 0u, 0u, 0u};  // OR of P's bits: 4 chains of 16
#pragma unroll
  for (int n = 0; n < kSlicesS; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (slice_masked<kMask>(n)) {  // right of every row: P = 0, no exponential
        s[n][e] = 0.0f;
        continue;
      }
      // softmax_rows's masks: s = -inf gives P = 0.
      if (kMask == kEdge) {
        const int row = row_g + 8 * (e / 2), col = col0 + kMmaN * n + 2 * t + e % 2;
        if (!(col <= row && col < T)) s[n][e] = -INFINITY;
      }
      if (slice_triangle<kMask>(n) && kMmaN * n + e % 2 > row_g + 8 * (e / 2) - col0 - 2 * t)
        s[n][e] = -INFINITY;
      s[n][e] = exp2f(fmaf(c, s[n][e], neg_cm[e / 2]));
      bits[e] |= __float_as_uint(s[n][e]);
    }
  // Bit 30 (exponent 128 and up: P >= 2, inf or NaN) in some P of the warp.
  return __any_sync(0xffffffffu, ((bits[0] | bits[1]) | (bits[2] | bits[3])) & (1u << 30));
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

// One work item: a split of a row block of one (batch, head), in h08's order. Item k of
// group `group` (heads group * group_heads .., in_group of them) is slot y = local / in_group
// of head bh = group * group_heads + local % in_group, local = k - its group's first item; y =
// (T_r - 1 - i) * max_splits + split numbers a head's row blocks longest-first, the splits
// of one row block next to each other.
struct WorkItem {
  int bh, y;  // head (b H + h) and slot: where a split leaves its partial result
  int i;  // row block
  int j_begin, n;  // key tiles [j_begin, j_begin + n), counted from the row block's last back
  int splits;  // of row block i
};

// Item k as a WorkItem; false for a slot its row block does not use (fewer splits than the
// longest row block's).
__device__ __forceinline__ bool decode(int k,
                                       int heads,
                                       int row_blocks,
                                       int group_heads,
                                       int tiles_per_split,
                                       int max_splits,
                                       const RowBlocks& rb,
                                       WorkItem* item) {
  const int per_head = row_blocks * max_splits;
  const int group = k / (group_heads * per_head);
  const int in_group = min(group_heads, heads - group * group_heads);
  const int local = k - group * group_heads * per_head;
  item->bh = group * group_heads + local % in_group;
  item->y = local / in_group;
  item->i = row_blocks - 1 - item->y / max_splits;
  const int split = item->y % max_splits;
  const int n_i = rb.tiles(item->i);
  item->splits = ceil_div(n_i, tiles_per_split);
  if (split >= item->splits) return false;
  // Split 0 holds the diagonal tiles.
  const int j_end = n_i - split * tiles_per_split;
  item->j_begin = max(0, j_end - tiles_per_split);
  item->n = j_end - item->j_begin;
  return true;
}

// __launch_bounds__ with a block count gives the kernel a register cap at entry (168),
// which setmaxnreg then redistributes. The grid is persistent: block b takes item b first,
// then the items the counter hands it (see the producer).
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
                            int W,
                            int H,
                            int heads,
                            float c,
                            int row_blocks,
                            int group_heads,
                            int tiles_per_split,
                            int max_splits,
                            float* __restrict__ partial,
                            int* __restrict__ next_item) {
  using Ops = HalfOps<Element>;
  constexpr int d = kHeadDim, B_r = kTiles.B_r, B_c = kTiles.B_c;
  const RowBlocks rb = {T, W};
  // The merge kernel, launched behind this one as a programmatic dependent, may be scheduled
  // once every block of this grid has started; it waits (griddepcontrol.wait) for this grid
  // to complete before it reads anything, so starting early costs nothing but a free SM.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  extern __shared__ __align__(128) char smem_raw[];
  // The swizzle repeats every 1,024 bytes and the descriptors assume tiles start on it.
  char* smem = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem_raw) + kAtomBytes - 1) &
                                       ~static_cast<uintptr_t>(kAtomBytes - 1));
  char* Q_buf = smem;  // [kQBuffers][3][64][d]: each warpgroup's rows, per buffer
  char* K_buf = Q_buf + kQBuffers * kQBytes;  // [kStages][B_c][d]
  char* V_buf = K_buf + kStages * kKVTileBytes;  // [kStages][B_c][d]
  char* ones = V_buf + kStages * kKVTileBytes;  // [2][8][64] ones: see issue_pv
  uint64_t* landed = reinterpret_cast<uint64_t*>(ones + kOnesBytes);  // [kStages]
  uint64_t* released = landed + kStages;  // [kStages]
  uint64_t* q_landed = released + kStages;  // [kQBuffers]
  uint64_t* q_released = q_landed + kQBuffers;  // [kQBuffers]
  // [kQBuffers]: the item whose Q a buffer holds, written by the producer before its arrival
  // on q_landed (a release) and read by the consumers after their wait (an acquire).
  volatile int* item_of = reinterpret_cast<volatile int*>(q_released + kQBuffers);

  const int C = H * d;
  const int T_c = ceil_div(T, B_c);
  const int items = heads * row_blocks * max_splits;

  if (threadIdx.x == 0) {
    for (int st = 0; st < kStages; ++st) {
      barrier_init(&landed[st], 1);  // the producer's arrival (and the bytes)
      barrier_init(&released[st], kConsumerThreads);  // every consumer thread arrives
    }
    for (int qb = 0; qb < kQBuffers; ++qb) {
      barrier_init(&q_landed[qb], 1);  // the producer's arrival (and the bytes, if any)
      barrier_init(&q_released[qb], kConsumerThreads);  // every consumer's S products done
    }
    barrier_init_fence();
  }
  // The ones, written once by every thread, for the async proxy (wgmma) to read.
  for (int x = threadIdx.x; x < kOnesBytes / 16; x += blockDim.x) {
    const uint32_t one_pair = Ops::pack(1.0f, 1.0f);
    reinterpret_cast<uint4*>(ones)[x] = make_uint4(one_pair, one_pair, one_pair, one_pair);
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  // Guards the barriers and the ones: initialised before anyone uses them. The last
  // block-wide barrier:
  // from here on the producer and the consumers go their own ways (one branch each, as
  // setmaxnreg wants).
  __syncthreads();

  if (threadIdx.x >= kConsumerThreads) {
    // The producer warpgroup; one thread issues everything, item after item. Item number q
    // of this block (q = 0, 1, ...) puts its Q into buffer q % 2 once the consumers have
    // released that buffer's previous item (phase q / 2 - 1 of q_released), and its number
    // into item_of. The K/V tiles of all the block's items form one sequence: tile number
    // `tile` goes into stage tile % kStages, its round r = tile / kStages, and from the
    // second round on waits until the stage's previous tile was released (phase r - 1).
    release_registers<kProducerRegisters>();
    if (threadIdx.x == kConsumerThreads) {
      int tile = 0;  // the block's K/V tiles so far
      int k = blockIdx.x;  // the block's next item: block b's first is item b
      // Each later one is the counter's value plus the grid's size. With no more items than
      // blocks each block has only its own, and the counter is neither zeroed nor touched.
      const auto draw = [&] {
        return items <= static_cast<int>(gridDim.x)
                   ? items
                   : static_cast<int>(gridDim.x) + atomicAdd(next_item, 1);
      };
      WorkItem item;
      for (int q = 0;; ++q) {
        // Skip the slots no row block uses: the consumers see only real items.
        while (k < items &&
               !decode(k, heads, row_blocks, group_heads, tiles_per_split, max_splits, rb, &item))
          k = draw();
        const int qb = q % kQBuffers;
        if (q >= kQBuffers) barrier_wait(&q_released[qb], (q / kQBuffers - 1) % 2);
        if (k >= items) {
          item_of[qb] = -1;  // no more items: the consumers leave
          barrier_arrive(&q_landed[qb]);
          break;
        }
        item_of[qb] = k;
        const int b = item.bh / H, h = item.bh % H;
        // The rows of the W warpgroups that hold the block's rows, those before row 0 or
        // past T read as zeros (the bytes counted all the same).
        barrier_expect_bytes(&q_landed[qb], W * kQTileBytes);
        for (int w = kWarpgroups - W; w < kWarpgroups; ++w)
          tma_load_tile(Q_buf + qb * kQBytes + w * kQTileBytes, q_map, h * d,
                        rb.warpgroup_row(item.i, w), b, q_coords, &q_landed[qb]);
        for (int t = 0; t < item.n; ++t, ++tile) {
          const int st = tile % kStages, round = tile / kStages;
          if (round > 0) barrier_wait(&released[st], (round - 1) % 2);
          barrier_expect_bytes(&landed[st], 2 * kKVTileBytes);
          const int row = (item.j_begin + t) * B_c;
          tma_load_tile(K_buf + st * kKVTileBytes, k_map, h * d, row, b, k_coords, &landed[st]);
          tma_load_tile(V_buf + st * kKVTileBytes, v_map, h * d, row, b, v_coords, &landed[st]);
        }
        k = draw();
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

  float m_i[2], l_i[2];  // l_i unused: P's row sums come from the tensor cores (o's slice 8)
  float o[kSlicesO + 1][4];  // O_i's 8 slices, then 8 columns that each hold the rows' sums l
  float s[kSlicesS][4];  // S_t, then P_t in float32, in place
  uint32_t p_frag[kStepsPV][4];  // P_t in 16 bits: the A operand of the next step's product

  // The turns go round the consumers from item to item: the first is the first warpgroup's
  // (the last warpgroup passes it here), and every warpgroup takes n turns per item, the
  // last passing to the first, and one more after its last item. Its last pass of the block
  // is taken after the loop.
  const bool last_wg = wg == kWarpgroups - 1;
  if (last_wg) pass_turn(wg);

  // O_i += P_t V_j for the block's tile number `tile`: B = V_j N-major, k step kp's 16 keys
  // two atoms (2,048 bytes) further; not committed (the caller commits the turn's group).
  // N = 72: the 64 columns of V (one atom wide), then, a leading byte offset further, the
  // ones' atom (the same two atoms of 8 keys for every k step). Column 64 + x of the product
  // is row r's sum of P over the step's 16 keys, for every x: l, summed by the tensor cores
  // from the 16-bit P that multiplies V (the softmax no longer adds P's rows up).
  const uint32_t ones_smem = smem_address(ones);
  const auto issue_pv = [&](int tile) {
    const uint32_t v_smem = smem_address(V_buf + (tile % kStages) * kKVTileBytes);
    // k step 0: V's first two atoms, the ones (ones - start) further. Each k step moves the
    // start two atoms on (+128 in units of 16 bytes) and so the ones' offset 128 back (it stays
    // at least 16 KB - 14 KB, positive).
    const uint32_t low0 = (v_smem & 0x3FFFF) >> 4 | ((ones_smem - v_smem) >> 4 & 0x3FFF) << 16;
    constexpr uint32_t kStep = (2 * kAtomBytes >> 4) - ((2 * kAtomBytes >> 4) << 16);  // mod 2^32
#pragma unroll
    for (int kp = 0; kp < kStepsPV; ++kp)
      Ops::wgmma_pv_sums(o, p_frag[kp], descriptor(low0 + kStep * kp));
  };
  // O *= alpha, row by row (alpha of the softmax before the product that adds to O next);
  // skipped where every row of the warp kept its m (alpha = 1, the lazy softmax).
  const auto rescale = [&](const float(&scale)[2]) {
    pin(o);
    if (__any_sync(0xffffffffu, scale[0] != 1.0f || scale[1] != 1.0f)) {
#pragma unroll
      for (int nn = 0; nn <= kSlicesO; ++nn)  // and the sums' slice
#pragma unroll
        for (int e = 0; e < 4; ++e) o[nn][e] *= scale[e / 2];
    }
    pin(o);
  };
  const auto wait_landed = [&](int tile) {
    barrier_wait(&landed[tile % kStages], (tile / kStages) % 2);
  };
  // Every consumer thread arrives once it (and so its warpgroup: the wgmma that read the
  // stage completed for all of it) is done with the stage; a single elected thread per
  // warpgroup would cost each warp a divergent branch and a reconvergence per tile (ncu:
  // 5% of h04's stall samples on WARPSYNC). A warpgroup that skips a tile still waits for
  // it to land first, so that its arrivals count in that tile's phase.
  const auto release = [&](int tile) { barrier_arrive(&released[tile % kStages]); };

  // h18 ended every item with its last product, P V of its last tile, alone in a turn, then
  // stored the rows, and began the next with S_0 alone in a turn: two turns a warpgroup
  // spent at the tensor cores with nothing of its own beside them. Here an item's last
  // product waits for the next item's first turn and is issued there behind S_0, where the
  // other products of a turn are issued, and runs while S_0's softmax does; the rows are
  // stored once it is complete. `last` is that item: where its product reads V, and where
  // and how its rows go.
  //
  // The product is issued whatever the item: ptxas serialises every wgmma of the kernel
  // behind one issued on a run-time condition (remark C7520). Where there is nothing to add
  // (before the block's first item, and after an item in which this warpgroup has no rows)
  // P is zero, and V is a tile that has landed and is not yet released.
  struct Finished {
    int tile;  // the block's tile number of the V that its product reads
    bool release;  // that tile is released once the product is complete
    bool store;  // it has rows to store
    int splits, bh, y, row_g;
    float m[2], l[2];  // its rows' statistics (m equal across a row's lanes, l this lane's)
  };
  // Before the first item: P = 0 times V of the block's first tile, added to O = 0.
  Finished last = {0, false, false};
#pragma unroll
  for (int nn = 0; nn <= kSlicesO; ++nn)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[nn][e] = 0.0f;
#pragma unroll
  for (int kp = 0; kp < kStepsPV; ++kp)
#pragma unroll
    for (int e = 0; e < 4; ++e) p_frag[kp][e] = 0u;  // 0 in bfloat16 and in float16
  float alpha[2] = {1.0f, 1.0f};  // of the softmax before the product that adds to O next
  // The rows of `last`, once its last product is complete: O_i = diag(l)^-1 O_i, rounded
  // once, straight from registers to global memory (lane (g, t4) stores columns 8n + 2 t4,
  // 8n + 2 t4 + 1 of rows g and g + 8, a pair each); or, for a split, its partial result.
  const auto store_rows = [&] {
    pin(o);
    if (last.release) release(last.tile);
    if (!last.store) return;
    if (last.splits == 1) {
      const int b = last.bh / H, h = last.bh % H;
      Element* o_bh = out + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * d;
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const float inv_l = 1.0f / o[kSlicesO][2 * hh];  // the row's whole sum
        const int row = last.row_g + 8 * hh;
        if (row >= T) continue;  // the last row block may end past T
        Element* o_row = o_bh + static_cast<size_t>(row) * C;
#pragma unroll
        for (int nn = 0; nn < kSlicesO; ++nn)
          *reinterpret_cast<uint32_t*>(o_row + kMmaN * nn + 2 * t4) =
              Ops::pack(o[nn][2 * hh] * inv_l, o[nn][2 * hh + 1] * inv_l);
      }
    } else {
      // A partial result for merge_splits: unnormalised O in float32, then (c m, l) per row,
      // in the slot of (head bh, slot y) (rows past T included: the merge skips them).
      float* slot = partial + (static_cast<size_t>(last.bh) * row_blocks * max_splits + last.y) *
                                  kPartialFloats;
      float* stats = slot + B_r * d;  // [B_r][2]: c m, l
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const float l = o[kSlicesO][2 * hh];  // the row's whole sum
        const int r = wg * kWarpgroupRows + kMmaM * warp + g + 8 * hh;  // row within the tile
#pragma unroll
        for (int nn = 0; nn < kSlicesO; ++nn)
          *reinterpret_cast<float2*>(slot + r * d + kMmaN * nn + 2 * t4) =
              make_float2(o[nn][2 * hh], o[nn][2 * hh + 1]);
        if (t4 == 0) *reinterpret_cast<float2*>(stats + 2 * r) = make_float2(c * last.m[hh], l);
      }
    }
  };
  // In this warpgroup's turn, after any S it issues: last's product, one group. O is
  // rescaled by last's final alpha before the turn (prescale_last): between S_0's issue and
  // this one, ptxas guarded the FMULs with a wait for S_0 (remark C7517), as it does not in
  // the loop's steps.
  const auto prescale_last = [&] { rescale(alpha); };
  const auto issue_last = [&] {
    wgmma_fence();
    issue_pv(last.tile);
    wgmma_commit();
  };

  int tile0 = 0;  // the block's tile number of this item's first tile
  for (int q = 0;; ++q) {
    const int qb = q % kQBuffers;
    barrier_wait(&q_landed[qb], (q / kQBuffers) % 2);
    // Read through a shuffle from lane 0, so that the compiler knows the item (and all that
    // is decoded from it: stages, descriptors, loop bounds) is the same in every lane.
    const int k = __shfl_sync(0xffffffffu, item_of[qb], 0);
    if (k < 0) break;
    WorkItem item;
    decode(k, heads, row_blocks, group_heads, tiles_per_split, max_splits, rb, &item);
    const int i = item.i, j_begin = item.j_begin, n = item.n;
    const int row0 = rb.warpgroup_row(i, wg);  // this warpgroup's first row
    const uint32_t q_smem = smem_address(Q_buf + qb * kQBytes + wg * kQTileBytes);
    if (!rb.has_rows(i, wg)) {
      // No rows: this warpgroup lies before row 0, in the first of the 192-row blocks (n <= 2,
      // never split), or beside a narrow block's 64 rows. It computes nothing and writes
      // nothing, but releases the Q buffer and each tile, and takes its n turns (the first
      // with the last product of its previous item), so that every barrier's count is met.
      // Its own last product is P = 0 times its last tile's V, which it releases after.
      barrier_arrive(&q_released[qb]);
      wait_landed(tile0);
      prescale_last();
      wait_turn(wg);
      issue_last();
      pass_turn(wg);
      wgmma_wait_all();
      store_rows();
      for (int t = 1; t < n; ++t) {
        wait_landed(tile0 + t);
        release(tile0 + t - 1);
        wait_turn(wg);
        pass_turn(wg);
      }
#pragma unroll
      for (int kp = 0; kp < kStepsPV; ++kp)
#pragma unroll
        for (int e = 0; e < 4; ++e) p_frag[kp][e] = 0u;
      last = {tile0 + n - 1, true, false};
      tile0 += n;
      continue;
    }
    // The tiles this warpgroup computes: all n, or n - 1 when the last lies right of its
    // diagonal (at least one: split 0 reaches d_0, the others end before it).
    const int diagonal = rb.diagonal_tile(i, wg);
    const int computed = min(j_begin + n, diagonal + 1) - j_begin;
    // This lane's rows (g and g + 8 of its warp of its warpgroup), their statistics (m equal
    // across the row's 4 lanes, l this lane's part) and its part of O_i, in D-fragment
    // layout. O is not zeroed: it still holds the last item's rows until they are stored,
    // and the first alpha of this item, 2^-inf = 0, clears it before its first P V.
    const int row_g = row0 + kMmaM * warp + g;

    // S_t = Q_i K_j^T, k step kq reading columns 16 kq .. of Q's and K's rows, 32 bytes into
    // each (swizzled) row; committed as one group.
    const auto issue_s = [&](int t) {
      const uint32_t k_smem = smem_address(K_buf + ((tile0 + t) % kStages) * kKVTileBytes);
      // k step kq: 32 bytes (+2) further into each row of Q and K.
      const uint32_t q_low = descriptor_low(q_smem), k_low = descriptor_low(k_smem);
      Ops::template wgmma_s<0>(s, descriptor(q_low), descriptor(k_low));
#pragma unroll
      for (int kq = 1; kq < kStepsQK; ++kq)
        Ops::template wgmma_s<1>(s, descriptor(q_low + 2 * kq), descriptor(k_low + 2 * kq));
      wgmma_commit();
    };
    // S_t again, for this warp's 16 rows alone, by mma.sync from the tiles in shared memory
    // (the slow path of exponentials_first, where some row's maximum grew past 2^kLazyLog2:
    // P may have overflowed and S is gone). No wgmma on a path taken at run time (C7520).
    // Both tiles are 128-byte rows with the TMA's 128-byte swizzle: 16-byte chunk ch of row r
    // lies at chunk ch ^ (r % 8). A (Q, rows x d): matrices rows 0-7 / 8-15 by k 0-7 / 8-15,
    // lane l gives row l % 16, chunk 2 kq + l / 16. B (K, keys x d): for slices 2 np and
    // 2 np + 1, lane l gives key 16 np + l % 8 + 8 (l / 16), chunk 2 kq + (l / 8) % 2.
    const auto recompute_s = [&](int t) {
      const uint32_t k_smem = smem_address(K_buf + ((tile0 + t) % kStages) * kKVTileBytes);
#pragma unroll
      for (int n = 0; n < kSlicesS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
      const int r = kMmaM * warp + lane % 16;  // this lane's row of Q for ldmatrix
#pragma unroll
      for (int np = 0; np < kSlicesS / 2; ++np) {
        const int key = 16 * np + lane % 8 + 8 * (lane / 16);  // and its key of K
#pragma unroll
        for (int kq = 0; kq < kStepsQK; ++kq) {
          uint32_t a[4], b[4];
          const int ch = 2 * kq + lane / 16, kc = 2 * kq + (lane / 8) % 2;
          ldmatrix_x4(a, q_smem + r * kRowBytes + ((ch ^ (r % 8)) << 4));
          ldmatrix_x4(b, k_smem + key * kRowBytes + ((kc ^ (key % 8)) << 4));
          Ops::mma_s(s[2 * np], a, b[0], b[1]);
          Ops::mma_s(s[2 * np + 1], a, b[2], b[3]);
        }
      }
    };
    // The online softmax of S_t in place; the warpgroup's diagonal tile and the tile holding
    // T's end (where T is not a multiple of B_c) are masked, every other tile is entirely
    // visible. An unmasked tile after the first (where m is finite) takes the exponentials
    // first, and the exact path only where a row's maximum grew past 2^kLazyLog2.
    const bool rows_low = row0 % B_c == 0;  // at column 0 of d_w
    const auto softmax = [&](int t, float(&alpha)[2]) {
      const int j = j_begin + t;
      const Mask mask = j == T_c - 1 && T % B_c != 0 ? kEdge
                        : j == diagonal              ? (rows_low ? kDiagonalLow : kDiagonalHigh)
                                                     : kNone;
      // After an item's first tile: the exponentials first, and the exact path only where a
      // row's maximum grew past 2^kLazyLog2 (S computed again). The first tile (m = -inf)
      // takes the exact path straight away.
      bool exact = t == 0;
      if (!exact) {
        if (mask == kEdge)
          exact = exponentials_first<kEdge>(s, row_g, j * B_c, T, c, m_i);
        else if (mask == kDiagonalLow)
          exact = exponentials_first<kDiagonalLow>(s, row_g, j * B_c, T, c, m_i);
        else if (mask == kDiagonalHigh)
          exact = exponentials_first<kDiagonalHigh>(s, row_g, j * B_c, T, c, m_i);
        else
          exact = exponentials_first<kNone>(s, row_g, j * B_c, T, c, m_i);
        if (exact) recompute_s(t);
      }
      if (!exact) {
        alpha[0] = alpha[1] = 1.0f;
      } else if (mask == kEdge) {
        softmax_rows<kEdge, Nothing, false, true>(s, row_g, j * B_c, T, c, m_i, l_i, alpha);
      } else if (mask == kDiagonalLow) {
        softmax_rows<kDiagonalLow, Nothing, false, true>(s, row_g, j * B_c, T, c, m_i, l_i, alpha);
      } else if (mask == kDiagonalHigh) {
        softmax_rows<kDiagonalHigh, Nothing, false, true>(s, row_g, j * B_c, T, c, m_i, l_i, alpha);
      } else {
        softmax_rows<kNone, Nothing, false, true>(s, row_g, j * B_c, T, c, m_i, l_i, alpha);
      }
    };

    // Step 0: S_0, and behind it the last item's last product; S_0's softmax while that runs.
    wait_landed(tile0);
    prescale_last();
    wait_turn(wg);
    wgmma_fence();
    issue_s(0);
    issue_last();
    pass_turn(wg);
    wgmma_wait_all_but_one();  // S_0 is complete
    pin(s);
    m_i[0] = m_i[1] = -INFINITY;
    l_i[0] = l_i[1] = 0.0f;
    softmax(0, alpha);
    wgmma_wait_all();  // the last item's P V is complete: its rows, its stage, p_frag free
    store_rows();
    pack_p<Ops>(p_frag, s);
    // Steps 1 .. computed - 1: S_t and P_{t-1} V_{t-1} issued together; the softmax of S_t
    // runs while the product does. (alpha_0 = 0 clears O before P_0 V_0 adds to it.)
    for (int t = 1; t < computed; ++t) {
      wait_landed(tile0 + t);
      wait_turn(wg);
      wgmma_fence();
      issue_s(t);
      rescale(alpha);  // by alpha_{t-1}, while S_t runs, before P_{t-1} V_{t-1} adds to O
      wgmma_fence();
      issue_pv(tile0 + t - 1);
      wgmma_commit();
      pass_turn(wg);
      wgmma_wait_all_but_one();  // S_t is complete
      pin(s);
      softmax(t, alpha);
      wgmma_wait_all();  // P_{t-1} V_{t-1} is complete: stage t - 1 and p_frag are free
      pin(o);
      release(tile0 + t - 1);
      pack_p<Ops>(p_frag, s);
    }
    // Every product with this Q buffer is complete: the producer may fill it again.
    barrier_arrive(&q_released[qb]);
    if (computed < n) {
      // The tile right of this warpgroup's diagonal: released once it has landed, and its
      // turn taken, so that releases and turns stay balanced.
      wait_landed(tile0 + n - 1);
      release(tile0 + n - 1);
      wait_turn(wg);
      pass_turn(wg);
    }
    // The last product, P V of the last tile computed, waits for the next turn. (Its stage
    // is released after it: the producer's next tile but kStages - 1 does not need it.)
    last = {tile0 + computed - 1, true, true, item.splits, item.bh, item.y, row_g, {m_i[0], m_i[1]},
            {l_i[0], l_i[1]}};
    tile0 += n;
  }
  // The block's last turn: the last item's last product (every block has an item).
  prescale_last();
  wait_turn(wg);
  issue_last();
  pass_turn(wg);
  wgmma_wait_all();
  store_rows();
  // The last warpgroup's last pass goes to the first, which takes it here: every named
  // barrier's arrivals are matched before the block ends.
  if (wg == 0) wait_turn(wg);
}

// The narrow kernel: one block per narrow row block (64 rows, one work item, never split).
// Warps 0-3 are the consumer warpgroup, the only one: it computes the rows alone at the
// tensor cores and takes no turns. Warp 4 is the producer; its first lane issues Q's copy and
// then the block's K/V tiles into kStages stages, as h15's producer does for one item.
constexpr int kNarrowThreads = kWarpgroupThreads + kLanes;  // 160
// Shared memory: Q_i (8 KB), `stages` x (K_j, V_j), then per stage a "landed" and a "released"
// barrier and Q's "landed" one; 1 KB of slack to align the start: 140,360 bytes at kStages,
// 74,792 at kShortStages.
constexpr size_t narrow_smem_bytes(int stages) {
  return kAtomBytes + kQTileBytes + static_cast<size_t>(2 * stages) * kKVTileBytes +
         (2 * stages + 1) * sizeof(uint64_t);
}
// The plan counts kShortBlocksPerSm short blocks on each SM: their shared memory must fit in
// one SM's (228 KB on sm_90, of which 1 KB per block is the system's).
static_assert(
    kShortBlocksPerSm * (narrow_smem_bytes(kShortStages) + 1024) <= 228 * 1024,
    "two short narrow blocks must fit in one SM's shared memory, or the plan's waves are wrong");

// __launch_bounds__(160, MinBlocks): up to 255 registers per thread at 1 (no setmaxnreg), 168 at
// 2. Stages: K/V stages; Short: one S buffer (S_t issued after P_{t-1} is packed), the form for
// one or two key tiles, whose 160 registers let two blocks share an SM without spilling.
template <typename Element, int Stages, int MinBlocks, bool Short>
__global__ void __launch_bounds__(kNarrowThreads, MinBlocks)
    narrow_attention_kernel(const __grid_constant__ CUtensorMap q_map,
                            const __grid_constant__ CUtensorMap k_map,
                            const __grid_constant__ CUtensorMap v_map,
                            RowCoords q_coords,
                            RowCoords k_coords,
                            RowCoords v_coords,
                            Element* __restrict__ out,
                            int T,
                            int H,
                            int heads,
                            float c,
                            int row_blocks,
                            int group_heads,
                            int tiles_per_split) {
  using Ops = HalfOps<Element>;
  constexpr int d = kHeadDim, B_c = kTiles.B_c;
  const RowBlocks rb = {T, 1};  // 64-row blocks: warpgroup kWarpgroups - 1's rows, lead() = 0
  extern __shared__ __align__(128) char smem_raw[];
  // The swizzle repeats every 1,024 bytes and the descriptors assume tiles start on it.
  char* smem = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem_raw) + kAtomBytes - 1) &
                                       ~static_cast<uintptr_t>(kAtomBytes - 1));
  char* Q_buf = smem;  // [64][d]
  char* K_buf = Q_buf + kQTileBytes;  // [Stages][B_c][d]
  char* V_buf = K_buf + Stages * kKVTileBytes;  // [Stages][B_c][d]
  uint64_t* landed = reinterpret_cast<uint64_t*>(V_buf + Stages * kKVTileBytes);  // [Stages]
  uint64_t* released = landed + Stages;  // [Stages]
  uint64_t* q_landed = released + Stages;

  // Block b computes item b (h15's numbering, one split per row block): its head and rows.
  WorkItem item;
  decode(blockIdx.x, heads, row_blocks, group_heads, tiles_per_split, /*max_splits=*/1, rb, &item);
  const int b = item.bh / H, h = item.bh % H;
  const int n = item.n;  // key tiles 0 .. n - 1, the last one the rows' diagonal tile
  const int row0 = rb.warpgroup_row(item.i, kWarpgroups - 1);  // the block's first row

  if (threadIdx.x == 0) {
    for (int st = 0; st < Stages; ++st) {
      barrier_init(&landed[st], 1);  // the producer's arrival (and the bytes)
      barrier_init(&released[st], kWarpgroupThreads);  // every consumer thread arrives
    }
    barrier_init(q_landed, 1);  // the producer's arrival (and the bytes)
    barrier_init_fence();
  }
  // Guards the barriers: initialised before anyone uses them. The block's only block-wide
  // barrier.
  __syncthreads();

  if (threadIdx.x >= kWarpgroupThreads) {
    // The producer warp; its first lane issues everything. Tile t goes into stage
    // t % Stages, its round r = t / Stages, and from the second round on waits until the
    // stage's previous tile was released (phase r - 1).
    if (threadIdx.x == kWarpgroupThreads) {
      barrier_expect_bytes(q_landed, kQTileBytes);
      tma_load_tile(Q_buf, q_map, h * d, row0, b, q_coords, q_landed);
      for (int t = 0; t < n; ++t) {
        const int st = t % Stages, round = t / Stages;
        if (round > 0) barrier_wait(&released[st], (round - 1) % 2);
        barrier_expect_bytes(&landed[st], 2 * kKVTileBytes);
        const int row = t * B_c;
        tma_load_tile(K_buf + st * kKVTileBytes, k_map, h * d, row, b, k_coords, &landed[st]);
        tma_load_tile(V_buf + st * kKVTileBytes, v_map, h * d, row, b, v_coords, &landed[st]);
      }
    }
    return;  // the copies in flight complete on their barriers without this warp
  }

  const int warp = threadIdx.x / kLanes;  // within the warpgroup
  const int lane = threadIdx.x % kLanes;
  const int g = lane / kRowLanes, t4 = lane % kRowLanes;
  const int T_c = ceil_div(T, B_c);

  // This lane's rows (g and g + 8 of its warp), their statistics (m equal across the row's 4
  // lanes, l this lane's part) and its part of O_i, in D-fragment layout.
  const int row_g = row0 + kMmaM * warp + g;
  float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.0f, 0.0f};
  float o[kSlicesO][4];
#pragma unroll
  for (int nn = 0; nn < kSlicesO; ++nn)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[nn][e] = 0.0f;
  // Two S buffers: S_{t+1} is issued before the softmax of S_t, so that the softmax never
  // waits for its S. Each holds S_t, then P_t in float32, in place.
  float s_a[kSlicesS][4], s_b[kSlicesS][4];
  uint32_t p_frag[kStepsPV][4];  // P_t in 16 bits: the A operand of P_t V_t

  const uint32_t q_smem = smem_address(Q_buf);
  const auto wait_landed = [&](int t) { barrier_wait(&landed[t % Stages], (t / Stages) % 2); };
  // Every consumer thread arrives once it (and so its warpgroup: the wgmma that read the
  // stage completed for all of it) is done with the stage.
  const auto release = [&](int t) { barrier_arrive(&released[t % Stages]); };
  // S_t = Q_i K_j^T (j = t) into buffer s, as h15's issue_s.
  const auto issue_s = [&](int t, float(&s)[kSlicesS][4]) {
    const uint32_t k_smem = smem_address(K_buf + (t % Stages) * kKVTileBytes);
    Ops::template wgmma_s<0>(s, operand_descriptor(q_smem), operand_descriptor(k_smem));
#pragma unroll
    for (int kq = 1; kq < kStepsQK; ++kq)
      Ops::template wgmma_s<1>(s, operand_descriptor(q_smem + 32 * kq),
                               operand_descriptor(k_smem + 32 * kq));
    wgmma_commit();
  };
  // O_i += P_t V_j, k steps kBegin .. kEnd - 1 of h15's issue_pv; the caller commits.
  const auto issue_pv = [&](int t, auto begin, auto end) {
    const uint32_t v_smem = smem_address(V_buf + (t % Stages) * kKVTileBytes);
#pragma unroll
    for (int kp = decltype(begin)::value; kp < decltype(end)::value; ++kp)
      Ops::wgmma_pv(o, p_frag[kp], operand_descriptor(v_smem + 2 * kAtomBytes * kp));
  };
  using First = std::integral_constant<int, 0>;
  using Half = std::integral_constant<int, kStepsPV / 2>;
  using All = std::integral_constant<int, kStepsPV>;
  // O *= alpha, row by row.
  const auto rescale = [&](const float(&scale)[2]) {
    pin(o);
#pragma unroll
    for (int nn = 0; nn < kSlicesO; ++nn)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[nn][e] *= scale[e / 2];
    pin(o);
  };
  float alpha[2] = {1.0f, 1.0f};  // alpha_{t-1}: rescales O before P_{t-1} V_{t-1} adds to it

  // Step t: S_t is complete in s. O is rescaled by alpha_{t-1}; then S_{t+1} (into s_next,
  // with kAhead) and P_{t-1} V_{t-1} (with kPV: every step but the first) are issued, and the
  // softmax of S_t runs while they do. The wgmma queue takes about 8 at once (experiments
  // notes, overlap probe): S_{t+1} and the first half of P V go before the softmax, the
  // second half after its maximum, so that the issue never waits for the tensor cores. Every
  // step waits for all its products before the next, so that no accumulator is in flight
  // across the loop's back edge (else ptxas serialises the wgmma: C7515); the flags are
  // template arguments, so that no wgmma sits on a divergent path (C7520).
  const auto step = [&](auto ahead, auto has_pv, int t, float(&s)[kSlicesS][4],
                        float(&s_next)[kSlicesS][4]) {
    constexpr bool kAhead = decltype(ahead)::value, kPV = decltype(has_pv)::value;
    if (kAhead) wait_landed(t + 1);
    rescale(alpha);
    wgmma_fence();
    if (kAhead) issue_s(t + 1, s_next);
    if (kPV) issue_pv(t - 1, First{}, Half{});
    const auto rest_of_pv = [&] {
      if (kPV) {
        wgmma_fence();  // the softmax wrote registers since the first half
        issue_pv(t - 1, Half{}, All{});
      }
      wgmma_commit();
    };
    // Every step but the last is left of the diagonal tile and of T's end: unmasked. The last
    // is the diagonal tile, masked by the half of it the rows lie in, or by column where it
    // holds T's end (as h15's softmax).
    if (kAhead || (Short && t < n - 1))
      softmax_rows<kNone>(s, row_g, t * B_c, T, c, m_i, l_i, alpha, rest_of_pv);
    else if (t == T_c - 1 && T % B_c != 0)
      softmax_rows<kEdge>(s, row_g, t * B_c, T, c, m_i, l_i, alpha, rest_of_pv);
    else if (row0 % B_c == 0)
      softmax_rows<kDiagonalLow>(s, row_g, t * B_c, T, c, m_i, l_i, alpha, rest_of_pv);
    else
      softmax_rows<kDiagonalHigh>(s, row_g, t * B_c, T, c, m_i, l_i, alpha, rest_of_pv);
    wgmma_wait_all();  // S_{t+1} and P_{t-1} V_{t-1} are complete: stage t - 1, p_frag are free
    pin(s_next);
    pin(o);
    if (kPV) release(t - 1);
    pack_p<Ops>(p_frag, s);
  };
  using Yes = std::true_type;
  using No = std::false_type;

  // Q_i landed: read by every S product below.
  barrier_wait(q_landed, 0);
  if constexpr (Short) {
    // One S buffer: S_t is issued once P_{t-1} is packed and waited for before its softmax;
    // P_{t-1} V_{t-1} runs beside that softmax, as in the steps above.
    for (int t = 0; t < n; ++t) {
      wait_landed(t);
      wgmma_fence();
      issue_s(t, s_a);
      wgmma_wait_all();
      pin(s_a);
      if (t == 0)
        step(No{}, No{}, t, s_a, s_a);
      else
        step(No{}, Yes{}, t, s_a, s_a);
    }
  } else {
    wait_landed(0);
    wgmma_fence();
    issue_s(0, s_a);
    wgmma_wait_all();
    pin(s_a);
    if (n == 1) {
      step(/*ahead=*/No{}, /*has_pv=*/No{}, 0, s_a, s_b);
    } else {
      step(Yes{}, No{}, 0, s_a, s_b);
      int t = 1;  // S_t is in s_b
      for (; t + 2 < n; t += 2) {  // two steps per iteration, the buffers swapped between them
        step(Yes{}, Yes{}, t, s_b, s_a);
        step(Yes{}, Yes{}, t + 1, s_a, s_b);
      }
      if (t + 1 < n) {  // two steps left
        step(Yes{}, Yes{}, t, s_b, s_a);
        step(No{}, Yes{}, t + 1, s_a, s_b);
      } else {  // one
        step(No{}, Yes{}, t, s_b, s_a);
      }
    }
  }  // Short
  // The last product, P V of the last tile. Its stage is never refilled: no release.
  rescale(alpha);
  wgmma_fence();
  issue_pv(n - 1, First{}, All{});
  wgmma_commit();
  wgmma_wait_all();
  pin(o);

  // O_i = diag(l)^-1 O_i, rounded once, straight from registers to global memory: lane
  // (g, t4) stores columns 8n + 2 t4, 8n + 2 t4 + 1 of rows g and g + 8, a pair each.
  const int C = H * d;
  Element* o_bh = out + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * d;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const float inv_l = 1.0f / row_sum(l_i[hh]);  // all lanes: the shuffles need them
    const int row = row_g + 8 * hh;
    if (row >= T) continue;  // the last row block may end past T
    Element* o_row = o_bh + static_cast<size_t>(row) * C;
#pragma unroll
    for (int nn = 0; nn < kSlicesO; ++nn)
      *reinterpret_cast<uint32_t*>(o_row + kMmaN * nn + 2 * t4) =
          Ops::pack(o[nn][2 * hh] * inv_l, o[nn][2 * hh + 1] * inv_l);
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
    int W,
    int H,
    int tiles_per_split,
    int max_splits) {
  using Ops = HalfOps<Element>;
  // Launched early (programmatic stream serialisation): wait here until the attention kernel
  // has completed and its partial results are visible.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  constexpr int kColsPerThread = d * B_r / kMergeThreads;
  static_assert(kColsPerThread == 16, "4 threads per row, 16 columns (four float4) each");
  const int i = gridDim.y - 1 - blockIdx.y;  // query tile, numbered as in the kernel
  const RowBlocks rb = {T, W};
  const int splits = ceil_div(rb.tiles(i), tiles_per_split);
  if (splits == 1) return;  // written directly by its only split
  // Row r of a slot is row r of the block's three warpgroups (the kernel's wg * 64 + ...).
  const int r = threadIdx.x / 4, c0 = (threadIdx.x % 4) * kColsPerThread;
  const int row = rb.warpgroup_row(i, 0) + r;
  if (!rb.has_rows(i, r / kWarpgroupRows) || row >= T) return;

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

// Work items: every (batch, head) x row block x split slot (slots a row block does not use
// are skipped by the block that draws them). The kernel numbers them as ints.
int64_t work_items(const HalfArgs& a, const SplitPlan& plan) {
  return a.batch * a.num_heads * plan.row_blocks * plan.max_splits;
}

// The workspace: the partial results of split row blocks (one slot per work item), then the
// work counter when there are more items than blocks; nothing when neither is needed.
struct Workspace {
  size_t partial_bytes;
  bool counter;
  size_t bytes;
};
Workspace workspace_layout(const HalfArgs& a, const SplitPlan& plan, const LaunchConfig& cfg) {
  const size_t partial_bytes = plan.max_splits == 1 ? 0
                                                    : sizeof(float) * kPartialFloats *
                                                          static_cast<size_t>(work_items(a, plan));
  const bool counter = work_items(a, plan) > static_cast<int64_t>(cfg.grid.x);
  return {partial_bytes, counter, partial_bytes + (counter ? sizeof(int) : 0)};
}

template <typename Element>
cudaError_t launch_typed(const HalfArgs& a,
                         const LaunchConfig& cfg,
                         const SplitPlan& plan,
                         cudaStream_t stream) {
  auto* kernel = causal_attention_kernel<Element>;
  cudaError_t err = cudaSuccess;
  if (plan.warpgroups != 1) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(cfg.smem_bytes));
    if (err != cudaSuccess) return err;
  }
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
  const Workspace ws = workspace_layout(a, plan, cfg);
  if (ws.bytes > 0 && a.workspace == nullptr) return cudaErrorInvalidValue;
  char* base = static_cast<char*>(a.workspace);
  float* partial = ws.partial_bytes > 0 ? reinterpret_cast<float*>(base) : nullptr;
  int* next_item = ws.counter ? reinterpret_cast<int*>(base + ws.partial_bytes) : nullptr;
  // The counter starts at 0 in every call (a memset node under graph capture).
  if (next_item != nullptr) {
    err = cudaMemsetAsync(next_item, 0, sizeof(int), stream);
    if (err != cudaSuccess) return err;
  }
  const int T = static_cast<int>(a.seq_len), H = static_cast<int>(a.num_heads);
  auto* out = static_cast<Element*>(a.out);
  if (plan.warpgroups == 1) {
    // Narrow row blocks: their own kernel, one block per item, nothing to merge.
    auto* narrow = plan.short_rows
                       ? narrow_attention_kernel<Element, kShortStages, kShortBlocksPerSm, true>
                       : narrow_attention_kernel<Element, kStages, 1, false>;
    err = cudaFuncSetAttribute(narrow, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(cfg.smem_bytes));
    if (err != cudaSuccess) return err;
    narrow<<<cfg.grid, cfg.block, cfg.smem_bytes, stream>>>(
        maps[0], maps[1], maps[2], coords[0], coords[1], coords[2], out, T, H,
        static_cast<int>(a.batch * a.num_heads), c, plan.row_blocks, heads_per_group(T),
        plan.tiles_per_split);
    return cudaGetLastError();
  }
  kernel<<<cfg.grid, cfg.block, cfg.smem_bytes, stream>>>(
      maps[0], maps[1], maps[2], coords[0], coords[1], coords[2], out, T, plan.warpgroups, H,
      static_cast<int>(a.batch * a.num_heads), c, plan.row_blocks, heads_per_group(T),
      plan.tiles_per_split, plan.max_splits, partial, next_item);
  err = cudaGetLastError();
  if (err != cudaSuccess || plan.max_splits == 1) return err;
  // The merge as a programmatic dependent launch: its blocks may start while the attention
  // kernel's last blocks run, and wait on the device instead of behind a launch gap.
  cudaLaunchConfig_t merge = {};
  merge.gridDim = dim3(static_cast<unsigned>(a.batch * a.num_heads), plan.row_blocks);
  merge.blockDim = dim3(kMergeThreads);
  merge.stream = stream;
  cudaLaunchAttribute early[1] = {};
  early[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early[0].val.programmaticStreamSerializationAllowed = 1;
  merge.attrs = early;
  merge.numAttrs = 1;
  return cudaLaunchKernelEx(&merge, merge_splits<Element, kHeadDim, kTiles.B_r>,
                            static_cast<const float*>(partial), out, T, plan.warpgroups, H,
                            plan.tiles_per_split, plan.max_splits);
}

}  // namespace

// Any row and batch stride, as long as rows stay 16-byte aligned (the TMA's rule for global
// addresses and strides): the glue checks the pointers and strides. 16-bit inputs.
Requirements requirements() {
  return {/*strided_inputs=*/true, /*alignment_bytes=*/16, /*half_precision=*/true};
}

// A persistent grid, one block per SM, where there are more than kPersistentAbove items per
// SM; otherwise one block per item, as in h09. With few items per SM the hardware's hand-out
// of whole blocks balances them better than the producers' claims, made up to four tiles
// before their SMs are free (B=1, T=1024: 21.0 µs against 22.5 persistent; the notes).
constexpr int64_t kPersistentAbove = 2;
LaunchConfig launch_config(const HalfArgs& a, const DeviceLimits& limits) {
  const SplitPlan plan = plan_splits(a, limits);
  const int64_t items = work_items(a, plan);
  // Narrow row blocks: the narrow kernel, one block per item (at most kNarrowWaves waves).
  if (plan.warpgroups == 1)
    return {dim3(static_cast<unsigned>(items)), dim3(kNarrowThreads),
            narrow_smem_bytes(plan.short_rows ? kShortStages : kStages)};
  const int64_t slots = static_cast<int64_t>(limits.sm_count) * kBlocksPerSm;
  const int64_t blocks = items > kPersistentAbove * slots ? slots : items;
  return {dim3(static_cast<unsigned>(blocks)), dim3(kThreads), smem_bytes(kTiles)};
}

// The partial results of split row blocks and the work counter (workspace_layout).
size_t workspace_bytes(const HalfArgs& a) {
  DeviceLimits limits;
  if (query_limits(a.device, &limits) != cudaSuccess) return 0;  // launch() reports it
  const SplitPlan plan = plan_splits(a, limits);
  return workspace_layout(a, plan, launch_config(a, limits)).bytes;
}

cudaError_t launch(const HalfArgs& a, cudaStream_t stream) {
  DeviceLimits limits;
  const cudaError_t err = query_limits(a.device, &limits);
  if (err != cudaSuccess) return err;
  const LaunchConfig cfg = launch_config(a, limits);
  if (cfg.smem_bytes > static_cast<size_t>(limits.smem_per_block_optin))
    return cudaErrorInvalidConfiguration;
  const SplitPlan plan = plan_splits(a, limits);
  // Item numbers, and the counter's values up to items + blocks, are ints.
  if (work_items(a, plan) + cfg.grid.x > INT32_MAX) return cudaErrorInvalidConfiguration;
  return a.dtype == HalfType::kBFloat16 ? launch_typed<__nv_bfloat16>(a, cfg, plan, stream)
                                        : launch_typed<__half>(a, cfg, plan, stream);
}

}  // namespace causal_attention
