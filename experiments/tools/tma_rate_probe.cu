// How fast one SM's TMA copies land (GPU): the probe behind the experiments notes' finding
// that h14's key tiles land about 1 µs apart per 32 KB at B=1, warm L2 or not.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o tma_rate_probe experiments/tools/tma_rate_probe.cu
//   ./tma_rate_probe
//
// Each block's thread 0 issues `copies` TMA copies of a box of `box_rows` rows x 64 bf16
// (128 bytes, 128-byte swizzle: h14's K_j and V_j boxes), each onto its own mbarrier, all at
// once, and records the SM clock when each has landed. The source is a [rows][C] bf16 tensor:
// C = 768 (GPT-2's q, k, v: rows 1,536 bytes apart) or C = 64 (rows packed); block b reads
// head b % (C / 64) and its own rows. Printed per configuration: cycles from the first issue
// to the first and the last copy landed (median over blocks, and the slowest block), and the
// bytes per cycle per SM after the first copy. "cold": the L2 written over first.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kMaxCopies = 8;
constexpr int kRowBytes = 128;  // 64 bf16

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__global__ void probe(const __grid_constant__ CUtensorMap map,
                      int copies,
                      int box_rows,
                      int heads,
                      int rows_total,
                      long long* out) {
  extern __shared__ __align__(1024) char smem_raw[];
  char* smem = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                       ~static_cast<uintptr_t>(1023));
  __shared__ __align__(8) uint64_t bars[kMaxCopies];
  if (threadIdx.x != 0) return;
  for (int i = 0; i < copies; ++i)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_address(&bars[i])));
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  const int bytes = box_rows * kRowBytes;
  const int head = blockIdx.x % heads;
  const int first_row = (blockIdx.x / heads) * copies * box_rows;
  const long long t0 = clock64();
  for (int i = 0; i < copies; ++i) {
    const int row = (first_row + i * box_rows) % rows_total;
    asm volatile(
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(&bars[i])),
        "r"(bytes)
        : "memory");
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
        "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_address(smem + i * bytes)),
        "l"(reinterpret_cast<uint64_t>(&map)), "r"(head * 64), "r"(row), "r"(smem_address(&bars[i]))
        : "memory");
  }
  long long* mine = out + static_cast<size_t>(blockIdx.x) * (kMaxCopies + 1);
  mine[0] = clock64() - t0;  // every copy issued
  for (int i = 0; i < copies; ++i) {
    uint32_t done = 0;
    while (!done)
      asm volatile(
          "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n"
          " selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(smem_address(&bars[i]))
          : "memory");
    mine[1 + i] = clock64() - t0;
  }
}

static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status;
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                       &status) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
}

static void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

int main() {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  const int rows_total = 16384;
  const int max_C = 768;
  void* src = nullptr;
  check(cudaMalloc(&src, static_cast<size_t>(rows_total) * max_C * 2), "source");
  check(cudaMemset(src, 0x3c, static_cast<size_t>(rows_total) * max_C * 2), "source fill");
  const size_t flush_bytes = 256u << 20;
  void* flush = nullptr;
  check(cudaMalloc(&flush, flush_bytes), "flush buffer");
  long long* out = nullptr;
  check(cudaMalloc(&out, sizeof(long long) * 1024 * (kMaxCopies + 1)), "out");
  check(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024),
        "smem opt-in");
  auto encode = encode_tiled();
  if (encode == nullptr) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
    return 1;
  }
  std::printf("%-6s %-5s %-5s %-6s %-6s %-5s | %9s %9s %9s %9s | %s\n", "C", "box", "copies",
              "blocks", "L2", "", "issued", "first", "last med", "last max",
              "bytes/cycle/SM after the first (median block)");
  for (int C : {768, 64}) {
    for (int box_rows : {64, 128}) {
      CUtensorMap map;
      const cuuint64_t dims[2] = {static_cast<cuuint64_t>(C), static_cast<cuuint64_t>(rows_total)};
      const cuuint64_t strides[1] = {static_cast<cuuint64_t>(C) * 2};
      const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
      const cuuint32_t elem[2] = {1, 1};
      if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, src, dims, strides, box, elem,
                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
        std::fprintf(stderr, "tensor map C=%d box=%d failed\n", C, box_rows);
        return 1;
      }
      const int copies = kMaxCopies;
      const int smem = copies * box_rows * kRowBytes + 1024;
      for (int blocks : {1, 12, 96, sms}) {
        for (int cold : {1, 0}) {
          std::vector<long long> host(static_cast<size_t>(blocks) * (kMaxCopies + 1));
          for (int rep = 0; rep < 3; ++rep) {  // the last repetition is kept
            if (cold) check(cudaMemset(flush, rep, flush_bytes), "flush");
            probe<<<blocks, 32, smem>>>(map, copies, box_rows, C / 64, rows_total, out);
            check(cudaGetLastError(), "launch");
            check(cudaDeviceSynchronize(), "probe");
          }
          check(
              cudaMemcpy(host.data(), out, host.size() * sizeof(long long), cudaMemcpyDeviceToHost),
              "copy back");
          std::vector<long long> issued, first, last;
          std::vector<double> rate;
          for (int b = 0; b < blocks; ++b) {
            const long long* r = &host[static_cast<size_t>(b) * (kMaxCopies + 1)];
            issued.push_back(r[0]);
            first.push_back(r[1]);
            last.push_back(r[copies]);
            rate.push_back(static_cast<double>(copies - 1) * box_rows * kRowBytes /
                           std::max<long long>(1, r[copies] - r[1]));
          }
          auto median = [](auto v) {
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
          };
          std::printf("%-6d %-5d %-6d %-6d %-6s %-5s | %9lld %9lld %9lld %9lld | %.1f\n", C,
                      box_rows, copies, blocks, cold ? "cold" : "warm", "", median(issued),
                      median(first), median(last), *std::max_element(last.begin(), last.end()),
                      median(rate));
        }
      }
    }
  }
  return 0;
}
