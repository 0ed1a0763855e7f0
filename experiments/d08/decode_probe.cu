// Probe for decode versions 8 and 9 and their trials: d08's kernel at several block shapes
// (threads, blocks per SM, rows per thread per step) against d07, d09 and trial d09c_1, and
// two ways of reading the caches alone, in one binary, on one GPU.
//   nvcc -std=c++17 -O3 --use_fast_math -arch=sm_90a -I../../versions/common -I/tmp \
//        decode_probe.cu d07_entry.cu d09_entry.cu d09c_entry.cu -o decode_probe && ./decode_probe
// (d09c_entry.cu says how /tmp/d09c_attention.cu is made.) Checks every kernel against
// float64 on the host (ragged batches with NaN past each length: one of 3 sequences, and one
// of 33 whose 396 heads fill the block slots, where d09 and d09c run their staying blocks),
// then times each at the decode benchmark's grid points: device time between two events
// around one launch, the L2 flushed before each (a 256 MiB memset), median of 25, and the
// fraction of a 2 GiB device-to-device copy's rate measured in the same run.
#include "../../versions/d08_rows_in_registers/attention.cu"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

cudaError_t d07_launch(const void* args,
                       const causal_attention::DeviceLimits& limits,
                       cudaStream_t stream);

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

using decode_attention::Args;
using decode_attention::ElementType;
using Launch = cudaError_t (*)(const Args&, const decode_attention::DeviceLimits&, cudaStream_t);

template <typename T, class S>
cudaError_t d08_as(const Args& a, const decode_attention::DeviceLimits& l, cudaStream_t s) {
  return decode_attention::launch_typed<T, S>(a, l, s);
}
template <class S>
cudaError_t d08_shape(const Args& a, const decode_attention::DeviceLimits& l, cudaStream_t s) {
  switch (a.dtype) {
    case ElementType::kFloat32:
      return d08_as<float, S>(a, l, s);
    case ElementType::kFloat16:
      return d08_as<__half, S>(a, l, s);
    default:
      return d08_as<__nv_bfloat16, S>(a, l, s);
  }
}
cudaError_t d09_launch(const void* args,
                       const causal_attention::DeviceLimits& limits,
                       cudaStream_t stream);
cudaError_t d09(const Args& a, const decode_attention::DeviceLimits& l, cudaStream_t s) {
  return d09_launch(&a, l, s);
}
cudaError_t d09c_launch(const void* args,
                        const causal_attention::DeviceLimits& limits,
                        cudaStream_t stream);
cudaError_t d09c(const Args& a, const decode_attention::DeviceLimits& l, cudaStream_t s) {
  return d09c_launch(&a, l, s);
}
cudaError_t d07(const Args& a, const decode_attention::DeviceLimits& l, cudaStream_t s) {
  return d07_launch(&a, l, s);
}

// The reading alone: d08's grid, rows and loads (prefetch one step ahead), no lengths, no
// softmax, no merge, no cluster. The XOR of the bytes read is stored only if it is a value
// it never takes, so the loads stay.
template <typename T, class S>
__global__ void __launch_bounds__(S::kThreads, S::kBlocksPerSM)
    stream_only(const decode_attention::Operands<T> a) {
  constexpr int kVec = decode_attention::Vector<T>::kElements;
  constexpr int kLanesPerRow = 64 / kVec, kGroups = S::kThreads / kLanesPerRow,
                kUnroll = S::kUnroll;
  const int b = blockIdx.x / a.num_heads, h = blockIdx.x % a.num_heads;
  const int group = threadIdx.x / kLanesPerRow, slice = threadIdx.x % kLanesPerRow;
  const int n = a.cache_len, share = (n + a.splits - 1) / a.splits;
  const int rows = max(64, (share + kGroups - 1) / kGroups * kGroups);
  const int begin = blockIdx.y * rows, end = min(begin + rows, n);
  const T* k_col = a.k + b * a.k_batch_stride + h * 64 + slice * kVec;
  const T* v_col = a.v + b * a.v_batch_stride + h * 64 + slice * kVec;
  uint4 k_next[kUnroll], v_next[kUnroll];
  auto fetch = [&](int first) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = first + u * kGroups + group;
      if (j < end)
        k_next[u] = decode_attention::load_once(k_col + j * a.k_row_stride),
        v_next[u] = decode_attention::load_once(v_col + j * a.v_row_stride);
      else
        k_next[u] = v_next[u] = make_uint4(0, 0, 0, 0);
    }
  };
  uint32_t x = 0;
  fetch(begin);
  for (int first = begin; first < end; first += kGroups * kUnroll) {
    uint4 k_raw[kUnroll], v_raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) k_raw[u] = k_next[u], v_raw[u] = v_next[u];
    if (first + kGroups * kUnroll < end) fetch(first + kGroups * kUnroll);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      x ^= k_raw[u].x ^ k_raw[u].y ^ k_raw[u].z ^ k_raw[u].w ^ v_raw[u].x ^ v_raw[u].y ^
           v_raw[u].z ^ v_raw[u].w;
  }
  if (x == 0x9E3779B9u) a.out[0] = T(0.f);
}
template <typename T, class S>
cudaError_t stream_as(const Args& args, const decode_attention::DeviceLimits& l, cudaStream_t s) {
  const decode_attention::LaunchConfig c = decode_attention::launch_config_for<S>(args, l);
  stream_only<T, S><<<c.grid, c.block, 0, s>>>(decode_attention::operands<T>(args, c.grid.y));
  return cudaGetLastError();
}
template <class S>
cudaError_t stream_shape(const Args& a, const decode_attention::DeviceLimits& l, cudaStream_t s) {
  return a.dtype == ElementType::kFloat32 ? stream_as<float, S>(a, l, s)
                                          : stream_as<__nv_bfloat16, S>(a, l, s);
}

// The reading alone, as a copy reads: one block per slot, block i reads the i-th of equal
// shares of K's and V's bytes (all of a sequence's rows, every head of a row together: a
// warp's load covers 512 contiguous bytes), 4 x 16 bytes of each per thread per step, the
// next step's issued before this one is consumed. If this reads the caches at cuDNN's rate
// where d08's grid ("read 256x2 u4") does not, the way the heads are laid over the blocks is
// what separates d09 from cuDNN at batch 32 and up.
template <class S>
__global__ void __launch_bounds__(S::kThreads, S::kBlocksPerSM)
    read_flat(const uint4* __restrict__ k, const uint4* __restrict__ v, size_t vectors, void* out) {
  constexpr int kUnroll = S::kUnroll;
  const size_t share = (vectors + gridDim.x - 1) / gridDim.x;
  const size_t begin = blockIdx.x * share, end = min(begin + share, vectors);
  constexpr size_t kStep = size_t(S::kThreads) * kUnroll;
  uint4 k_next[kUnroll], v_next[kUnroll];
  auto fetch = [&](size_t first) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = first + size_t(u) * S::kThreads + threadIdx.x;
      if (i < end)
        k_next[u] = decode_attention::load_once(k + i),
        v_next[u] = decode_attention::load_once(v + i);
      else
        k_next[u] = v_next[u] = make_uint4(0, 0, 0, 0);
    }
  };
  uint32_t x = 0;
  fetch(begin);
  for (size_t first = begin; first < end; first += kStep) {
    uint4 k_raw[kUnroll], v_raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) k_raw[u] = k_next[u], v_raw[u] = v_next[u];
    if (first + kStep < end) fetch(first + kStep);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      x ^= k_raw[u].x ^ k_raw[u].y ^ k_raw[u].z ^ k_raw[u].w ^ v_raw[u].x ^ v_raw[u].y ^
           v_raw[u].z ^ v_raw[u].w;
  }
  if (x == 0x9E3779B9u) *static_cast<uint32_t*>(out) = x;
}
template <class S>
cudaError_t read_flat_shape(const Args& a,
                            const decode_attention::DeviceLimits& l,
                            cudaStream_t s) {
  const size_t es = a.dtype == ElementType::kFloat32 ? 4 : 2;
  const size_t vectors = size_t(a.batch) * a.cache_len * a.num_heads * 64 * es / 16;
  read_flat<S><<<S::kBlocksPerSM * l.sm_count, S::kThreads, 0, s>>>(
      static_cast<const uint4*>(a.k_cache), static_cast<const uint4*>(a.v_cache), vectors, a.out);
  return cudaGetLastError();
}

// d08's kernel under another plan of pieces: where the heads take more than one wave of the
// block slots, the pieces per head (1 to 4) that fill the last wave best; one wave as d08's
// plan otherwise.
template <class S>
int fill_plan(const Args& args, const decode_attention::DeviceLimits& limits) {
  const int64_t heads = args.batch * args.num_heads,
                slots = int64_t(S::kBlocksPerSM) * limits.sm_count;
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(16, args.cache_len / 64));
  if (heads < slots) return std::max<int64_t>(1, std::min(slots / heads, most));
  int best = 1;
  double best_fill = 0;
  for (int s = 1; s <= std::min<int64_t>(4, most); ++s) {
    const int64_t blocks = heads * s, waves = (blocks + slots - 1) / slots;
    const double fill = double(blocks) / double(waves * slots);
    if (fill > best_fill + 1e-9) best = s, best_fill = fill;
  }
  return best;
}
template <typename T, class S>
cudaError_t d08_fill_as(const Args& args,
                        const decode_attention::DeviceLimits& limits,
                        cudaStream_t stream) {
  const int splits = fill_plan<S>(args, limits);
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 1, cluster.val.clusterDim.y = splits, cluster.val.clusterDim.z = 1;
  if (splits > 8) {
    const cudaError_t e = cudaFuncSetAttribute(decode_attention::decode_kernel<T, S>,
                                               cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (e != cudaSuccess) return e;
  }
  cudaLaunchConfig_t launch{};
  launch.gridDim = dim3(unsigned(args.batch * args.num_heads), unsigned(splits));
  launch.blockDim = dim3(S::kThreads);
  launch.stream = stream;
  launch.attrs = &cluster;
  launch.numAttrs = 1;
  return cudaLaunchKernelEx(&launch, decode_attention::decode_kernel<T, S>,
                            decode_attention::operands<T>(args, splits));
}
template <class S>
cudaError_t d08_fill(const Args& a, const decode_attention::DeviceLimits& l, cudaStream_t s) {
  return a.dtype == ElementType::kFloat32 ? d08_fill_as<float, S>(a, l, s)
                                          : d08_fill_as<__nv_bfloat16, S>(a, l, s);
}

struct Variant {
  const char* name;
  Launch launch;
};
using decode_attention::BlockShape;
const Variant kVariants[] = {
    {"d07", d07},
    {"d08 256x2 u4", d08_shape<BlockShape<256, 2, 4>>},
    {"d08 128x4 u4", d08_shape<BlockShape<128, 4, 4>>},
    {"d09", d09},
    {"d09c", d09c},
    {"d08 256x2 fill", d08_fill<BlockShape<256, 2, 4>>},
    {"read 256x2 u4", stream_shape<BlockShape<256, 2, 4>>},
    {"read flat 256x2", read_flat_shape<BlockShape<256, 2, 4>>},
};
// The reading-alone rows compute nothing: the correctness check skips them.
bool computes(const Variant& v) { return v.name[0] != 'r'; }

__global__ void fill(uint16_t* p16, float* p32, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 15, x *= 2246822519u, x ^= x >> 13, x *= 3266489917u, x ^= x >> 16;
    const float f = scale * (float(x) / 4294967296.f * 2.f - 1.f);
    if (p32)
      p32[i] = f;
    else
      p16[i] = __bfloat16_as_ushort(__float2bfloat16_rn(f));
  }
}

static double host_value(const void* p, size_t i, ElementType t) {
  if (t == ElementType::kFloat32) return static_cast<const float*>(p)[i];
  uint16_t bits = static_cast<const uint16_t*>(p)[i];
  uint32_t w = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

int main() {
  int dev = 0;
  CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, dev));
  decode_attention::DeviceLimits limits;
  CHECK(causal_attention::query_limits(dev, &limits));
  std::printf("%s, %d SMs\n", prop.name, limits.sm_count);
  const int H = 12, C = H * 64;
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));

  // Correctness, float64 on the host, NaN past each length: B=3, S=1000, lengths {1000, 1,
  // 517} (fewer heads than slots: pieces in one wave); B=33, S=1000, lengths 0 to 1000 (396
  // heads: staying blocks, in clusters of 2 in d09c).
  bool all_ok = true;
  struct Case {
    ElementType t;
    int B;
  };
  for (const Case c : {Case{ElementType::kFloat32, 3}, Case{ElementType::kBFloat16, 3},
                       Case{ElementType::kFloat32, 33}, Case{ElementType::kBFloat16, 33}}) {
    const ElementType t = c.t;
    const int B = c.B, S = 1000;
    std::vector<int32_t> lens(B);
    const int three[] = {1000, 1, 517};
    for (int b = 0; b < B; ++b) lens[b] = B == 3 ? three[b] : (b * 389) % (S + 1);
    lens[B - 1] = S;  // one whole cache
    const size_t lens_bytes = B * sizeof(int32_t);
    const size_t es = t == ElementType::kFloat32 ? 4 : 2;
    const size_t nq = size_t(B) * C, nkv = size_t(B) * S * C;
    void *q, *k, *v, *out;
    int32_t* lengths;
    CHECK(cudaMalloc(&q, nq * es));
    CHECK(cudaMalloc(&k, nkv * es));
    CHECK(cudaMalloc(&v, nkv * es));
    CHECK(cudaMalloc(&out, nq * es));
    CHECK(cudaMalloc(&lengths, lens_bytes));
    CHECK(cudaMemcpy(lengths, lens.data(), lens_bytes, cudaMemcpyHostToDevice));
    auto fill_any = [&](void* p, size_t n, uint32_t seed, float scale) {
      fill<<<1024, 256>>>(es == 2 ? (uint16_t*)p : nullptr, es == 4 ? (float*)p : nullptr, n, seed,
                          scale);
    };
    fill_any(q, nq, 1, 3.f), fill_any(k, nkv, 2, 1.f), fill_any(v, nkv, 3, 1.f);
    // NaN past each length (0xFFFF... is a NaN in both types).
    for (int b = 0; b < B; ++b) {
      CHECK(cudaMemset(static_cast<char*>(k) + (size_t(b) * S + lens[b]) * C * es, 0xFF,
                       size_t(S - lens[b]) * C * es));
      CHECK(cudaMemset(static_cast<char*>(v) + (size_t(b) * S + lens[b]) * C * es, 0xFF,
                       size_t(S - lens[b]) * C * es));
    }
    CHECK(cudaDeviceSynchronize());
    std::vector<char> hq(nq * es), hk(nkv * es), hv(nkv * es), ho(nq * es);
    CHECK(cudaMemcpy(hq.data(), q, nq * es, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hk.data(), k, nkv * es, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hv.data(), v, nkv * es, cudaMemcpyDeviceToHost));
    std::vector<double> ref(nq);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h) {
        std::vector<double> s(lens[b]);
        double mx = -1e300;
        for (int j = 0; j < lens[b]; ++j) {
          double acc = 0;
          for (int d = 0; d < 64; ++d)
            acc += host_value(hq.data(), size_t(b) * C + h * 64 + d, t) *
                   host_value(hk.data(), (size_t(b) * S + j) * C + h * 64 + d, t);
          s[j] = acc / 8.0, mx = std::max(mx, s[j]);
        }
        double l = 0;
        for (double& x : s) x = std::exp(x - mx), l += x;
        for (int d = 0; d < 64; ++d) {
          double o = 0;
          for (int j = 0; j < lens[b]; ++j)
            o += s[j] * host_value(hv.data(), (size_t(b) * S + j) * C + h * 64 + d, t);
          ref[size_t(b) * C + h * 64 + d] = lens[b] > 0 ? o / l : 0.0;  // no row: a zero row
        }
      }
    for (const Variant& var : kVariants) {
      if (!computes(var)) continue;
      Args a{};
      a.q = q, a.k_cache = k, a.v_cache = v, a.lengths = lengths, a.out = out, a.dtype = t;
      a.batch = B, a.cache_len = S, a.num_heads = H, a.q_batch_stride = C;
      a.k_batch_stride = a.v_batch_stride = int64_t(S) * C, a.k_row_stride = a.v_row_stride = C;
      a.device = dev;
      CHECK(cudaMemset(out, 0xFF, nq * es));
      CHECK(var.launch(a, limits, stream));
      CHECK(cudaStreamSynchronize(stream));
      CHECK(cudaMemcpy(ho.data(), out, nq * es, cudaMemcpyDeviceToHost));
      double worst = 0;
      for (size_t i = 0; i < nq; ++i) {
        const double e = std::fabs(host_value(ho.data(), i, t) - ref[i]);
        worst = std::isnan(e) ? 1e9 : std::max(worst, e);
      }
      const double bound =
          t == ElementType::kFloat32 ? 1e-5 : 1e-2;  // bf16 output rounding: 2^-8 of |o| < 1
      std::printf("check %-8s B=%-2d %-14s max |err| %.3g %s\n",
                  t == ElementType::kFloat32 ? "float32" : "bfloat16", B, var.name, worst,
                  worst <= bound ? "ok" : "FAILED");
      all_ok &= worst <= bound;
    }
    CHECK(cudaFree(q));
    CHECK(cudaFree(k));
    CHECK(cudaFree(v));
    CHECK(cudaFree(out));
    CHECK(cudaFree(lengths));
  }

  // Timing.
  const size_t flush_bytes = size_t(256) << 20, copy_bytes = size_t(2) << 30;
  void *flush, *copy_a, *copy_b;
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaMalloc(&copy_a, copy_bytes));
  CHECK(cudaMalloc(&copy_b, copy_bytes));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  auto median_us = [&](auto&& body, int reps) {
    std::vector<float> t(reps);
    for (int r = 0; r < reps + 3; ++r) {
      CHECK(cudaMemsetAsync(flush, r & 0xFF, flush_bytes, stream));
      CHECK(cudaEventRecord(e0, stream));
      body();
      CHECK(cudaEventRecord(e1, stream));
      CHECK(cudaEventSynchronize(e1));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= 3) t[r - 3] = ms * 1000.f;
    }
    std::sort(t.begin(), t.end());
    return t[reps / 2];
  };
  const double copy_us = median_us(
      [&] { CHECK(cudaMemcpyAsync(copy_b, copy_a, copy_bytes, cudaMemcpyDeviceToDevice, stream)); },
      7);
  const double copy_gbps = 2.0 * copy_bytes / copy_us / 1e3;
  std::printf("copy: %.0f GB/s\n", copy_gbps);
  CHECK(cudaFree(copy_a));
  CHECK(cudaFree(copy_b));

  struct Point {
    int B, L;
  };
  const Point points[] = {{1, 256},    {1, 1024},   {1, 4096},   {1, 16384}, {8, 256},
                          {8, 1024},   {8, 4096},   {8, 16384},  {32, 256},  {32, 1024},
                          {32, 4096},  {32, 16384}, {64, 1024},  {64, 4096}, {64, 16384},
                          {128, 1024}, {128, 4096}, {128, 16384}};
  const size_t most = size_t(128) * 16384 * C * 4;  // float32 B=128 L=16384, K or V
  void *q, *k, *v, *out;
  int32_t* lengths;
  CHECK(cudaMalloc(&q, size_t(128) * C * 4));
  CHECK(cudaMalloc(&out, size_t(128) * C * 4));
  CHECK(cudaMalloc(&k, most));
  CHECK(cudaMalloc(&v, most));
  CHECK(cudaMalloc(&lengths, 128 * 4));
  for (ElementType t : {ElementType::kBFloat16, ElementType::kFloat32}) {
    const size_t es = t == ElementType::kFloat32 ? 4 : 2;
    fill<<<4096, 256>>>(es == 2 ? (uint16_t*)k : nullptr, es == 4 ? (float*)k : nullptr, most / es,
                        5, 1.f);
    fill<<<4096, 256>>>(es == 2 ? (uint16_t*)v : nullptr, es == 4 ? (float*)v : nullptr, most / es,
                        6, 1.f);
    fill<<<64, 256>>>(es == 2 ? (uint16_t*)q : nullptr, es == 4 ? (float*)q : nullptr, 128 * C, 7,
                      3.f);
    CHECK(cudaDeviceSynchronize());
    std::printf("\n%-8s %4s %6s", t == ElementType::kFloat32 ? "float32" : "bfloat16", "B", "L");
    for (const Variant& var : kVariants) std::printf(" %19s", var.name);
    std::printf("\n");
    for (const Point& p : points) {
      std::vector<int32_t> lens(p.B, p.L);
      CHECK(cudaMemcpy(lengths, lens.data(), p.B * 4, cudaMemcpyHostToDevice));
      Args a{};
      a.q = q, a.k_cache = k, a.v_cache = v, a.lengths = lengths, a.out = out, a.dtype = t;
      a.batch = p.B, a.cache_len = p.L, a.num_heads = H, a.q_batch_stride = C;
      a.k_batch_stride = a.v_batch_stride = int64_t(p.L) * C, a.k_row_stride = a.v_row_stride = C;
      a.device = dev;
      const double bytes = 2.0 * p.B * p.L * C * es;
      std::printf("%-8s %4d %6d", "", p.B, p.L);
      for (const Variant& var : kVariants) {
        const double us = median_us([&] { CHECK(var.launch(a, limits, stream)); }, 25);
        std::printf(" %8.1f (%4.2f)    ", us, bytes / us / 1e3 / copy_gbps);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  std::printf("%s\n", all_ok ? "all checks ok" : "SOME CHECKS FAILED");
  return all_ok ? 0 : 1;
}
