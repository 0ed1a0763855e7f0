// The interface between a version's kernel file (attention.cu, plain CUDA) and the
// torch glue (torch_glue.cpp, written once for every version).
//
// Every version's attention.cu defines the four functions declared at the bottom: a
// float32-track version (v01, v02, ...) for Args, a half-precision-track version (h01,
// h02, ...) for HalfArgs. The glue is compiled for one track or the other (the registry
// row says which: -DATTN_HALF_PRECISION for the half track).
// Nothing here includes a torch header, so `nvcc -c attention.cu` compiles on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace causal_attention {

constexpr int kHeadDim = 64;  // d: every version is written for GPT-2's head size

// One call of the op: q, k, v and out are (B, T, C) tensors of Element with C =
// num_heads * 64. Strides are in elements. The glue always fills them in; versions 1-10
// declare that they need the contiguous layout (row stride C, batch stride T * C) and
// the glue refuses anything else before a launch.
template <typename Element>
struct OperandArgs {
  const Element* q;
  const Element* k;
  const Element* v;
  Element* out;  // always a new contiguous (B, T, C) tensor
  int64_t batch;      // B
  int64_t seq_len;    // T
  int64_t num_heads;  // H
  int64_t q_batch_stride, q_row_stride;
  int64_t k_batch_stride, k_row_stride;
  int64_t v_batch_stride, v_row_stride;
  void* workspace;  // workspace_bytes(*this) bytes of device memory, or nullptr if 0
  int device;       // the CUDA device the tensors live on
};

// The float32 track: q, k, v and out are float32.
using Args = OperandArgs<float>;

// The half-precision track: q, k, v and out all hold one 16-bit type, named by dtype
// (one kernel template serves both); accumulation is the kernel's business (float32).
enum class HalfType : int { kFloat16, kBFloat16 };

struct HalfArgs : OperandArgs<void> {
  HalfType dtype;
};

// What a version needs of its inputs beyond the op contract; the glue enforces it with
// messages that name the offending argument.
struct Requirements {
  bool strided_inputs;     // true: any row and batch stride (last-dim stride still 1)
  int alignment_bytes;     // data pointers and strides (in bytes) must be multiples of this
  bool half_precision = false;  // the track: false, float32 (Args); true, 16-bit (HalfArgs)
};

Requirements requirements();

// What a launcher needs to know about the GPU. launch() reads it from the device with
// query_limits(); the compile check, which has no GPU, fills it in by hand.
struct DeviceLimits {
  int smem_per_block;        // default dynamic shared-memory limit per block (48 KB so far)
  int smem_per_block_optin;  // the limit a kernel may opt in to (227 KB on Hopper)
  int sm_count;              // streaming multiprocessors
};

inline cudaError_t query_limits(int device, DeviceLimits* limits) {
  cudaError_t err =
      cudaDeviceGetAttribute(&limits->smem_per_block, cudaDevAttrMaxSharedMemoryPerBlock, device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&limits->smem_per_block_optin,
                                 cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&limits->sm_count, cudaDevAttrMultiProcessorCount, device);
  return err;
}

// The main kernel's launch: grid, block and dynamic shared memory per block.
struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t smem_bytes;
};

// The launch configuration for these arguments on a GPU with these limits. Pure host
// arithmetic (no CUDA call), so that the compile check can print it without a GPU;
// launch() uses the same function, so what it prints is what runs.
LaunchConfig launch_config(const Args& args, const DeviceLimits& limits);

// Scratch memory this version needs for these arguments (torch's caching allocator
// provides it; the kernel file never calls cudaMalloc).
size_t workspace_bytes(const Args& args);

// Launches the kernel(s) on `stream` and returns the launch's error code (no sync).
cudaError_t launch(const Args& args, cudaStream_t stream);

// The same three for a half-precision-track version (h01, h02, ...).
LaunchConfig launch_config(const HalfArgs& args, const DeviceLimits& limits);
size_t workspace_bytes(const HalfArgs& args);
cudaError_t launch(const HalfArgs& args, cudaStream_t stream);

}  // namespace causal_attention
