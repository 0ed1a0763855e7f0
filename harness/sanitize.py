"""A small workload for compute-sanitizer: every selected version at awkward shapes.

tools/sanitize.sh runs it under memcheck and racecheck; the versions must already be
built (building under the sanitizer would take very long).
"""
from __future__ import annotations

import torch

from harness.extension import load_op
from harness.reference import compare, random_qkv, reference_attention
from harness.registry import Backend

# Partial tiles for every tile size used (32, 48, 64), T = 1, and B > 1.
SHAPES = [(1, 1, 768, 12), (2, 33, 768, 12), (2, 49, 1024, 16), (1, 65, 768, 12), (2, 130, 768, 12)]


def run_workload(backends: list[Backend]) -> int:
    failures = 0
    for backend in backends:
        op = load_op(backend)
        for B, T, C, H in SHAPES:
            q, k, v = random_qkv(B, T, C, seed=T, device="cuda")
            out = op(q, k, v, H)
            torch.cuda.synchronize()
            result = compare(out, reference_attention(q, k, v, H))
            status = "ok" if result.ok else "WRONG: " + result.describe()
            failures += not result.ok
            print(f"{backend.name} B={B} T={T} C={C}: {status}", flush=True)
    return 1 if failures else 0
