"""A small workload for compute-sanitizer: every selected version at awkward shapes, in each
of its dtypes; a decode version on the decode gate's cases (ragged lengths with NaN past each,
packed strided views, S = 1 to 4099).

tools/sanitize.sh runs it under memcheck and racecheck; the versions must already be
built (building under the sanitizer would take very long). Half-precision outputs are held
to the fixed bound from the rounding (harness/reference.py), not to the vendor kernels'
errors: running those under the sanitizer too would only slow it down.
"""
from __future__ import annotations

from typing import Sequence

import torch

from backends import precision
from backends.registry import CudaVersion, DecodeVersion
from harness.decode_gate import GATE_CASES
from harness.decode_inputs import random_decode_inputs
from harness.reference import (FLOAT32_BOUNDS, LARGE_SCORE_STD, compare, fallback_bounds, random_qkv,
                               reference_attention, reference_decode)
from harness.study import Shape

# Partial tiles for every tile size used (32, 48, 64, 128, 192), T = 1, and B > 1; at B=1,
# T=513 versions 17, h01-h06 split row blocks into several multi-tile splits and merge them;
# B=4, H=16, T=641 has 256 row blocks of 192 rows, more than an H100's 132 SMs, so that h06's
# persistent grid runs several work items per block; B=4, H=16, T=1025, 384, more than twice
# 132, so that h10's does; at B=1, H=12, T=449 versions 24-28 cut their narrow row blocks into
# two pieces and merge them in the kernel (26-28 through a cluster of two blocks).
SHAPES = (Shape(1, 12, 1), Shape(2, 12, 33), Shape(2, 16, 49), Shape(1, 12, 65), Shape(2, 12, 130),
          Shape(2, 12, 193), Shape(1, 12, 449), Shape(1, 12, 513), Shape(4, 16, 641),
          Shape(4, 16, 1025))
# Scores of standard deviation LARGE_SCORE_STD, where rows' maxima grow past the lazy
# rescale's bound after their first tile: h22's path that computes S again by mma.sync from
# shared memory runs here (B=4, H=16, T=1025: the 192-row-block kernel).
LARGE_SCORE_SHAPES = (Shape(4, 16, 1025),)


def workload_batches() -> list[int]:
    """The batch sizes the workload's shapes have, in order."""
    return sorted({shape.B for shape in SHAPES + LARGE_SCORE_SHAPES})


def run_workload(versions: Sequence[CudaVersion], device: torch.device, dtypes: Sequence[str],
                 batch: int | None = None) -> int:
    """Each version at SHAPES and LARGE_SCORE_SHAPES (those of batch size `batch` alone, if
    given) in each of its dtypes that `dtypes` names; 1 if an output misses its bound."""
    cases = [(shape, 1.0) for shape in SHAPES] + [(shape, LARGE_SCORE_STD) for shape in LARGE_SCORE_SHAPES]
    cases = [(shape, std) for shape, std in cases if batch is None or shape.B == batch]
    failures = 0
    for version in versions:
        for dtype in (d for d in version.dtypes if d in dtypes):
            op = version.attention(device, dtype)
            for shape, score_std in cases:
                q, k, v = random_qkv(shape, seed=shape.T, device=device, score_scale=score_std,
                                     dtype=precision.torch_dtype(dtype))
                out = op(q, k, v, shape.H)
                torch.cuda.synchronize(device)
                ref = reference_attention(q, k, v, shape.H)
                result = compare(out, ref, fallback_bounds(dtype, ref) if precision.is_half(dtype) else FLOAT32_BOUNDS)
                failures += not result.ok
                print(f"{version.name} {dtype} {shape.describe()}, score std {score_std:g}: "
                      f"{'ok' if result.ok else 'WRONG: ' + result.describe()}", flush=True)
    return 1 if failures else 0


def run_decode_workload(versions: Sequence[DecodeVersion], device: torch.device, dtypes: Sequence[str]) -> int:
    """Each decode version on each of the decode gate's cases in each of its dtypes that
    `dtypes` names, against float64 (half precision: the fixed bound from the rounding); 1 if
    an output misses its bound."""
    failures = 0
    for version in versions:
        for dtype in (d for d in version.dtypes if d in dtypes):
            op = version.decode_attention(device, dtype)
            for i, spec in enumerate(GATE_CASES):
                inputs = random_decode_inputs(spec.B, spec.H, spec.S, spec.lengths, seed=i, device=device,
                                              dtype=precision.torch_dtype(dtype), layout=spec.layout,
                                              poison_past_length=True)
                out = op(*inputs.args(spec.H))  # (B, C)
                torch.cuda.synchronize(device)
                ref = reference_decode(inputs.q, inputs.k_cache, inputs.v_cache, inputs.host_lengths, spec.H)
                result = compare(out, ref, fallback_bounds(dtype, ref) if precision.is_half(dtype) else FLOAT32_BOUNDS)
                failures += not result.ok
                print(f"{version.name} {dtype} {spec.name}: {'ok' if result.ok else 'WRONG: ' + result.describe()}",
                      flush=True)
    return 1 if failures else 0
