// Prints the launch configuration a decode version's launcher chooses, without a GPU.
//
// Linked with one decode version's attention.cu by `python -m harness compile-check`; it
// calls decode_attention::launch_config (pure host arithmetic) for contiguous bfloat16
// caches of S rows and the device limits given on the command line, and
// decode_attention::requirements, and prints the two lines launch_config_probe.cpp prints:
//   grid X Y Z block X Y Z smem BYTES
//   strided_inputs 1 alignment_bytes N half_precision 0
// (every decode version takes strided caches and every dtype).
#include "decode_launch.h"

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s B H S smem_per_block smem_per_block_optin sm_count\n", argv[0]);
    return 2;
  }
  decode_attention::Args args{};
  args.dtype = decode_attention::ElementType::kBFloat16;
  args.batch = std::atoll(argv[1]);
  args.num_heads = std::atoll(argv[2]);
  args.cache_len = std::atoll(argv[3]);
  const long long C = args.num_heads * decode_attention::kHeadDim;
  args.q_batch_stride = C;
  args.k_batch_stride = args.v_batch_stride = args.cache_len * C;
  args.k_row_stride = args.v_row_stride = C;
  args.device = 0;

  decode_attention::DeviceLimits limits{};
  limits.smem_per_block = std::atoi(argv[4]);
  limits.smem_per_block_optin = std::atoi(argv[5]);
  limits.sm_count = std::atoi(argv[6]);

  const decode_attention::LaunchConfig config = decode_attention::launch_config(args, limits);
  std::printf("grid %u %u %u block %u %u %u smem %zu\n", config.grid.x, config.grid.y, config.grid.z,
              config.block.x, config.block.y, config.block.z, config.smem_bytes);
  const decode_attention::Requirements req = decode_attention::requirements();
  std::printf("strided_inputs 1 alignment_bytes %d half_precision 0\n", req.alignment_bytes);
  return 0;
}
