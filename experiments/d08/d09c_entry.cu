// Trial d09c_1 (experiments/d09/d09c_1_staying_clusters.patch) under another namespace name,
// for the probe. The patched kernel file is made by the device call, not committed:
//   patch -p1 -o /tmp/d09c_attention.cu versions/d09_blocks_stay/attention.cu \
//         experiments/d09/d09c_1_staying_clusters.patch
// and found through -I/tmp (nvcc ... -I/tmp d09c_entry.cu).
#define decode_attention d09c_attention
#include "d09c_attention.cu"

cudaError_t d09c_launch(const void* args,
                        const causal_attention::DeviceLimits& limits,
                        cudaStream_t stream) {
  return d09c_attention::launch(*static_cast<const d09c_attention::Args*>(args), limits, stream);
}
