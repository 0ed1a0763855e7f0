// The interface between a decode version's kernel file (versions/dNN_*/attention.cu, plain
// CUDA) and its torch glue (decode_glue.cpp, written once for every decode version).
//
// The decode op: one new query row per sequence against a KV cache. Sequence b attends to
// its cached rows 0 .. n_b - 1, where n_b is lengths[b] read on the device and clamped to
// [0, S]: a length past the cache reads the whole cache, a length below 1 gives a zero row.
// No mask beyond the length, no causal flag. Every decode version takes float32, float16
// and bfloat16 (one kernel template, float32 accumulation) and any row and batch stride of
// the caches (a slice of a preallocated cache).
// Nothing here includes a torch header, so `nvcc -c attention.cu` compiles on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

#include "attention_launch.h"  // DeviceLimits, query_limits, LaunchConfig, kHeadDim

namespace decode_attention {

using causal_attention::DeviceLimits;
using causal_attention::LaunchConfig;
using causal_attention::query_limits;
constexpr int kHeadDim = causal_attention::kHeadDim;  // d: GPT-2's head size

// The element type of q, the caches and out (all one type).
enum class ElementType : int { kFloat32, kFloat16, kBFloat16 };

// One call of the op. Strides are in elements; the last dimension has stride 1.
struct Args {
  const void* q;           // (B, C): row b at q + b * q_batch_stride
  const void* k_cache;  // (B, S, C): row j of sequence b at b * k_batch_stride + j * k_row_stride
  const void* v_cache;  // (B, S, C), likewise
  const int32_t* lengths;  // (B,) on the device, contiguous
  void* out;  // (B, C), a new contiguous tensor
  ElementType dtype;
  int64_t batch;  // B
  int64_t cache_len;  // S: rows each cache holds (the most a sequence can attend to)
  int64_t num_heads;  // H, with C = H * 64
  int64_t q_batch_stride;
  int64_t k_batch_stride, k_row_stride;
  int64_t v_batch_stride, v_row_stride;
  void* workspace;  // workspace_bytes(*this, limits) bytes of device memory, or nullptr if 0
  int device;  // the CUDA device the tensors live on
};

// What a version needs of its inputs beyond the op contract; the glue enforces it.
struct Requirements {
  int alignment_bytes;  // q's, the caches' and out's data pointers and strides (in bytes)
                        // must be multiples of this (16 where the kernel loads 16-byte vectors)
};

Requirements requirements();

// The main kernel's launch for these arguments on a GPU with these limits: pure host
// arithmetic (lengths stay on the device, so a host-side plan can only use S), which the
// compile check prints without a GPU.
LaunchConfig launch_config(const Args& args, const DeviceLimits& limits);

// Scratch memory for these arguments (torch's caching allocator provides it).
size_t workspace_bytes(const Args& args, const DeviceLimits& limits);

// Launches the kernel(s) on `stream`; returns the first launch error (no sync).
cudaError_t launch(const Args& args, const DeviceLimits& limits, cudaStream_t stream);

}  // namespace decode_attention
