"""Kernel benchmark: every backend at the same shapes, in each of its dtypes, device time and
call time.

In each dtype its kernel reference (registry.kernel_reference: sdpa-efficient in float32,
sdpa-cudnn in half precision) is measured first at every shape, so each row's ratio refers to
a device time of the same run; each dtype's peak (float32 FMA, or the dense tensor-core rate
of the 16-bit type) is measured before that dtype's rows.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch
from tqdm import tqdm

from backends import precision, registry
from backends.environment import Provenance, collect
from backends.registry import Backend, Target
from harness.device_timing import CallTiming, DeviceTimer, Peak, measure_peak
from harness.reference import random_qkv
from harness.results import KERNELS, OK, KernelRow, done
from harness.study import Shape


def shape_seed(shape: Shape) -> int:
    return shape.B * 100003 + shape.T


def _status_row(backend: str, dtype: str, shape: Shape, status: str, provenance: Provenance) -> KernelRow:
    return KernelRow(backend=backend, dtype=dtype, B=shape.B, H=shape.H, T=shape.T, d=shape.d, status=status,
                     notes=None, reps=None, replays=None, us_device_median=None, us_device_min=None,
                     us_device_max=None, us_call_median=None, tflops=None, reference=None, ratio_to_reference=None,
                     peak=None, peak_tflops=None, fraction_of_peak=None, provenance=provenance)


def measured_row(backend: str, dtype: str, shape: Shape, timing: CallTiming, reference_us: float | None,
                 peak: Peak, provenance: Provenance) -> KernelRow:
    """A row from a timing; TFLOP/s, ratio and fraction of peak all from the device median."""
    device = timing.us_device
    median = timing.us_device_median
    tflops = shape.flops() / (median * 1e-6) / 1e12 if median and median > 0 else None
    return KernelRow(backend=backend, dtype=dtype, B=shape.B, H=shape.H, T=shape.T, d=shape.d, status=OK,
                     notes=None if timing.not_captured is None else
                     f"{timing.not_captured}: timed eagerly only, no device time",
                     reps=timing.repetitions.reps, replays=timing.repetitions.replays,
                     us_device_median=median, us_device_min=min(device) if device else None,
                     us_device_max=max(device) if device else None, us_call_median=timing.us_call_median,
                     tflops=tflops, reference=registry.kernel_reference(dtype),
                     ratio_to_reference=median / reference_us if median and reference_us else None,
                     peak=peak.name, peak_tflops=peak.tflops,
                     fraction_of_peak=tflops / peak.tflops if tflops else None, provenance=provenance)


def _run_dtype(backends: Sequence[Backend], dtype: str, shapes: Sequence[Shape], timer: DeviceTimer, path: Path,
               previous: dict, excluded: dict[tuple[str, str], str], provenance: Provenance,
               device: torch.device) -> None:
    reference_name = registry.kernel_reference(dtype)
    order = registry.with_required(backends, reference_name)
    runnable, unavailable = registry.partition(order, Target.of(device), dtype)
    reasons = {**unavailable, **{name: why for (name, d), why in excluded.items() if d == dtype}}
    todo = [(shape, b) for shape in shapes for b in order
            if (b.name, dtype, shape.B, shape.H, shape.T) not in previous]
    if not todo:
        return
    peak = measure_peak(device, dtype)
    tqdm.write(f"{peak.name} peak ({'8192^3 matmul, TF32 off' if dtype == precision.FLOAT32 else '8192^3 matmul'}): "
               f"{peak.tflops:.1f} TFLOP/s")
    functions = {}
    for b in runnable:
        if b.name not in reasons:
            functions[b.name] = b.timed_attention(device, dtype)
    torch_dtype = precision.torch_dtype(dtype)
    progress = tqdm(total=len(todo), desc=f"kernel benchmark, {dtype}", unit="run")
    for shape in shapes:
        reference = previous.get((reference_name, dtype, shape.B, shape.H, shape.T))
        reference_us = reference.us_device_median if reference else None
        q, k, v = random_qkv(shape, seed=shape_seed(shape), device=device, dtype=torch_dtype)
        for backend in order:
            if (backend.name, dtype, shape.B, shape.H, shape.T) in previous:
                continue
            progress.update()
            if backend.name in reasons:
                KERNELS.append(path, _status_row(backend.name, dtype, shape, reasons[backend.name], provenance))
                continue
            fn = functions[backend.name]
            timing = timer.time(lambda: fn(q, k, v, shape.H))
            if backend.name == reference_name:  # the ratios below refer to it, its own is 1
                reference_us = timing.us_device_median
            row = measured_row(backend.name, dtype, shape, timing, reference_us, peak, provenance)
            if row.notes:
                tqdm.write(f"{backend.name} ({dtype}) {shape.label()}: {row.notes}")
            KERNELS.append(path, row)
            shown = row.us_device_median if row.us_device_median is not None else row.us_call_median
            progress.set_postfix_str(f"{backend.name} {shape.label()}: {shown:.1f} us")
    progress.close()


def run(backends: Sequence[Backend], dtypes: Sequence[str], shapes: Sequence[Shape], *, results_dir: Path,
        resume: bool = True, excluded: dict[tuple[str, str], str] | None = None, device: torch.device) -> Path:
    """Time every backend at every shape in each of `dtypes`; append one row per measurement;
    returns the file.

    excluded: (backend, dtype) pairs left out before this step (e.g. failed the correctness
    gate) and why; they get a row saying so. A backend that does not take a dtype gets a row
    with the registry's reason.
    """
    provenance = collect(device)
    path = KERNELS.path(results_dir, provenance.slug)
    previous = done(KERNELS, path, provenance) if resume else {}
    timer = DeviceTimer(device)
    for dtype in dtypes:
        _run_dtype(backends, dtype, shapes, timer, path, previous, excluded or {}, provenance, device)
    return path
