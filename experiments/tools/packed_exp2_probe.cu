// Does Hopper have a packed half-precision exponential? ex2.approx.f16x2 and
// ex2.approx.ftz.bf16x2 take two 16-bit values in one register; if the multi-function unit
// (MUFU) computed both in one instruction, a half-precision kernel would halve its MUFU work
// at d = 64, where the exponentials cost as much as both matrix products (issue 18).
//
// Compile only (no GPU needed) and read the machine code:
//   nvcc -O3 -cubin -gencode=arch=compute_90a,code=sm_90a -o /tmp/packed_exp2.cubin \
//        experiments/tools/packed_exp2_probe.cu
//   cuobjdump -sass /tmp/packed_exp2.cubin | grep -E "MUFU|PRMT|HADD2|F2FP"
// (cuobjdump ships with the CUDA toolkit; pip's nvidia-cuda-cuobjdump carries it too.)
//
// Seen with nvcc 13.0 on 2026-11-25: each packed instruction compiles to two MUFU
// instructions, one per half (MUFU.EX2.F16 R6, R0 and MUFU.EX2.F16 R9, R0.H1; .BF16 for
// bf16x2), and a PRMT that puts the halves back together. One MUFU instruction per
// exponential, as in float32: no packed exponential to be had on sm_90a.
#include <cstdint>

__global__ void packed_exp2(const uint32_t* __restrict__ in, uint32_t* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t h = 0, b = 0;
  asm("ex2.approx.f16x2 %0, %1;\n" : "=r"(h) : "r"(in[2 * i]));
  asm("ex2.approx.ftz.bf16x2 %0, %1;\n" : "=r"(b) : "r"(in[2 * i + 1]));
  out[2 * i] = h;
  out[2 * i + 1] = b;
}
