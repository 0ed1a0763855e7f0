"""What a causal prefill call cannot go below: the bytes it must move and the products it must
compute, over the rates measured on the GPU.

A call reads Q, K and V and writes O once each, (B, T, H d) apiece:

    bytes = 4 B T H d e                     (e: 4 bytes in float32, 2 in bfloat16 and float16)

and computes S = Q K^T and P V over the pairs (i, j) with j <= i, T (T + 1) / 2 per head, each
pair 2 d FLOPs in each product:

    FLOPs = 2 B H d T (T + 1)

So FLOPs per byte is about T / (2 e): at T = 64 in bfloat16, 16 FLOPs per byte, far under the
ridge of an H100 (about 800 TFLOP/s over 3 TB/s, some 270 FLOPs per byte). Below T of about
1,000 (bfloat16) a prefill is bound by memory, not by the tensor cores, and a plan that is fast
at T = 4096 (few bytes in flight per SM, tiles that keep the tensor cores fed) is not the plan
there.

    memory floor  = bytes / the rate of a large device-to-device copy measured in the same run
    compute floor = FLOPs / the dense matmul rate of the dtype measured in the same run

The memory floor holds for any kernel: an L2-flushed call must bring the bytes from HBM at
least once. The compute floor holds for a kernel at the dtype's matmul precision; a float32
kernel that multiplies on the tensor cores in TF32 (v18 on) is not bound by the FMA rate, so
for float32 only the memory floor is drawn.
"""
from __future__ import annotations

from backends import precision
from harness.study import Shape


def io_bytes(shape: Shape, dtype: str) -> int:
    """Bytes one call must move at least: Q, K and V read, O written, (B, T, C) each."""
    return 4 * shape.B * shape.T * shape.C * precision.torch_dtype(dtype).itemsize


def causal_flops(shape: Shape) -> int:
    """FLOPs of S = Q K^T and P V over the causal pairs j <= i: 2 d each per pair and product.
    (Shape.flops, the study's TFLOP/s convention, has T^2 where this has T (T + 1).)"""
    return 2 * shape.B * shape.H * shape.d * shape.T * (shape.T + 1)


def memory_floor_us(shape: Shape, dtype: str, copy_gbps: float) -> float:
    """The bytes over the copy's rate (GB/s, read and written bytes over its time), in µs."""
    if copy_gbps <= 0:
        raise ValueError(f"copy_gbps must be positive, got {copy_gbps}")
    return io_bytes(shape, dtype) / (copy_gbps * 1e3)


def compute_floor_us(shape: Shape, peak_tflops: float) -> float:
    """The causal FLOPs over the dtype's measured matmul rate (TFLOP/s), in µs."""
    if peak_tflops <= 0:
        raise ValueError(f"peak_tflops must be positive, got {peak_tflops}")
    return causal_flops(shape) / (peak_tflops * 1e6)


def floor_us(shape: Shape, dtype: str, copy_gbps: float, peak_tflops: float | None) -> float:
    """The larger floor: memory, and compute where peak_tflops is given (None for float32,
    whose measured peak is the FMA rate that TF32 kernels exceed)."""
    memory = memory_floor_us(shape, dtype, copy_gbps)
    return memory if peak_tflops is None else max(memory, compute_floor_us(shape, peak_tflops))
