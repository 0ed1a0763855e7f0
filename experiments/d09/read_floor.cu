// How fast this GPU reads a decode call's K and V caches, and nothing else: the floor under
// every decode kernel at that shape, for each way of reading. (A sequence's rows are
// contiguous in the (B, S, H x 64) cache, each row every head's 64 values.)
//
// - read_loads: version 8's loads (16 bytes a thread, `ld.global.nc.L1::no_allocate`),
//   kUnroll of K and kUnroll of V per thread per step, the next step issued before this
//   one is consumed, each block over its own contiguous share of the bytes.
// - read_bulk: the copy engine (TMA) in one dimension, `cp.async.bulk` of kChunk bytes of K
//   and kChunk of V per stage into a ring of kStages stages, completed on one mbarrier per
//   stage; thread 0 issues, the block reads each landed stage from shared memory and frees
//   it. Contiguous shares as read_loads.
// - read_chunks: a copy's order, every block's step t inside one contiguous window of
//   gridDim.x chunks: in chunks of one step (`windows`), or of whole rows of every head of one
//   sequence (`chunks`), the unit a kernel reading in memory order would take. (The logs'
//   `windows` rows ran an equivalent kernel of their own, read_windows: the same loads in
//   the same order, a chunk being one step.)
// - read_heads: version 9's order (a group of lanes per row of one head, rows of a head one
//   after the other) over equal shares of all the heads' rows: d09's reading, balanced.
// - read_tiles: cuDNN's schedule (its decode kernel under Nsight Compute): a 128-thread block
//   per head, 16 KB tiles of K and of V by cp.async in a ring of 2 or 3 stages, a barrier
//   per tile.
// The first run (results/nvidia-h200/experiments/2026-11-28_1_read_floor.log) had the first
// two; the others were added as each run pointed to them.
//
// Each warp stores the XOR of the words it read (out[block x warps + warp]), so no load is
// removed and read_floor.py can check that every word was read once: the XOR of all the
// stores equals the XOR of K's and V's words. Built by read_floor.py
// (torch.utils.cpp_extension), which times these beside d09 and PyTorch's kernels with the
// harness's timer.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include <cstdint>

namespace read_floor {

__device__ __forceinline__ uint4 load_once(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

__device__ __forceinline__ uint32_t fold(uint4 a) { return a.x ^ a.y ^ a.z ^ a.w; }

// The XOR of the warp's words, stored by lane 0 at out[block x warps + warp].
__device__ __forceinline__ void store_xor(uint32_t x, uint32_t* out) {
#pragma unroll
  for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1)
    x ^= __shfl_xor_sync(0xffffffffu, x, lane_mask);
  if (threadIdx.x % 32 == 0) out[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = x;
}

// Block i reads vectors [i x share, (i + 1) x share) of K and of V (16-byte vectors).
template <int kThreads, int kUnroll>
__global__ void __launch_bounds__(kThreads)
    read_loads(const uint4* __restrict__ k, const uint4* __restrict__ v, size_t vectors,
               uint32_t* out) {
  const size_t share = (vectors + gridDim.x - 1) / gridDim.x;
  const size_t begin = blockIdx.x * share, end = min(begin + share, vectors);
  constexpr size_t kStep = size_t(kThreads) * kUnroll;
  uint4 k_next[kUnroll], v_next[kUnroll];
  auto fetch = [&](size_t first) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = first + size_t(u) * kThreads + threadIdx.x;
      k_next[u] = i < end ? load_once(k + i) : make_uint4(0, 0, 0, 0);
      v_next[u] = i < end ? load_once(v + i) : make_uint4(0, 0, 0, 0);
    }
  };
  uint32_t x = 0;
  fetch(begin);
  for (size_t first = begin; first < end; first += kStep) {
    uint4 k_now[kUnroll], v_now[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) k_now[u] = k_next[u], v_now[u] = v_next[u];
    if (first + kStep < end) fetch(first + kStep);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) x ^= fold(k_now[u]) ^ fold(v_now[u]);
  }
  store_xor(x, out);
}

// A copy's order in chunks: step t of block i reads chunk t x gridDim.x + i of
// chunk_vectors vectors (whole rows of every head of one sequence: the unit a kernel that
// reads in memory order would take), kThreads x kUnroll vectors at a time. The blocks' chunks
// of one step lie side by side: a window of gridDim.x chunks.
template <int kThreads, int kUnroll>
__global__ void __launch_bounds__(kThreads)
    read_chunks(const uint4* __restrict__ k, const uint4* __restrict__ v, size_t vectors,
                size_t chunk_vectors, uint32_t* out) {
  constexpr size_t kStep = size_t(kThreads) * kUnroll;
  uint32_t x = 0;
  for (size_t chunk = blockIdx.x * chunk_vectors; chunk < vectors;
       chunk += size_t(gridDim.x) * chunk_vectors) {
    const size_t end = min(chunk + chunk_vectors, vectors);
    for (size_t first = chunk; first < end; first += kStep) {
      uint4 k_now[kUnroll], v_now[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t i = first + size_t(u) * kThreads + threadIdx.x;
        k_now[u] = i < end ? load_once(k + i) : make_uint4(0, 0, 0, 0);
        v_now[u] = i < end ? load_once(v + i) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) x ^= fold(k_now[u]) ^ fold(v_now[u]);
    }
  }
  store_xor(x, out);
}

// Version 9's reading with a perfect balance: the (sequence, head, row) rows, head after
// head, in equal shares, block i the i-th; a group of row_vectors lanes reads a row of one
// head (128 bytes in 16-bit types: rows of a head are C x 2 bytes apart), kUnroll rows per
// group per step, the next step issued before this one is consumed. A share crosses from one
// head into the next where it must: the split a kernel balanced this way would merge.
template <int kThreads, int kUnroll>
__global__ void __launch_bounds__(kThreads)
    read_heads(const uint4* __restrict__ k, const uint4* __restrict__ v, int heads_per_seq,
               int rows_per_head, int row_vectors, int total_heads, uint32_t* out) {
  const int groups = kThreads / row_vectors, group = threadIdx.x / row_vectors,
            lane = threadIdx.x % row_vectors;
  // Rows are counted in int: at most 128 x 12 x 16384 = 25.2M in the decode grid.
  const int rows = total_heads * rows_per_head;
  const int share = (rows + gridDim.x - 1) / gridDim.x;
  const int begin = min(int(blockIdx.x) * share, rows), end = min(begin + share, rows);
  const int64_t seq_vectors = int64_t(rows_per_head) * heads_per_seq * row_vectors;
  auto at = [&](int r) {  // flattened row r: this lane's vector of it
    const int g = r / rows_per_head, j = r % rows_per_head;
    return (g / heads_per_seq) * seq_vectors +
           (int64_t(j) * heads_per_seq + g % heads_per_seq) * row_vectors + lane;
  };
  const int step = groups * kUnroll;
  uint4 k_next[kUnroll], v_next[kUnroll];
  auto fetch = [&](int first) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int r = first + u * groups + group;
      const int64_t i = r < end ? at(r) : 0;
      k_next[u] = r < end ? load_once(k + i) : make_uint4(0, 0, 0, 0);
      v_next[u] = r < end ? load_once(v + i) : make_uint4(0, 0, 0, 0);
    }
  };
  uint32_t x = 0;
  fetch(begin);
  for (int first = begin; first < end; first += step) {
    uint4 k_now[kUnroll], v_now[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) k_now[u] = k_next[u], v_now[u] = v_next[u];
    if (first + step < end) fetch(first + step);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) x ^= fold(k_now[u]) ^ fold(v_now[u]);
  }
  store_xor(x, out);
}

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// cuDNN's schedule (log results/nvidia-h200/experiments/2026-11-28_3: at batch 32 L=16384 its
// decode is a flash kernel of 128 threads per (sequence, head), 384 blocks resident at once,
// K and V tiles of 128 rows by cp.async, LDGSTS.E.BYPASS.128, two stages): one block per
// head, tiles of kTileRows rows of K and of V (a group of row_vectors lanes per row) copied
// into a ring of kStages stages, one stage waited for and read from shared memory while the
// next is in flight; one barrier per tile.
template <int kStages>
__global__ void __launch_bounds__(128)
    read_tiles(const uint4* __restrict__ k, const uint4* __restrict__ v, int heads_per_seq,
               int rows_per_head, int row_vectors, uint32_t* out) {
  constexpr int kTileBytes = 16384;  // of K, and of V, per stage
  constexpr int kTileVectors = kTileBytes / 16;
  extern __shared__ __align__(128) uint4 ring_tiles[];  // [stage][K tile, V tile]
  const int tile_rows = kTileVectors / row_vectors;
  const int b = blockIdx.x / heads_per_seq, h = blockIdx.x % heads_per_seq;
  const int64_t row_stride = int64_t(heads_per_seq) * row_vectors;
  const uint4* k_head = k + b * rows_per_head * row_stride + h * row_vectors;
  const uint4* v_head = v + b * rows_per_head * row_stride + h * row_vectors;
  const int tiles = (rows_per_head + tile_rows - 1) / tile_rows;
  auto issue = [&](int t) {  // tile t into stage t % kStages: 16-byte cp.async, zero past the end
    uint4* stage = ring_tiles + (t % kStages) * 2 * kTileVectors;
    for (int i = threadIdx.x; i < kTileVectors; i += blockDim.x) {
      const int row = t * tile_rows + i / row_vectors, lane = i % row_vectors;
      const int bytes = row < rows_per_head ? 16 : 0;  // src-size 0: nothing is read
      const int64_t at = int64_t(min(row, rows_per_head - 1)) * row_stride + lane;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_address(stage + i)),
                   "l"(k_head + at), "r"(bytes)
                   : "memory");
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                       smem_address(stage + kTileVectors + i)),
                   "l"(v_head + at), "r"(bytes)
                   : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  for (int t = 0; t < kStages - 1; ++t) {
    if (t < tiles) issue(t);
    else asm volatile("cp.async.commit_group;" ::: "memory");  // an empty group keeps the count
  }
  uint32_t x = 0;
  for (int t = 0; t < tiles; ++t) {
    if (t + kStages - 1 < tiles) issue(t + kStages - 1);
    else asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group %0;" ::"n"(kStages - 1) : "memory");  // tile t landed
    // Guards: every thread's copies of tile t have landed before any thread reads it.
    __syncthreads();
    const uint4* stage = ring_tiles + (t % kStages) * 2 * kTileVectors;
    for (int i = threadIdx.x; i < kTileVectors; i += blockDim.x)
      x ^= fold(stage[i]) ^ fold(stage[kTileVectors + i]);
    // Guards: every thread has read tile t's stage before the next issue overwrites it.
    __syncthreads();
  }
  store_xor(x, out);
}

// Block i reads bytes [i x share, (i + 1) x share) of K and of V (share a multiple of 16, as
// cp.async.bulk requires of sizes and addresses) in chunks of at most kChunk bytes.
template <int kStages, int kChunk>
__global__ void __launch_bounds__(128)
    read_bulk(const char* __restrict__ k, const char* __restrict__ v, size_t bytes, uint32_t* out) {
  static_assert(kChunk % 16 == 0, "cp.async.bulk moves multiples of 16 bytes");
  extern __shared__ __align__(128) unsigned char ring[];  // [stage][K chunk, V chunk]
  __shared__ __align__(8) uint64_t full[kStages];  // stage s landed: one arrival + its bytes
  const size_t share = ((bytes + gridDim.x - 1) / gridDim.x + 15) / 16 * 16;
  const size_t begin = min(blockIdx.x * share, bytes), end = min(begin + share, bytes);
  const int chunks = static_cast<int>((end - begin + kChunk - 1) / kChunk);

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(&full[s])));
    // The barriers' initialisation, visible to the copy engine (the async proxy).
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // Guards: every thread sees the initialised barriers before it waits on one.
  __syncthreads();

  auto issue = [&](int c) {  // thread 0: chunk c of K and of V into stage c % kStages
    const int s = c % kStages;
    const size_t first = begin + size_t(c) * kChunk;
    const uint32_t size = static_cast<uint32_t>(min(size_t(kChunk), end - first));
    const uint32_t bar = smem_address(&full[s]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                 "r"(2 * size)
                 : "memory");
    unsigned char* dst = ring + size_t(s) * 2 * kChunk;
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
            "r"(smem_address(dst)),
        "l"(k + first), "r"(size), "r"(bar)
        : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
            "r"(smem_address(dst + kChunk)),
        "l"(v + first), "r"(size), "r"(bar)
        : "memory");
  };
  if (threadIdx.x == 0)
    for (int c = 0; c < min(kStages, chunks); ++c) issue(c);

  uint32_t x = 0;
  for (int c = 0; c < chunks; ++c) {
    const int s = c % kStages;
    const uint32_t parity = (c / kStages) & 1;
    const uint32_t bar = smem_address(&full[s]);
    uint32_t done = 0;
    while (!done)
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, "
          "0, p; }"
          : "=r"(done)
          : "r"(bar), "r"(parity)
          : "memory");
    const size_t first = begin + size_t(c) * kChunk;
    const int vectors = static_cast<int>(min(size_t(kChunk), end - first) / 16);
    const uint4* stage = reinterpret_cast<const uint4*>(ring + size_t(s) * 2 * kChunk);
    for (int i = threadIdx.x; i < vectors; i += blockDim.x)
      x ^= fold(stage[i]) ^ fold(stage[kChunk / 16 + i]);
    // Guards: every thread has read stage s before thread 0 has the copy engine overwrite it.
    __syncthreads();
    if (threadIdx.x == 0 && c + kStages < chunks) issue(c + kStages);
  }
  store_xor(x, out);
}

int sm_count() {
  int device = 0, count = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

void check_caches(const torch::Tensor& k, const torch::Tensor& v) {
  TORCH_CHECK(k.is_cuda() && v.is_cuda(), "read_floor: K and V must be on the GPU");
  TORCH_CHECK(k.is_contiguous() && v.is_contiguous(),
              "read_floor: K and V must be contiguous (the shares are ranges of bytes)");
  TORCH_CHECK(k.nbytes() == v.nbytes(), "read_floor: K and V must have the same size");
  TORCH_CHECK(k.nbytes() % 16 == 0, "read_floor: the caches must be whole 16-byte vectors");
}

template <int kThreads, int kUnroll>
void launch_loads(const torch::Tensor& k, const torch::Tensor& v, torch::Tensor& out,
                  int blocks) {
  read_loads<kThreads, kUnroll><<<blocks, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      static_cast<const uint4*>(k.data_ptr()), static_cast<const uint4*>(v.data_ptr()),
      k.nbytes() / 16, static_cast<uint32_t*>(out.data_ptr()));
}

// read_loads with `threads` (128 or 256) threads, `unroll` (4 or 8) vectors of K and of V per
// thread per step, `per_sm` blocks per SM.
void loads(torch::Tensor k, torch::Tensor v, torch::Tensor out, int64_t threads, int64_t unroll,
           int64_t per_sm) {
  check_caches(k, v);
  const int blocks = static_cast<int>(per_sm) * sm_count();
  if (threads == 256 && unroll == 4)
    launch_loads<256, 4>(k, v, out, blocks);
  else if (threads == 256 && unroll == 8)
    launch_loads<256, 8>(k, v, out, blocks);
  else if (threads == 128 && unroll == 8)
    launch_loads<128, 8>(k, v, out, blocks);
  else
    TORCH_CHECK(false, "read_floor.loads: (threads, unroll) in (256, 4), (256, 8), (128, 8)");
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// read_chunks with chunks of one step (256 threads x 4 vectors of K and of V): a copy's
// order, every block's step t inside one contiguous window; `per_sm` blocks per SM.
void windows(torch::Tensor k, torch::Tensor v, torch::Tensor out, int64_t per_sm) {
  check_caches(k, v);
  read_chunks<256, 4><<<static_cast<int>(per_sm) * sm_count(), 256, 0,
                        c10::cuda::getCurrentCUDAStream()>>>(
      static_cast<const uint4*>(k.data_ptr()), static_cast<const uint4*>(v.data_ptr()),
      k.nbytes() / 16, 256 * 4, static_cast<uint32_t*>(out.data_ptr()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// read_chunks, 256 threads, 4 vectors of K and of V per thread per step, chunks of `rows`
// whole rows of the (B, L, C) caches, `per_sm` blocks per SM.
void chunks(torch::Tensor k, torch::Tensor v, torch::Tensor out, int64_t rows, int64_t per_sm) {
  check_caches(k, v);
  TORCH_CHECK(k.dim() == 3, "read_floor.chunks: caches of shape (B, L, C)");
  read_chunks<256, 4><<<static_cast<int>(per_sm) * sm_count(), 256, 0,
                        c10::cuda::getCurrentCUDAStream()>>>(
      static_cast<const uint4*>(k.data_ptr()), static_cast<const uint4*>(v.data_ptr()),
      k.nbytes() / 16, static_cast<size_t>(rows) * k.size(2) * k.element_size() / 16,
      static_cast<uint32_t*>(out.data_ptr()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// read_tiles, one 128-thread block per (sequence, head) of the (B, L, H x 64) caches, tiles
// of 16 KB of K and of V in a ring of `stages` (2 or 3) stages.
void tiles(torch::Tensor k, torch::Tensor v, torch::Tensor out, int64_t num_heads,
           int64_t stages) {
  check_caches(k, v);
  TORCH_CHECK(k.dim() == 3 && k.size(2) == num_heads * 64,
              "read_floor.tiles: caches of shape (B, L, H x 64)");
  const int row_vectors = static_cast<int>(64 * k.element_size() / 16);
  const int blocks = static_cast<int>(k.size(0) * num_heads);
  auto go = [&](auto kernel, int ring_bytes) {
    C10_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ring_bytes));
    kernel<<<blocks, 128, ring_bytes, c10::cuda::getCurrentCUDAStream()>>>(
        static_cast<const uint4*>(k.data_ptr()), static_cast<const uint4*>(v.data_ptr()),
        static_cast<int>(num_heads), static_cast<int>(k.size(1)), row_vectors,
        static_cast<uint32_t*>(out.data_ptr()));
  };
  if (stages == 2)
    go(read_tiles<2>, 2 * 2 * 16384);
  else if (stages == 3)
    go(read_tiles<3>, 3 * 2 * 16384);
  else
    TORCH_CHECK(false, "read_floor.tiles: stages 2 or 3");
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// read_heads, 256 threads, 4 rows per group per step, `per_sm` blocks per SM, over caches of
// shape (B, L, H x 64).
void heads(torch::Tensor k, torch::Tensor v, torch::Tensor out, int64_t num_heads,
           int64_t per_sm) {
  check_caches(k, v);
  TORCH_CHECK(k.dim() == 3 && k.size(2) == num_heads * 64,
              "read_floor.heads: caches of shape (B, L, H x 64)");
  const int row_vectors = static_cast<int>(64 * k.element_size() / 16);
  read_heads<256, 4><<<static_cast<int>(per_sm) * sm_count(), 256, 0,
                       c10::cuda::getCurrentCUDAStream()>>>(
      static_cast<const uint4*>(k.data_ptr()), static_cast<const uint4*>(v.data_ptr()),
      static_cast<int>(num_heads), static_cast<int>(k.size(1)), row_vectors,
      static_cast<int>(k.size(0) * num_heads), static_cast<uint32_t*>(out.data_ptr()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <int kStages, int kChunk>
void launch_bulk(const torch::Tensor& k, const torch::Tensor& v, torch::Tensor& out,
                 int per_sm) {
  constexpr int kRing = kStages * 2 * kChunk;
  auto kernel = read_bulk<kStages, kChunk>;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kRing));
  kernel<<<per_sm * sm_count(), 128, kRing, c10::cuda::getCurrentCUDAStream()>>>(
      static_cast<const char*>(k.data_ptr()), static_cast<const char*>(v.data_ptr()), k.nbytes(),
      static_cast<uint32_t*>(out.data_ptr()));
}

// read_bulk with `stages` stages of `chunk_kb` KB of K and of V, `per_sm` blocks per SM.
void bulk(torch::Tensor k, torch::Tensor v, torch::Tensor out, int64_t stages, int64_t chunk_kb,
          int64_t per_sm) {
  check_caches(k, v);
  const int n = static_cast<int>(per_sm);
  if (stages == 4 && chunk_kb == 16)
    launch_bulk<4, 16384>(k, v, out, n);
  else if (stages == 8 && chunk_kb == 8)
    launch_bulk<8, 8192>(k, v, out, n);
  else if (stages == 3 && chunk_kb == 16)
    launch_bulk<3, 16384>(k, v, out, n);
  else if (stages == 6 && chunk_kb == 8)
    launch_bulk<6, 8192>(k, v, out, n);
  else if (stages == 4 && chunk_kb == 8)
    launch_bulk<4, 8192>(k, v, out, n);
  else
    TORCH_CHECK(false, "read_floor.bulk: (stages, chunk_kb) in (4, 16), (8, 8), (3, 16), (6, 8), (4, 8)");
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace read_floor

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("loads", &read_floor::loads, "read K and V with 16-byte loads (see read_floor.cu)");
  m.def("bulk", &read_floor::bulk, "read K and V with cp.async.bulk (see read_floor.cu)");
  m.def("windows", &read_floor::windows, "read K and V in a copy's order (see read_floor.cu)");
  m.def("tiles", &read_floor::tiles, "read K and V as cuDNN's decode does (see read_floor.cu)");
  m.def("chunks", &read_floor::chunks, "read K and V in a copy's order by chunks of rows");
  m.def("heads", &read_floor::heads, "read K and V head by head, balanced (see read_floor.cu)");
}
