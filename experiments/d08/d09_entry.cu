// d09's launcher under another namespace name, so that the probe can time it beside d08's
// block shapes in one binary (the files define the same names).
#define decode_attention d09_attention
#include "../../versions/d09_blocks_stay/attention.cu"

cudaError_t d09_launch(const void* args,
                       const causal_attention::DeviceLimits& limits,
                       cudaStream_t stream) {
  return d09_attention::launch(*static_cast<const d09_attention::Args*>(args), limits, stream);
}
