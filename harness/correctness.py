"""The correctness gate: every backend against the float64 reference before timing.

A backend that fails any shape is reported and left out of the benchmarks. (The full
proof is the GPU test suite; the gate re-checks on fresh inputs in the run that times.)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from tqdm import tqdm

from backends import registry
from backends.environment import Provenance, collect
from backends.registry import Backend, Target
from backends.precision import FLOAT32
from harness.reference import ABS_TOL, REL_TOL, compare, random_qkv, reference_attention
from harness.results import CORRECTNESS, CorrectnessRow, done
from harness.study import GATE_SHAPES

FAILED = "failed the correctness gate (results/<gpu>/correctness.csv says where)"


@dataclass(frozen=True)
class GateResult:
    passed: list[Backend]
    left_out: dict[str, str]  # backend -> why it is not timed (failed, cannot run here)


def _check(backends: Sequence[Backend], device: torch.device, path: Path, provenance: Provenance,
           seed: int = 0) -> dict[str, str]:
    """Run the gate for `backends`; write their rows; return the failures and why."""
    failures: dict[str, str] = {}
    cases = [(shape, *random_qkv(shape, seed=seed + i, device=device)) for i, shape in enumerate(GATE_SHAPES)]
    refs = [reference_attention(q, k, v, shape.H) for shape, q, k, v in cases]
    for backend in tqdm(backends, desc="correctness gate", unit="backend"):
        try:
            fn = backend.attention(device, FLOAT32)
        except (registry.BackendUnavailableError, RuntimeError) as err:  # e.g. its build failed
            failures[backend.name] = f"cannot run: {(str(err).strip().splitlines() or [''])[0]}"
            tqdm.write(f"{backend.name}: {failures[backend.name]}; left out")
            continue
        for (shape, q, k, v), ref in zip(cases, refs):
            result = compare(fn(q, k, v, shape.H), ref)
            CORRECTNESS.append(path, CorrectnessRow(backend=backend.name, dtype=FLOAT32, B=shape.B, H=shape.H,
                                                    T=shape.T, rel_err=result.rel_err,
                                                    max_abs_err=result.max_abs_err, rel_tol=REL_TOL,
                                                    abs_tol=ABS_TOL, passed=result.ok, provenance=provenance))
            if not result.ok:
                failures[backend.name] = FAILED
                tqdm.write(f"{backend.name} FAILED at {shape.describe()}: {result.describe()}")
    torch.cuda.synchronize(device)
    return failures


def run_gate(backends: Sequence[Backend], *, results_dir: Path, resume: bool = True,
             device: torch.device) -> GateResult:
    """The backends that pass the gate on this setup. Stored rows of this setup are
    reused (resume); backends without them are checked now. Backends that cannot run
    here are left out with their reason."""
    provenance = collect(device)
    path = CORRECTNESS.path(results_dir, provenance.slug)
    stored = done(CORRECTNESS, path, provenance) if resume else {}
    runnable, left_out = registry.partition(backends, Target.of(device), FLOAT32)
    unchecked = []
    for backend in runnable:
        rows = [stored.get((backend.name, FLOAT32, s.B, s.H, s.T)) for s in GATE_SHAPES]
        if any(row is None for row in rows):
            unchecked.append(backend)
        elif not all(row.passed for row in rows):  # type: ignore[union-attr]
            left_out[backend.name] = FAILED
    left_out.update(_check(unchecked, device, path, provenance) if unchecked else {})
    passed = [b for b in runnable if b.name not in left_out]
    failed = sorted(name for name in left_out if name in {b.name for b in runnable})
    print(f"correctness gate: {len(passed)} passed" + (f"; left out: {', '.join(failed)}" if failed else ""))
    return GateResult(passed, left_out)
