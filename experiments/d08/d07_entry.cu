// d07's launcher under another namespace name, so that the probe can time it beside d08's
// block shapes in one binary (the two files define the same names).
#define decode_attention d07_attention
#include "../../versions/d07_one_wave_of_pieces/attention.cu"

cudaError_t d07_launch(const void* args,
                       const causal_attention::DeviceLimits& limits,
                       cudaStream_t stream) {
  return d07_attention::launch(*static_cast<const d07_attention::Args*>(args), limits, stream);
}
