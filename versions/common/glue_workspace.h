// The launch with its scratch, for the torch glue (torch_glue.cpp, decode_glue.cpp): both ops
// take the bytes their kernel file's workspace_bytes() asks for from torch's caching allocator
// and launch on the current stream the same way.
#pragma once

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace glue_workspace {

// Points args.workspace at `bytes` of scratch on `like`'s device (nullptr stays for 0), calls
// launch(stream) on that device's current stream and raises, naming `op`, if the launch
// failed. The scratch comes from torch's caching allocator and is held until the launch is
// queued; the allocator's stream semantics keep it valid for the kernels on that stream.
template <typename Args, typename Launch>
void launch_with_workspace(
    Args& args, size_t bytes, const at::Tensor& like, const char* op, Launch&& launch) {
  at::Tensor workspace;
  if (bytes > 0) {
    workspace = at::empty({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte));
    args.workspace = workspace.data_ptr();
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(like.get_device()).stream();
  const cudaError_t err = launch(stream);
  TORCH_CHECK(err == cudaSuccess, op, ": kernel launch failed: ", cudaGetErrorString(err));
}

}  // namespace glue_workspace
