"""The correctness gate: every backend against the float64 reference before timing, in each
of its dtypes.

Inputs are drawn in float32 and cast to the dtype; the reference is float64 computed from the
cast inputs. Bounds per dtype are harness/reference.py's: fixed in float32; in half
precision 1.25x the better vendor kernel's error on the same inputs (the vendors run first).
A study version that fails any shape in a dtype is reported and left out of that dtype's
benchmarks. A baseline is PyTorch's own kernel: it is timed whatever its error, and the gate's
rows record how it fared. (The full proof is the GPU test suite; the gate re-checks on fresh
inputs in the run that times.)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import torch
from tqdm import tqdm

from backends import precision, registry
from backends.environment import Provenance, collect
from backends.registry import Backend, Target
from harness.reference import Bounds, VendorFn, bounds_for, compare, random_qkv, reference_attention
from harness.results import CORRECTNESS, CorrectnessRow, done
from harness.study import GATE_SHAPES, Shape

FAILED = "failed the correctness gate (results/<gpu>/correctness.csv says where)"
Key = tuple[str, str]  # (backend, dtype)


@dataclass(frozen=True)
class GateResult:
    passed: dict[str, list[Backend]]  # dtype -> the backends to time in it
    left_out: dict[Key, str] = field(default_factory=dict)  # (backend, dtype) -> why not timed


def vendor_functions(device: torch.device, dtype: str) -> list[VendorFn]:
    """The half-precision vendor kernels (registry.HALF_PRECISION_VENDORS) that run here."""
    runnable, _ = registry.partition([registry.get(n) for n in registry.HALF_PRECISION_VENDORS], Target.of(device),
                                     dtype)
    return [b.attention(device, dtype) for b in runnable]


@dataclass(frozen=True)
class Case:
    shape: Shape
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    reference: torch.Tensor  # float64
    bounds: Bounds


def gate_inputs(device: torch.device, dtype: str, seed: int = 0) -> Iterator[tuple[Shape, torch.Tensor, torch.Tensor,
                                                                                  torch.Tensor]]:
    """The gate's shapes with their q, k, v in `dtype`, one at a time."""
    for i, shape in enumerate(GATE_SHAPES):
        yield shape, *random_qkv(shape, seed=seed + i, device=device, dtype=precision.torch_dtype(dtype))


def gate_cases(device: torch.device, dtype: str, seed: int = 0) -> list[Case]:
    """The gate's shapes in `dtype`, with their float64 references and bounds."""
    vendors = vendor_functions(device, dtype)  # none in float32: the vendor kernels refuse it
    cases = []
    for shape, q, k, v in gate_inputs(device, dtype, seed):
        ref = reference_attention(q, k, v, shape.H)
        cases.append(Case(shape, q, k, v, ref, bounds_for(dtype, ref, vendors, q, k, v, shape.H)))
    return cases


def _check(backends: Sequence[Backend], dtype: str, device: torch.device, path: Path,
           provenance: Provenance) -> dict[Key, str]:
    """Run the gate for `backends` in `dtype`; write their rows; return the left out and why."""
    left_out: dict[Key, str] = {}
    cases = gate_cases(device, dtype)
    for backend in tqdm(backends, desc=f"correctness gate, {dtype}", unit="backend"):
        try:
            fn = backend.attention(device, dtype)
        except (registry.BackendUnavailableError, RuntimeError) as err:  # e.g. its build failed
            left_out[backend.name, dtype] = f"cannot run: {(str(err).strip().splitlines() or [''])[0]}"
            tqdm.write(f"{backend.name} ({dtype}): {left_out[backend.name, dtype]}; left out")
            continue
        for case in cases:
            result = compare(fn(case.q, case.k, case.v, case.shape.H), case.reference, case.bounds)
            CORRECTNESS.append(path, CorrectnessRow(
                backend=backend.name, dtype=dtype, B=case.shape.B, H=case.shape.H, T=case.shape.T,
                rel_err=result.rel_err, max_abs_err=result.max_abs_err, rel_tol=result.bounds.rel,
                abs_tol=result.bounds.abs, passed=result.ok, provenance=provenance))
            if not result.ok:
                if backend.is_version:
                    left_out[backend.name, dtype] = FAILED
                tqdm.write(f"{backend.name} ({dtype}) {'FAILED' if backend.is_version else 'misses the bound'} at "
                           f"{case.shape.describe()}: {result.describe()}")
    torch.cuda.synchronize(device)
    return left_out


def run_gate(backends: Sequence[Backend], dtypes: Sequence[str], *, results_dir: Path, resume: bool = True,
             device: torch.device) -> GateResult:
    """The backends to time in each dtype. Stored rows of this setup are reused (resume);
    backends without them are checked now. Backends that cannot run here, or not in a dtype,
    are left out of it with their reason. Only the rows that provide a prefill op take part
    (the decode gate is harness/decode_gate.py)."""
    backends = registry.providing(backends, registry.PREFILL)
    provenance = collect(device)
    path = CORRECTNESS.path(results_dir, provenance.slug)
    stored = done(CORRECTNESS, path, provenance) if resume else {}
    passed: dict[str, list[Backend]] = {}
    left_out: dict[Key, str] = {}
    for dtype in dtypes:
        runnable, reasons = registry.partition(backends, Target.of(device), dtype)
        left_out.update({(name, dtype): reason for name, reason in reasons.items()})
        unchecked = []
        for backend in runnable:
            rows = [stored.get((backend.name, dtype, s.B, s.H, s.T)) for s in GATE_SHAPES]
            if any(row is None for row in rows):
                unchecked.append(backend)
            elif backend.is_version and not all(row.passed for row in rows):  # type: ignore[union-attr]
                left_out[backend.name, dtype] = FAILED
        if unchecked:
            left_out.update(_check(unchecked, dtype, device, path, provenance))
        passed[dtype] = [b for b in runnable if (b.name, dtype) not in left_out]
        failed = sorted(b.name for b in runnable if (b.name, dtype) in left_out)
        print(f"correctness gate, {dtype}: {len(passed[dtype])} to time"
              + (f"; left out: {', '.join(failed)}" if failed else ""))
    return GateResult(passed, left_out)
