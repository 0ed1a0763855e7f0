"""Kernel benchmark: every backend at the same shapes, device time and call time.

The kernel reference (registry.KERNEL_REFERENCE) is measured first at every shape, so
each row's ratio refers to a device time of the same run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch
from tqdm import tqdm

from backends import registry
from backends.environment import Provenance, collect
from backends.precision import FLOAT32
from backends.registry import Backend, Target
from harness.device_timing import CallTiming, DeviceTimer, measure_fp32_peak
from harness.reference import random_qkv
from harness.results import KERNELS, OK, KernelRow, done
from harness.study import Shape


def shape_seed(shape: Shape) -> int:
    return shape.B * 100003 + shape.T


def _status_row(backend: str, shape: Shape, status: str, provenance: Provenance) -> KernelRow:
    return KernelRow(backend=backend, dtype=FLOAT32, B=shape.B, H=shape.H, T=shape.T, d=shape.d, status=status,
                     notes=None, reps=None, replays=None, us_device_median=None, us_device_min=None,
                     us_device_max=None, us_call_median=None, tflops=None, reference=None, ratio_to_reference=None,
                     peak=None, peak_tflops=None, fraction_of_peak=None, provenance=provenance)


def measured_row(backend: str, shape: Shape, timing: CallTiming, reference_us: float | None, peak_tflops: float,
                 provenance: Provenance) -> KernelRow:
    """A row from a timing; TFLOP/s, ratio and fraction of peak all from the device median."""
    device = timing.us_device
    median = timing.us_device_median
    tflops = shape.flops() / (median * 1e-6) / 1e12 if median and median > 0 else None
    return KernelRow(backend=backend, dtype=FLOAT32, B=shape.B, H=shape.H, T=shape.T, d=shape.d, status=OK,
                     notes=None if timing.not_captured is None else
                     f"{timing.not_captured}: timed eagerly only, no device time",
                     reps=timing.repetitions.reps, replays=timing.repetitions.replays,
                     us_device_median=median, us_device_min=min(device) if device else None,
                     us_device_max=max(device) if device else None, us_call_median=timing.us_call_median,
                     tflops=tflops,
                     reference=registry.KERNEL_REFERENCE,
                     ratio_to_reference=median / reference_us if median and reference_us else None,
                     peak="float32 FMA", peak_tflops=peak_tflops,
                     fraction_of_peak=tflops / peak_tflops if tflops else None,
                     provenance=provenance)


def run(backends: Sequence[Backend], shapes: Sequence[Shape], *, results_dir: Path, resume: bool = True,
        excluded: dict[str, str] | None = None, device: torch.device) -> Path:
    """Time every backend at every shape; append one row per measurement; returns the file.

    excluded: backends left out before this step (e.g. failed the correctness gate) and
    why; they get a row saying so.
    """
    provenance = collect(device)
    path = KERNELS.path(results_dir, provenance.slug)
    previous = done(KERNELS, path, provenance) if resume else {}
    order = registry.with_required(backends, registry.KERNEL_REFERENCE)
    runnable, reasons = registry.partition(order, Target.of(device), FLOAT32)
    reasons.update(excluded or {})
    timer = DeviceTimer(device)
    peak = measure_fp32_peak(device)
    tqdm.write(f"float32 FMA peak (8192^3 matmul, TF32 off): {peak:.1f} TFLOP/s")
    functions = {b.name: b.attention(device, FLOAT32) for b in runnable if b.name not in reasons}
    progress = tqdm(total=len(order) * len(shapes), desc="kernel benchmark", unit="run")
    for shape in shapes:
        reference = previous.get((registry.KERNEL_REFERENCE, FLOAT32, shape.B, shape.H, shape.T))
        reference_us = reference.us_device_median if reference else None
        q, k, v = random_qkv(shape, seed=shape_seed(shape), device=device)
        for backend in order:
            progress.update()
            if (backend.name, FLOAT32, shape.B, shape.H, shape.T) in previous:
                continue
            if backend.name in reasons:
                KERNELS.append(path, _status_row(backend.name, shape, reasons[backend.name], provenance))
                continue
            fn = functions[backend.name]
            timing = timer.time(lambda: fn(q, k, v, shape.H))
            if backend.name == registry.KERNEL_REFERENCE:  # the ratios below refer to it, its own is 1
                reference_us = timing.us_device_median
            row = measured_row(backend.name, shape, timing, reference_us, peak, provenance)
            if row.notes:
                tqdm.write(f"{backend.name} {shape.label()}: {row.notes}")
            KERNELS.append(path, row)
            shown = row.us_device_median if row.us_device_median is not None else row.us_call_median
            progress.set_postfix_str(f"{backend.name} {shape.label()}: {shown:.1f} us")
    progress.close()
    return path
