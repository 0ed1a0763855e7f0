"""A small workload for compute-sanitizer: every selected version at awkward shapes.

tools/sanitize.sh runs it under memcheck and racecheck; the versions must already be
built (building under the sanitizer would take very long).
"""
from __future__ import annotations

from typing import Sequence

import torch

from backends.registry import CudaVersion
from harness.reference import compare, random_qkv, reference_attention
from harness.study import Shape

# Partial tiles for every tile size used (32, 48, 64), T = 1, and B > 1; at B=1, T=513 version
# 17 splits each row block into several multi-tile splits and merges them.
SHAPES = (Shape(1, 12, 1), Shape(2, 12, 33), Shape(2, 16, 49), Shape(1, 12, 65), Shape(2, 12, 130),
          Shape(1, 12, 513))


def run_workload(versions: Sequence[CudaVersion], device: torch.device) -> int:
    failures = 0
    for version in versions:
        op = version.attention(device)
        for shape in SHAPES:
            q, k, v = random_qkv(shape, seed=shape.T, device=device)
            out = op(q, k, v, shape.H)
            torch.cuda.synchronize(device)
            result = compare(out, reference_attention(q, k, v, shape.H))
            failures += not result.ok
            print(f"{version.name} {shape.describe()}: {'ok' if result.ok else 'WRONG: ' + result.describe()}",
                  flush=True)
    return 1 if failures else 0
