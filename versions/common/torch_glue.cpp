// The torch side of every version, written once: input checks, output and scratch
// allocation, the current stream, and registration of the op in the version's own
// namespace. Compiled once per version with -DATTN_NAMESPACE=<namespace>, and with
// -DATTN_HALF_PRECISION for a version of the half-precision track; the kernel file it
// links against (attention.cu) defines causal_attention::{requirements, launch_config,
// workspace_bytes, launch} for Args (float32) or HalfArgs (float16/bfloat16). The fake
// (meta) kernel is registered from Python (register_fake in backends/extension.py)
// because it must work with symbolic shapes.
#include "attention_launch.h"
#include "glue_text.h"
#include "glue_workspace.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <limits>
#include <string>

#ifndef ATTN_NAMESPACE
#error "build with -DATTN_NAMESPACE=<op namespace>, for example -DATTN_NAMESPACE=flash_v01"
#endif
#define ATTN_STRINGIFY_(x) #x
#define ATTN_STRINGIFY(x) ATTN_STRINGIFY_(x)
// TORCH_LIBRARY pastes its first argument with ##, which would not expand our macro:
// one level of indirection expands ATTN_NAMESPACE first.
#define ATTN_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define ATTN_LIBRARY_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

namespace {

constexpr const char* kOpName = ATTN_STRINGIFY(ATTN_NAMESPACE) "::causal_attention";

#ifdef ATTN_HALF_PRECISION
constexpr bool kHalfTrack = true;
using TrackArgs = causal_attention::HalfArgs;
constexpr const char* kAcceptedDtypes = "float16 or bfloat16";
#else
constexpr bool kHalfTrack = false;
using TrackArgs = causal_attention::Args;
constexpr const char* kAcceptedDtypes = "float32";
#endif

bool accepted_dtype(at::ScalarType type) {
  return kHalfTrack ? (type == at::kHalf || type == at::kBFloat16) : type == at::kFloat;
}
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
static_assert(causal_attention::kHeadDim == 64, "the head-dimension message below says 64");

using glue_text::fmt;  // numbers in messages as strings (glue_text.h says why)

// Checks one of q, k, v against the op contract and the version's requirements.
void check_operand(const at::Tensor& t,
                   const char* name,
                   const at::Tensor& q,
                   const causal_attention::Requirements& req) {
  TORCH_CHECK(accepted_dtype(t.scalar_type()), kOpName, ": ", name, " must be ", kAcceptedDtypes,
              ", got ", c10::toString(t.scalar_type()));
  TORCH_CHECK(t.scalar_type() == q.scalar_type(), kOpName,
              ": q, k and v must have one dtype, q is ", c10::toString(q.scalar_type()), " and ",
              name, " is ", c10::toString(t.scalar_type()));
  TORCH_CHECK(t.is_cuda(), kOpName, ": ", name, " must be a CUDA tensor, got one on ",
              t.device().str());
  TORCH_CHECK(t.dim() == 3, kOpName, ": ", name, " must be 3-D (B, T, C), got shape ",
              fmt(t.sizes()));
  TORCH_CHECK(t.device() == q.device(), kOpName, ": q, k and v must be on one device, q is on ",
              q.device().str(), " and ", name, " on ", t.device().str());
  TORCH_CHECK(t.sizes() == q.sizes(), kOpName, ": q, k and v must have the same shape, q is ",
              fmt(q.sizes()), " and ", name, " is ", fmt(t.sizes()));
  TORCH_CHECK(t.stride(2) == 1, kOpName, ": ", name,
              " must have stride 1 in its last dimension (C), got strides ", fmt(t.strides()));
  if (!req.strided_inputs) {
    TORCH_CHECK(t.is_contiguous(), kOpName, ": ", name,
                " must be contiguous for this version (strides ", fmt(t.strides()),
                "); call .contiguous() first, or use a version that accepts strided views (v11)");
  }
  TORCH_CHECK(t.size(1) * t.stride(1) <= kInt32Max, kOpName, ": ", name,
              " spans more than 2^31-1 elements per batch item (T * row stride = ",
              fmt(t.size(1) * t.stride(1)),
              "); the kernels index within a batch item with 32-bit ints");
  if (req.alignment_bytes > 1) {
    const auto address = reinterpret_cast<std::uintptr_t>(t.data_ptr());
    TORCH_CHECK(address % req.alignment_bytes == 0, kOpName, ": ", name, "'s data pointer must be ",
                fmt(req.alignment_bytes),
                "-byte aligned for this version's vector loads (storage offset ",
                fmt(t.storage_offset()), ")");
    const int64_t elements_per_vector =
        req.alignment_bytes / static_cast<int64_t>(t.element_size());
    TORCH_CHECK(t.stride(0) % elements_per_vector == 0 && t.stride(1) % elements_per_vector == 0,
                kOpName, ": ", name, "'s batch and row strides must be multiples of ",
                fmt(elements_per_vector), " elements for this version's vector loads, got ",
                fmt(t.strides()));
  }
}

at::Tensor causal_attention_impl(const at::Tensor& q,
                                 const at::Tensor& k,
                                 const at::Tensor& v,
                                 int64_t num_heads) {
  const causal_attention::Requirements req = causal_attention::requirements();
  TORCH_CHECK(req.half_precision == kHalfTrack, kOpName, ": the kernel file is for the ",
              req.half_precision ? "half-precision" : "float32",
              " track but the glue was built for the other one (the registry row's dtypes and the "
              "kernel file's requirements() disagree)");
  check_operand(q, "q", q, req);
  check_operand(k, "k", q, req);
  check_operand(v, "v", q, req);
  const int64_t B = q.size(0), T = q.size(1), C = q.size(2);
  TORCH_CHECK(num_heads >= 1, kOpName, ": num_heads must be at least 1, got ", fmt(num_heads));
  TORCH_CHECK(C == num_heads * causal_attention::kHeadDim, kOpName,
              ": the head dimension must be 64 (C = num_heads * 64), got C = ", fmt(C),
              " with num_heads = ", fmt(num_heads));
  TORCH_CHECK(B * num_heads <= kInt32Max, kOpName, ": B * num_heads = ", fmt(B * num_heads),
              " exceeds the grid limit 2^31-1");

  at::Tensor out = at::empty({B, T, C}, q.options());  // contiguous
  if (B == 0 || T == 0) return out;

  const c10::cuda::CUDAGuard device_guard(q.device());
  TrackArgs args{};
#ifdef ATTN_HALF_PRECISION
  args.q = q.data_ptr();
  args.k = k.data_ptr();
  args.v = v.data_ptr();
  args.out = out.data_ptr();
  args.dtype = q.scalar_type() == at::kHalf ? causal_attention::HalfType::kFloat16
                                            : causal_attention::HalfType::kBFloat16;
#else
  args.q = q.data_ptr<float>();
  args.k = k.data_ptr<float>();
  args.v = v.data_ptr<float>();
  args.out = out.data_ptr<float>();
#endif
  args.batch = B;
  args.seq_len = T;
  args.num_heads = num_heads;
  args.q_batch_stride = q.stride(0);
  args.q_row_stride = q.stride(1);
  args.k_batch_stride = k.stride(0);
  args.k_row_stride = k.stride(1);
  args.v_batch_stride = v.stride(0);
  args.v_row_stride = v.stride(1);
  args.device = q.get_device();

  glue_workspace::launch_with_workspace(
      args, causal_attention::workspace_bytes(args), q, kOpName,
      [&](cudaStream_t stream) { return causal_attention::launch(args, stream); });
  return out;
}

}  // namespace

ATTN_LIBRARY(ATTN_NAMESPACE, m) {
  m.def("causal_attention(Tensor q, Tensor k, Tensor v, int num_heads) -> Tensor");
}

ATTN_LIBRARY_IMPL(ATTN_NAMESPACE, CUDA, m) { m.impl("causal_attention", &causal_attention_impl); }

// Registered for CPU too, so that CPU tensors get the contract's message ("must be a
// CUDA tensor") instead of the dispatcher's "could not run ... with the CPU backend".
ATTN_LIBRARY_IMPL(ATTN_NAMESPACE, CPU, m) { m.impl("causal_attention", &causal_attention_impl); }
