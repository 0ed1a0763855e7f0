"""The decode gate: every backend's decode op against the float64 reference before timing, in
each of its dtypes.

The cases exercise what the decode contract promises (versions/common/decode_launch.h): lengths
that differ per sequence, lengths 1 and S, S off every tile size, caches that are strided
views of a larger buffer with NaN in every row past each sequence's length (a kernel that
reads one shows it), q a view of a packed projection. Bounds as the prefill gate's
(harness/reference.py): fixed in float32; in half precision 1.25x the better of sdpa-flash's
and sdpa-cudnn's decode errors on the same inputs. Baselines take ragged batches one sequence
per call (harness/decode_calls.py). A decode version that fails a case is reported and left
out of that dtype's decode benchmark; a baseline is timed whatever its error, and its rows
record how it fared. The GPU tests (tests/test_decode_gpu.py) go further: B = 256, two
streams, graph replays with changed lengths, out-of-range lengths.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from tqdm import tqdm

from backends import precision, registry
from backends.environment import Provenance, collect
from backends.registry import DECODE, Backend, Target
from harness.decode_calls import call_decode
from harness.decode_inputs import CONTIGUOUS, PACKED, DecodeInputs, random_decode_inputs
from harness.reference import Bounds, FLOAT32_BOUNDS, compare, half_precision_bounds, reference_decode
from harness.results import DECODE_CORRECTNESS, DecodeCorrectnessRow, done

FAILED = "failed the decode gate (results/<gpu>/decode_correctness.csv says where)"
Key = tuple[str, str]  # (backend, dtype)


@dataclass(frozen=True)
class GateCase:
    name: str
    B: int
    H: int
    S: int
    lengths: tuple[int, ...]
    layout: str


def _random_lengths(B: int, S: int, seed: int) -> tuple[int, ...]:
    rng = random.Random(seed)
    return tuple(rng.randint(1, S) for _ in range(B))


GATE_CASES = (
    GateCase("one cached row", 1, 12, 1, (1,), CONTIGUOUS),
    GateCase("ragged, lengths 1 and S, packed views", 5, 12, 77, (1, 77, 33, 64, 65), PACKED),
    GateCase("full, S off every tile, 16 heads", 3, 16, 1025, (1025, 1025, 1025), CONTIGUOUS),
    GateCase("long, ragged, packed views", 2, 12, 4099, (4099, 2050), PACKED),
    GateCase("33 sequences, random lengths", 33, 12, 300, _random_lengths(33, 300, seed=33), PACKED),
)


@dataclass(frozen=True)
class Case:
    spec: GateCase
    inputs: DecodeInputs
    reference: torch.Tensor  # (B, C) float64
    bounds: Bounds


def vendor_decodes(device: torch.device, dtype: str) -> list[tuple[Backend, object]]:
    """The half-precision vendor kernels' decode ops (registry.HALF_PRECISION_VENDORS) that
    run here, with their rows."""
    vendors = [registry.get(name) for name in registry.HALF_PRECISION_VENDORS]
    runnable, _ = registry.partition(vendors, Target.of(device), dtype, DECODE)
    return [(b, b.decode_attention(device, dtype)) for b in runnable]


def bounds_for_decode(dtype: str, reference: torch.Tensor, inputs: DecodeInputs, num_heads: int,
                      vendors: Sequence[tuple[Backend, object]]) -> Bounds:
    """Float32's fixed bounds, or in half precision VENDOR_FACTOR x the better vendor's errors
    on these inputs (a vendor that refuses them is left out)."""
    if not precision.is_half(dtype):
        return FLOAT32_BOUNDS
    outputs = []
    for backend, fn in vendors:
        try:
            outputs.append(call_decode(backend, fn, inputs.q, inputs.k_cache, inputs.v_cache, inputs.lengths,  # type: ignore[arg-type]
                                       inputs.host_lengths, num_heads))
        except (RuntimeError, ValueError):  # a kernel that refuses them; lengths out of 1..S
            continue
    return half_precision_bounds(dtype, reference, outputs)


def gate_cases(device: torch.device, dtype: str, seed: int = 0) -> list[Case]:
    """The gate's cases in `dtype`, with their float64 references and bounds."""
    vendors = vendor_decodes(device, dtype)
    cases = []
    for i, spec in enumerate(GATE_CASES):
        inputs = random_decode_inputs(spec.B, spec.H, spec.S, spec.lengths, seed=seed + i, device=device,
                                      dtype=precision.torch_dtype(dtype), layout=spec.layout,
                                      poison_past_length=True)
        ref = reference_decode(inputs.q, inputs.k_cache, inputs.v_cache, inputs.host_lengths, spec.H)
        cases.append(Case(spec, inputs, ref, bounds_for_decode(dtype, ref, inputs, spec.H, vendors)))
    return cases


def _check(backends: Sequence[Backend], dtype: str, device: torch.device, path: Path,
           provenance: Provenance) -> dict[Key, str]:
    left_out: dict[Key, str] = {}
    cases = gate_cases(device, dtype)
    for backend in tqdm(backends, desc=f"decode gate, {dtype}", unit="backend"):
        try:
            fn = backend.decode_attention(device, dtype)
        except (registry.BackendUnavailableError, RuntimeError) as err:  # e.g. its build failed
            left_out[backend.name, dtype] = f"cannot run: {(str(err).strip().splitlines() or [''])[0]}"
            tqdm.write(f"{backend.name} ({dtype}): {left_out[backend.name, dtype]}; left out")
            continue
        for case in cases:
            x = case.inputs
            try:
                out = call_decode(backend, fn, x.q, x.k_cache, x.v_cache, x.lengths, x.host_lengths, case.spec.H)
            except RuntimeError as err:  # a kernel that refuses these inputs (cuDNN: a cache of one row)
                reason = (str(err).strip().splitlines() or [""])[0]
                if backend.is_version:
                    left_out[backend.name, dtype] = f"{FAILED}: raised on '{case.spec.name}' ({reason})"
                tqdm.write(f"{backend.name} ({dtype}) refuses '{case.spec.name}': {reason}")
                continue
            result = compare(out, case.reference, case.bounds)
            DECODE_CORRECTNESS.append(path, DecodeCorrectnessRow(
                backend=backend.name, dtype=dtype, case=case.spec.name, B=case.spec.B, H=case.spec.H, S=case.spec.S,
                rel_err=result.rel_err, max_abs_err=result.max_abs_err, rel_tol=result.bounds.rel,
                abs_tol=result.bounds.abs, passed=result.ok, provenance=provenance))
            if not result.ok:
                if backend.is_version:
                    left_out[backend.name, dtype] = FAILED
                tqdm.write(f"{backend.name} ({dtype}) {'FAILED' if backend.is_version else 'misses the bound'} on "
                           f"'{case.spec.name}': {result.describe()}")
    torch.cuda.synchronize(device)
    return left_out


def run_decode_gate(backends: Sequence[Backend], dtypes: Sequence[str], *, results_dir: Path, resume: bool = True,
                    device: torch.device) -> dict[Key, str]:
    """The (backend, dtype) pairs to leave out of the decode benchmark and why: cannot run
    here, or a decode version that failed a case. Only the rows that provide a decode op and
    are not composites take part. Stored rows of this setup are reused (resume)."""
    backends = registry.providing(backends, DECODE)
    provenance = collect(device)
    path = DECODE_CORRECTNESS.path(results_dir, provenance.slug)
    stored = done(DECODE_CORRECTNESS, path, provenance) if resume else {}
    left_out: dict[Key, str] = {}
    for dtype in dtypes:
        runnable, reasons = registry.partition(backends, Target.of(device), dtype, DECODE)
        left_out.update({(name, dtype): reason for name, reason in reasons.items()})
        unchecked = []
        for backend in runnable:
            rows = [stored.get((backend.name, dtype, case.name)) for case in GATE_CASES]
            if backend.is_version and any(row is None for row in rows):
                unchecked.append(backend)
            elif not backend.is_version and all(row is None for row in rows):  # a baseline may refuse some
                unchecked.append(backend)
            elif backend.is_version and not all(row.passed for row in rows):  # type: ignore[union-attr]
                left_out[backend.name, dtype] = FAILED
        if unchecked:
            left_out.update(_check(unchecked, dtype, device, path, provenance))
        failed = sorted(b.name for b in runnable if (b.name, dtype) in left_out)
        print(f"decode gate, {dtype}: {len(runnable) - len(failed)} to time" +
              (f"; left out: {', '.join(failed)}" if failed else ""))
    return left_out
