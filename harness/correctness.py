"""The correctness gate: every backend against the float64 reference before timing.

A backend that fails any shape is reported and left out of the benchmarks. (The full
proof is the GPU test suite; the gate re-checks on fresh inputs in the run that times.)
"""
from __future__ import annotations

import torch
from tqdm import tqdm

from harness import environment
from harness.attention import BackendUnavailableError, attention_fn
from harness.reference import HEAD_DIM, compare, random_qkv, reference_attention
from harness.registry import Backend
from harness.results import correctness_file

# (B, T, C): T = 1, partial tiles of every tile size, B > 1, both GPT-2 widths.
GATE_SHAPES = [(1, 1, 768), (3, 33, 768), (2, 49, 1024), (1, 65, 768), (3, 129, 1024), (2, 513, 768),
               (1, 1024, 768)]


def run_gate(backends: list[Backend], seed: int = 0, provenance: dict | None = None) -> list[Backend]:
    """Check each backend; write results/<gpu>/correctness.csv; return those that pass."""
    provenance = provenance or environment.collect()
    results = correctness_file(environment.gpu_slug(provenance["gpu"]))
    passed = []
    cases = [(B, T, C, *random_qkv(B, T, C, seed=seed + i, device="cuda"))
             for i, (B, T, C) in enumerate(GATE_SHAPES)]
    refs = [reference_attention(q, k, v, C // HEAD_DIM) for (_, _, C, q, k, v) in cases]
    for backend in tqdm(backends, desc="correctness gate", unit="backend"):
        if backend.unavailable:
            continue
        try:
            fn = attention_fn(backend)
        except (BackendUnavailableError, RuntimeError) as err:
            tqdm.write(f"{backend.name}: cannot run ({err}); left out")
            continue
        ok = True
        for (B, T, C, q, k, v), ref in zip(cases, refs):
            cmp = compare(fn(q, k, v, C // HEAD_DIM), ref)
            ok &= cmp.ok
            results.append({"backend": backend.name, "B": B, "T": T, "C": C, "rel_err": cmp.rel_err,
                            "max_abs_err": cmp.max_abs_err, "passed": cmp.ok, **provenance})
            if not cmp.ok:
                tqdm.write(f"{backend.name} FAILED at B={B} T={T} C={C}: {cmp.describe()}")
        if ok:
            passed.append(backend)
    torch.cuda.synchronize()
    left_out = [b.name for b in backends if b not in passed and not b.unavailable]
    print(f"correctness gate: {len(passed)} passed" + (f", left out: {', '.join(left_out)}" if left_out else ""))
    return passed


def passing(backends: list[Backend]) -> list[Backend]:
    """The backends that pass the gate on this setup, reusing this setup's stored gate
    rows (results/<gpu>/correctness.csv) and checking only the backends without them."""
    provenance = environment.collect()
    done = correctness_file(environment.gpu_slug(provenance["gpu"])).done(provenance)
    known, unknown = [], []
    for backend in backends:
        if backend.unavailable:
            continue
        keys = [(backend.name, str(B), str(T), str(C)) for B, T, C in GATE_SHAPES]
        if all(key in done for key in keys):
            if all(done[key]["passed"] == "True" for key in keys):
                known.append(backend)
            else:
                print(f"{backend.name} failed the correctness gate on this setup; left out")
        else:
            unknown.append(backend)
    return known + (run_gate(unknown, provenance=provenance) if unknown else [])
