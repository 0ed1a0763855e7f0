// Prints the launch configuration a version's launcher chooses, without a GPU.
//
// Linked with one version's attention.cu by `python -m harness compile-check`; it calls
// causal_attention::launch_config (pure host arithmetic) for contiguous (B, T, C) inputs
// and the device limits given on the command line, and causal_attention::requirements,
// and prints two lines:
//   grid X Y Z block X Y Z smem BYTES
//   strided_inputs 0|1 alignment_bytes N half_precision 0|1
// Compiled with -DATTN_HALF_PRECISION for a version of the half-precision track, whose
// launcher takes HalfArgs (bfloat16 inputs here).
#include "attention_launch.h"

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr,
                 "usage: %s B H T smem_per_block smem_per_block_optin sm_count\n", argv[0]);
    return 2;
  }
#ifdef ATTN_HALF_PRECISION
  causal_attention::HalfArgs args{};
  args.dtype = causal_attention::HalfType::kBFloat16;
#else
  causal_attention::Args args{};
#endif
  args.batch = std::atoll(argv[1]);
  args.num_heads = std::atoll(argv[2]);
  args.seq_len = std::atoll(argv[3]);
  const long long C = args.num_heads * causal_attention::kHeadDim;
  args.q_batch_stride = args.k_batch_stride = args.v_batch_stride = args.seq_len * C;
  args.q_row_stride = args.k_row_stride = args.v_row_stride = C;
  args.device = 0;

  causal_attention::DeviceLimits limits{};
  limits.smem_per_block = std::atoi(argv[4]);
  limits.smem_per_block_optin = std::atoi(argv[5]);
  limits.sm_count = std::atoi(argv[6]);

  const causal_attention::LaunchConfig config = causal_attention::launch_config(args, limits);
  std::printf("grid %u %u %u block %u %u %u smem %zu\n", config.grid.x, config.grid.y, config.grid.z,
              config.block.x, config.block.y, config.block.z, config.smem_bytes);
  const causal_attention::Requirements req = causal_attention::requirements();
  std::printf("strided_inputs %d alignment_bytes %d half_precision %d\n", req.strided_inputs ? 1 : 0,
              req.alignment_bytes, req.half_precision ? 1 : 0);
  return 0;
}
