"""`python -m harness try`: kernel variants checked and timed beside registry backends.

Development, not the study: nothing goes to results/. One process does, for the variants
(harness/variants.py) and the backends they are compared against:
  1. nvcc's resources for the GPU's architecture (registers, shared memory, spills);
  2. a float64 check of each at awkward shapes, scores up to about +-50, packed qkv views,
     T = 4097 and 16385, and bitwise determinism, in one dtype (float32 by default; in
     bfloat16 or float16 against float64 of the same half inputs, within the study's bound:
     1.25x the better vendor kernel's error on those inputs); one that fails is not timed;
  3. device time at the benchmark shapes (harness/device_timing.py), in `rounds` rounds
     of alternating order, with the dtype's kernel reference (sdpa-efficient in float32,
     sdpa-cudnn in half precision) timed in the same rounds: median over the rounds and the
     ratio to the reference.
Everything printed also goes to the log file when one is given (for
results/<gpu>/experiments/).
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, TextIO

import torch

from backends import precision, registry
from backends.environment import Provenance, collect, stale_commit_warning
from backends.extension import ARCH_LIST_VARIABLE, Arch, find_nvcc, parse_arch_list
from backends.registry import Backend, CudaVersion
from gpt2.model import AttentionFn
from harness.compile_check import RESOURCES_HEADER, check_versions, compile_failed, format_resources
from harness.build import build_all
from harness.correctness import vendor_functions
from harness.device_timing import DeviceTimer, alternating, measure_peak
from harness.reference import (FLOAT32_BOUNDS, LARGE_SCORE_STD, Bounds, bounds_for, call_quietly, compare,
                               random_qkv, reference_attention, reference_attention_by_head)
from harness.study import Shape

# Partial tiles of every tile size in use (32, 48, 64), T = 1 and 2, B > 1, GPT-2 medium's width.
CHECK_SHAPES = (Shape(1, 12, 1), Shape(1, 12, 2), Shape(3, 12, 33), Shape(2, 16, 63), Shape(2, 12, 64),
                Shape(2, 12, 65), Shape(1, 12, 127), Shape(3, 16, 129), Shape(2, 12, 191), Shape(1, 12, 513),
                Shape(2, 12, 1000), Shape(1, 12, 2048))
SCORE_SCALES = (1.0, LARGE_SCORE_STD)  # standard deviation of the scores
PACKED_SHAPE = Shape(2, 12, 300)  # q, k, v as views of one (B, T, 3C) projection
LONG_SHAPES = (Shape(2, 12, 4097), Shape(1, 12, 16385))  # long rows, the contract's T >= 16384


class Log:
    """Prints, and appends to a file when one is given."""

    def __init__(self, path: Path | None) -> None:
        self._file: TextIO | None = path.open("a") if path else None

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        if self._file:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file:
            self._file.close()


@dataclass(frozen=True)
class Case:
    label: str
    H: int
    qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    reference: torch.Tensor  # float64 (B, T, C), from the inputs as given (half inputs in half)
    repeat: bool  # call twice and require bitwise equal outputs
    bounds: Bounds = FLOAT32_BOUNDS  # half precision: from the vendor kernels' errors on these inputs


def check_cases(device: torch.device, dtype: str = precision.FLOAT32) -> list[Case]:
    """The check's cases in `dtype` (inputs drawn in float32 and cast), each with its float64
    reference and its bounds (harness/reference.py bounds_for, as the gate's)."""
    torch_dtype = precision.torch_dtype(dtype)
    vendors = vendor_functions(device, dtype)  # none in float32: the vendor kernels refuse it

    def case(label: str, H: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, reference: torch.Tensor,
             repeat: bool) -> Case:
        return Case(label, H, (q, k, v), reference, repeat, bounds_for(dtype, reference, vendors, q, k, v, H))

    cases = []
    for i, shape in enumerate(CHECK_SHAPES):
        for scale in SCORE_SCALES:
            q, k, v = random_qkv(shape, seed=1000 + i, device=device, score_scale=scale, dtype=torch_dtype)
            cases.append(case(f"{shape.describe()}, score std {scale:g}", shape.H, q, k, v,
                              reference_attention(q, k, v, shape.H), repeat=False))
    generator = torch.Generator(device=device).manual_seed(7)
    qkv = torch.randn(PACKED_SHAPE.B, PACKED_SHAPE.T, 3 * PACKED_SHAPE.C, device=device, generator=generator)
    q, k, v = qkv.to(torch_dtype).split(PACKED_SHAPE.C, dim=-1)  # (B, T, C) views with row stride 3C
    cases.append(case(f"{PACKED_SHAPE.describe()}, packed qkv views", PACKED_SHAPE.H, q, k, v,
                      reference_attention(q, k, v, PACKED_SHAPE.H), repeat=True))
    for shape in LONG_SHAPES:
        q, k, v = random_qkv(shape, seed=shape.T, device=device, dtype=torch_dtype)
        cases.append(case(shape.describe(), shape.H, q, k, v, reference_attention_by_head(q, k, v, shape.H),
                          repeat=True))
    return cases


def check(name: str, fn: AttentionFn, cases: Sequence[Case], log: Log, *, may_refuse: bool = False) -> bool:
    """Every case against its reference; prints each failure, the worst errors and the repeats.
    may_refuse: PyTorch's kernels may refuse a case (cuDNN refuses T = 1), which is noted, not
    failed; a version that raises fails."""
    ok, worst_rel, worst_abs = True, 0.0, 0.0
    refused = []
    for case in cases:
        q, k, v = case.qkv
        try:
            out = call_quietly(fn, q, k, v, case.H)
        except RuntimeError as error:
            if not may_refuse:
                ok = False
                log(f"  FAILED {name} at {case.label}: {str(error).splitlines()[0]}")
            else:
                refused.append(case.label)
            continue
        result = compare(out, case.reference, case.bounds)
        worst_rel, worst_abs = max(worst_rel, result.rel_err), max(worst_abs, result.max_abs_err)
        if not result.ok:
            ok = False
            log(f"  FAILED {name} at {case.label}: {result.describe()}")
        if case.repeat and not torch.equal(out, fn(q, k, v, case.H)):
            ok = False
            log(f"  FAILED {name} at {case.label}: two calls on the same inputs differ")
    checked = len(cases) - len(refused)
    log(f"{name}: {'ok' if ok else 'FAILED'} ({checked} cases; worst relative error {worst_rel:.2e}, "
        f"worst absolute error {worst_abs:.2e})" + (f"; refuses {', '.join(refused)}" if refused else ""))
    return ok


def time_rounds(functions: dict[str, AttentionFn], shapes: Sequence[Shape], rounds: int,
                device: torch.device, log: Log,
                dtype: str = precision.FLOAT32) -> dict[tuple[str, Shape], list[float]]:
    """Device time (us) per backend and shape, one value per round; the order of the
    backends alternates between rounds so that none always runs first."""
    timer = DeviceTimer(device)
    times: dict[tuple[str, Shape], list[float]] = {}
    names = list(functions)
    for round_index in range(rounds):
        order = alternating(names, round_index)
        for shape in shapes:
            q, k, v = random_qkv(shape, seed=shape.T, device=device, dtype=precision.torch_dtype(dtype))
            cells = []
            for name in order:
                fn = functions[name]
                timing = timer.time(lambda: fn(q, k, v, shape.H))
                us = timing.us_device_median if timing.us_device_median is not None else timing.us_call_median
                times.setdefault((name, shape), []).append(us)
                cells.append(f"{name} {us:.1f}")
            log(f"round {round_index + 1}, {shape.label()}: " + ", ".join(cells))
    return times


def time_table(times: dict[tuple[str, Shape], list[float]], names: Sequence[str], shapes: Sequence[Shape],
               reference_name: str = registry.KERNEL_REFERENCE) -> str:
    """Median device time over the rounds, µs, and the ratio to the kernel reference."""
    width = max(16, *(len(n) + 2 for n in names))
    lines = [f"{'shape':>12}" + "".join(f"{n:>{width}}" for n in names)]
    for shape in shapes:
        reference = statistics.median(times[(reference_name, shape)])
        cells = [statistics.median(times[(n, shape)]) for n in names]
        lines.append(f"{shape.label():>12}" + "".join(f"{f'{t:.1f} ({t / reference:.2f})':>{width}}" for t in cells))
    return "\n".join(lines)


def built_arch(capability: tuple[int, int]) -> str:
    """The architecture the builds target on a GPU of this capability: TORCH_CUDA_ARCH_LIST's
    entry for it if there is one (9.0a gives sm_90a, which wgmma needs), else sm_<major><minor>.
    (A version built only for an arch-specific target is compiled for that one all the same:
    the compile check maps sm_90 to sm_90a for it, as the builds do.)"""
    listed = os.environ.get(ARCH_LIST_VARIABLE)
    own = [arch for arch in (parse_arch_list(listed) if listed else []) if arch.capability == capability]
    return (own[0] if own else Arch(capability)).sm_name


def compile_report(versions: Sequence[CudaVersion], arch: str, log: Log) -> bool:
    """nvcc's resources for `arch` (the compile check's table, which names the architecture each
    version is compiled for); False if one does not compile or ptxas serialised its wgmma."""
    nvcc = find_nvcc()
    if nvcc is None:
        log("compile report skipped: nvcc not found")
        return True
    with tempfile.TemporaryDirectory() as tmp:
        reports = check_versions(nvcc, versions, [arch], None, Path(tmp))
    log(RESOURCES_HEADER)
    for report in reports:
        log(format_resources(report.version.name, arch, report.resources[arch]))
    return not any(compile_failed(report.resources[arch]) for report in reports)


def header(provenance: Provenance, dtype: str) -> list[str]:
    """The log's first lines: when, on what, at which commit, and a warning when the commit
    names a tree that differs from it (a stale .git on a GPU machine: STUDY_COMMIT)."""
    lines = [f"# python -m harness try, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
             f"# {provenance.gpu}, driver {provenance.driver}, CUDA {provenance.cuda}, torch {provenance.torch}, "
             f"commit {provenance.commit}; {dtype}"]
    warning = stale_commit_warning(provenance.commit)
    return lines + ([f"# warning: {warning}"] if warning else [])


def run(variants: Sequence[CudaVersion], against: Sequence[Backend], shapes: Sequence[Shape], *, rounds: int,
        device: torch.device, log: Log, dtype: str = precision.FLOAT32) -> int:
    """Compile report, build, check, time, in `dtype`. Exit status 1 if anything failed to
    build or check."""
    for line in header(collect(device), dtype):
        log(line)
    for variant in variants:
        log(f"# {variant.name} = {variant.description}")
    versions = [b for b in against if isinstance(b, CudaVersion)] + list(variants)
    status = 0 if compile_report(versions, built_arch(torch.cuda.get_device_capability(device)), log) else 1
    results = build_all(versions)
    failed_builds = {r.name for r in results if not r.ok}
    status |= bool(failed_builds)
    reference = registry.kernel_reference(dtype)
    backends = [b for b in [registry.get(reference), *against, *variants] if b.name not in failed_builds]
    functions = {b.name: b.attention(device, dtype) for b in backends}
    cases = check_cases(device, dtype)
    refusing = {b.name for b in backends if not isinstance(b, CudaVersion)}  # PyTorch's kernels
    failed = [name for name, fn in functions.items()
              if not check(name, fn, cases, log, may_refuse=name in refusing)]
    del cases
    torch.cuda.empty_cache()
    for name in failed:
        if name == reference:  # PyTorch's kernel: what the others are compared with
            log(f"{name} missed the tolerance above; it is timed all the same, as the reference of the ratios")
        else:
            del functions[name]
    peak = measure_peak(device, dtype)
    log(f"{peak.name} peak (8192^3 matmul; also warms the clocks): {peak.tflops:.1f} TFLOP/s")
    times = time_rounds(functions, shapes, rounds, device, log, dtype)
    log(f"\ndevice time, µs, {dtype}: median of {rounds} round(s) (ratio to {reference} of the same rounds)")
    log(time_table(times, list(functions), shapes, reference))
    return 1 if status or any(name != reference for name in failed) else 0
