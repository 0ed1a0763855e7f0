// The torch side of every decode version, written once: input checks, output and scratch
// allocation, the current stream, and registration of decode_attention in the version's own
// namespace. Compiled once per decode version with -DATTN_NAMESPACE=<namespace>; the kernel
// file it links against (attention.cu) defines decode_attention::{requirements,
// launch_config, workspace_bytes, launch} (decode_launch.h). The fake (meta) kernel is
// registered from Python (register_fake in backends/extension.py).
#include "decode_launch.h"
#include "glue_text.h"
#include "glue_workspace.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#ifndef ATTN_NAMESPACE
#error "build with -DATTN_NAMESPACE=<op namespace>, for example -DATTN_NAMESPACE=flash_d01"
#endif
#define ATTN_STRINGIFY_(x) #x
#define ATTN_STRINGIFY(x) ATTN_STRINGIFY_(x)
// TORCH_LIBRARY pastes its first argument with ##: one level of indirection expands it first.
#define ATTN_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define ATTN_LIBRARY_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

namespace {

constexpr const char* kOpName = ATTN_STRINGIFY(ATTN_NAMESPACE) "::decode_attention";
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
static_assert(decode_attention::kHeadDim == 64, "the head-dimension message below says 64");
using glue_text::fmt;

bool accepted_dtype(at::ScalarType type) {
  return type == at::kFloat || type == at::kHalf || type == at::kBFloat16;
}

decode_attention::ElementType element_type(at::ScalarType type) {
  if (type == at::kHalf) return decode_attention::ElementType::kFloat16;
  if (type == at::kBFloat16) return decode_attention::ElementType::kBFloat16;
  return decode_attention::ElementType::kFloat32;
}

// Checks what every tensor operand shares: dtype (that of q), device, stride 1 in its last
// dimension, and the version's alignment of the data pointer and the other strides.
void check_common(const at::Tensor& t, const char* name, const at::Tensor& q, int alignment_bytes) {
  TORCH_CHECK(accepted_dtype(t.scalar_type()), kOpName, ": ", name,
              " must be float32, float16 or bfloat16, got ", c10::toString(t.scalar_type()));
  TORCH_CHECK(t.scalar_type() == q.scalar_type(), kOpName,
              ": q, k_cache and v_cache must have one dtype, q is ", c10::toString(q.scalar_type()),
              " and ", name, " is ", c10::toString(t.scalar_type()));
  TORCH_CHECK(t.is_cuda(), kOpName, ": ", name, " must be a CUDA tensor, got one on ",
              t.device().str());
  TORCH_CHECK(t.device() == q.device(), kOpName,
              ": q, k_cache, v_cache and lengths must be on one ", "device, q is on ",
              q.device().str(), " and ", name, " on ", t.device().str());
  TORCH_CHECK(t.stride(-1) == 1, kOpName, ": ", name,
              " must have stride 1 in its last dimension (C), got strides ", fmt(t.strides()));
  const auto address = reinterpret_cast<std::uintptr_t>(t.data_ptr());
  TORCH_CHECK(address % alignment_bytes == 0, kOpName, ": ", name, "'s data pointer must be ",
              fmt(alignment_bytes),
              "-byte aligned for this version's vector loads (storage offset ",
              fmt(t.storage_offset()), ")");
  const int64_t elements_per_vector = alignment_bytes / static_cast<int64_t>(t.element_size());
  for (int64_t dim = 0; dim + 1 < t.dim(); ++dim) {
    TORCH_CHECK(t.size(dim) <= 1 || t.stride(dim) % elements_per_vector == 0, kOpName, ": ", name,
                "'s strides must be multiples of ", fmt(elements_per_vector),
                " elements for this version's vector loads, got ", fmt(t.strides()));
  }
}

at::Tensor decode_attention_impl(const at::Tensor& q,
                                 const at::Tensor& k_cache,
                                 const at::Tensor& v_cache,
                                 const at::Tensor& lengths,
                                 int64_t num_heads) {
  const decode_attention::Requirements req = decode_attention::requirements();
  TORCH_CHECK(q.dim() == 2, kOpName, ": q must be 2-D (B, C), got shape ", fmt(q.sizes()));
  TORCH_CHECK(k_cache.dim() == 3, kOpName, ": k_cache must be 3-D (B, S, C), got shape ",
              fmt(k_cache.sizes()));
  check_common(q, "q", q, req.alignment_bytes);
  check_common(k_cache, "k_cache", q, req.alignment_bytes);
  check_common(v_cache, "v_cache", q, req.alignment_bytes);
  TORCH_CHECK(v_cache.sizes() == k_cache.sizes(), kOpName,
              ": k_cache and v_cache must have the same shape, k_cache is ", fmt(k_cache.sizes()),
              " and v_cache is ", fmt(v_cache.sizes()));
  const int64_t B = q.size(0), C = q.size(1), S = k_cache.size(1);
  TORCH_CHECK(k_cache.size(0) == B && k_cache.size(2) == C, kOpName,
              ": k_cache must be (B, S, C) with q's B and C, q is ", fmt(q.sizes()),
              " and k_cache is ", fmt(k_cache.sizes()));
  TORCH_CHECK(lengths.scalar_type() == at::kInt, kOpName, ": lengths must be int32, got ",
              c10::toString(lengths.scalar_type()));
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == B, kOpName,
              ": lengths must be 1-D with one entry per sequence (B = ", fmt(B), "), got shape ",
              fmt(lengths.sizes()));
  TORCH_CHECK(lengths.is_cuda() && lengths.device() == q.device(), kOpName,
              ": lengths must be on q's device (", q.device().str(), "), got one on ",
              lengths.device().str(),
              "; lengths stay on the device so that no call waits for the host");
  TORCH_CHECK(lengths.is_contiguous(), kOpName, ": lengths must be contiguous, got strides ",
              fmt(lengths.strides()));
  TORCH_CHECK(num_heads >= 1, kOpName, ": num_heads must be at least 1, got ", fmt(num_heads));
  TORCH_CHECK(C == num_heads * decode_attention::kHeadDim, kOpName,
              ": the head dimension must be 64 (C = num_heads * 64), got C = ", fmt(C),
              " with num_heads = ", fmt(num_heads));
  TORCH_CHECK(S <= 1 || (S - 1) * std::max(k_cache.stride(1), v_cache.stride(1)) + C <= kInt32Max,
              kOpName,
              ": a cache spans more than 2^31-1 elements per sequence ((S - 1) * row stride + C);",
              " the kernels index within a sequence with 32-bit ints");
  TORCH_CHECK(B * num_heads <= kInt32Max, kOpName, ": B * num_heads = ", fmt(B * num_heads),
              " exceeds the grid limit 2^31-1");

  at::Tensor out = at::empty({B, C}, q.options());  // contiguous
  if (B == 0) return out;
  if (S == 0) return out.zero_();  // no cached rows: every length reads as 0

  const c10::cuda::CUDAGuard device_guard(q.device());
  decode_attention::Args args{};
  args.q = q.data_ptr();
  args.k_cache = k_cache.data_ptr();
  args.v_cache = v_cache.data_ptr();
  args.lengths = lengths.data_ptr<int32_t>();
  args.out = out.data_ptr();
  args.dtype = element_type(q.scalar_type());
  args.batch = B;
  args.cache_len = S;
  args.num_heads = num_heads;
  args.q_batch_stride = q.stride(0);
  args.k_batch_stride = k_cache.stride(0);
  args.k_row_stride = k_cache.stride(1);
  args.v_batch_stride = v_cache.stride(0);
  args.v_row_stride = v_cache.stride(1);
  args.device = q.get_device();

  decode_attention::DeviceLimits limits{};
  const cudaError_t limits_err = decode_attention::query_limits(args.device, &limits);
  TORCH_CHECK(limits_err == cudaSuccess, kOpName,
              ": cannot read the device's limits: ", cudaGetErrorString(limits_err));

  glue_workspace::launch_with_workspace(
      args, decode_attention::workspace_bytes(args, limits), q, kOpName,
      [&](cudaStream_t stream) { return decode_attention::launch(args, limits, stream); });
  return out;
}

}  // namespace

ATTN_LIBRARY(ATTN_NAMESPACE, m) {
  m.def(
      "decode_attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor lengths, int num_heads) "
      "-> Tensor");
}

ATTN_LIBRARY_IMPL(ATTN_NAMESPACE, CUDA, m) { m.impl("decode_attention", &decode_attention_impl); }

// Registered for CPU too, so that CPU tensors get the contract's message ("must be a CUDA
// tensor") instead of the dispatcher's "could not run ... with the CPU backend".
ATTN_LIBRARY_IMPL(ATTN_NAMESPACE, CPU, m) { m.impl("decode_attention", &decode_attention_impl); }
