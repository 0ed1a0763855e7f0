"""Kernel benchmark: every backend at the study's shapes, in each of its dtypes, device time and
call time; PyTorch's kernels and each prefill track's last version also at the prefill grid's
(harness/kernel_plan.py says which backend gets which shapes).

In each dtype its kernel reference (registry.kernel_reference: sdpa-efficient in float32,
sdpa-cudnn in half precision) is measured at every shape with the others, so each row's ratio
refers to a device time of the same run; each dtype's peak (float32 FMA, or the dense
tensor-core rate of the 16-bit type) is measured before that dtype's rows.

At each shape the backends are measured in KERNEL_ROUNDS rounds, the order reversed every
other round (device_timing.alternating), and each row pools its rounds' replays. Measured
one after the other in one fixed order, backends that came late read slower at B=8, T=4096:
two builds of the same kernel, one measured right after the other, were 1.8% and 6.6% apart
in one sweep (versions/h11_one_wave_splits/README.md).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import torch
from tqdm import tqdm

from backends import precision, registry
from backends.environment import Provenance, collect
from backends.registry import Backend, Target
from harness.device_timing import CallTiming, DeviceTimer, Peak, Repetitions, alternating, measure_peak, pooled
from harness.kernel_plan import KernelPlan
from harness.reference import random_qkv
from harness.results import KERNELS, OK, KernelRow, done
from harness.study import KERNEL_ROUNDS, Shape


def shape_seed(shape: Shape) -> int:
    return shape.B * 100003 + shape.T


def _status_row(backend: str, dtype: str, shape: Shape, status: str, provenance: Provenance) -> KernelRow:
    return KernelRow(backend=backend, dtype=dtype, B=shape.B, H=shape.H, T=shape.T, d=shape.d, status=status,
                     notes=None, reps=None, replays=None, rounds=None, us_device_median=None, us_device_min=None,
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
                     reps=timing.repetitions.reps, replays=timing.repetitions.replays, rounds=timing.rounds,
                     us_device_median=median, us_device_min=min(device) if device else None,
                     us_device_max=max(device) if device else None, us_call_median=timing.us_call_median,
                     tflops=tflops, reference=registry.kernel_reference(dtype),
                     ratio_to_reference=median / reference_us if median and reference_us else None,
                     peak=peak.name, peak_tflops=peak.tflops,
                     fraction_of_peak=tflops / peak.tflops if tflops else None, provenance=provenance)


def in_rounds(names: Sequence[str], rounds: int,
              time_one: Callable[[str, Repetitions | None], CallTiming]) -> dict[str, CallTiming]:
    """Each name timed once per round, in alternating order, its rounds pooled into one
    timing. time_one(name, plan) times one backend; from the second round on, plan is the
    repetitions of its first round, so that every round of a backend measures alike."""
    timings: dict[str, list[CallTiming]] = {name: [] for name in names}
    for round_index in range(rounds):
        for name in alternating(names, round_index):
            earlier = timings[name][0].repetitions if timings[name] else None
            timings[name].append(time_one(name, earlier))
    return {name: pooled(ts) for name, ts in timings.items()}


def _run_dtype(backends: Sequence[Backend], dtype: str, plan: KernelPlan, timer: DeviceTimer, path: Path,
               previous: dict, excluded: dict[tuple[str, str], str], provenance: Provenance,
               device: torch.device, rounds: int) -> None:
    reference_name = registry.kernel_reference(dtype)
    order = registry.with_required(backends, reference_name)
    runnable, unavailable = registry.partition(order, Target.of(device), dtype)
    reasons = {**unavailable, **{name: why for (name, d), why in excluded.items() if d == dtype}}

    selected = {b.name for b in backends}

    def missing_at(shape: Shape) -> list[str]:
        """The backends the plan measures at `shape` that have no row of this setup there; none
        where it measures no selected backend (the reference, added for the ratios, is not
        measured alone: `--backends v10` does not time it at the grid)."""
        measured = [b.name for b in order if plan.measures(b, shape)]
        if selected.isdisjoint(measured):
            return []
        return [name for name in measured if (name, dtype, shape.B, shape.H, shape.T) not in previous]

    todo = {shape: names for shape in plan.shapes() if (names := missing_at(shape))}
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
    progress = tqdm(total=sum(map(len, todo.values())) * rounds, desc=f"kernel benchmark, {dtype}", unit="run")
    for shape, missing in todo.items():
        for name in missing:
            if name in reasons:
                KERNELS.append(path, _status_row(name, dtype, shape, reasons[name], provenance))
                progress.update(rounds)
        timed = [name for name in missing if name not in reasons]
        if not timed:
            continue
        q, k, v = random_qkv(shape, seed=shape_seed(shape), device=device, dtype=torch_dtype)  # (B, T, C) each

        def time_one(name: str, plan: Repetitions | None) -> CallTiming:
            fn = functions[name]
            timing = timer.time(lambda: fn(q, k, v, shape.H), plan=plan)
            progress.update()
            shown = timing.us_device_median if timing.us_device_median is not None else timing.us_call_median
            progress.set_postfix_str(f"{name} {shape.label()}: {shown:.1f} us")
            return timing

        # Rows are written once a shape's rounds are done: an interrupted run loses at most
        # this shape's measurements.
        combined = in_rounds(timed, rounds, time_one)
        reference = previous.get((reference_name, dtype, shape.B, shape.H, shape.T))
        reference_us = (combined[reference_name].us_device_median if reference_name in combined
                        else reference.us_device_median if reference else None)
        for name in timed:
            row = measured_row(name, dtype, shape, combined[name], reference_us, peak, provenance)
            if row.notes:
                tqdm.write(f"{name} ({dtype}) {shape.label()}: {row.notes}")
            KERNELS.append(path, row)
    progress.close()


def run(backends: Sequence[Backend], dtypes: Sequence[str], plan: KernelPlan, *, results_dir: Path,
        resume: bool = True, excluded: dict[tuple[str, str], str] | None = None, device: torch.device,
        rounds: int = KERNEL_ROUNDS) -> Path:
    """Time each backend at the shapes `plan` gives it (harness/kernel_plan.py) in each of
    `dtypes`, in `rounds` rounds of alternating order per shape; append one row per backend and
    shape; returns the file. With `resume`, only what this setup has no row of is measured.

    excluded: (backend, dtype) pairs left out before this step (e.g. failed the correctness
    gate) and why; they get a row saying so. A backend that does not take a dtype gets a row
    with the registry's reason. Only the rows that provide a prefill op take part (the decode
    benchmark is harness/bench_decode.py).
    """
    backends = registry.providing(backends, registry.PREFILL)
    provenance = collect(device)
    path = KERNELS.path(results_dir, provenance.slug)
    previous = done(KERNELS, path, provenance) if resume else {}
    timer = DeviceTimer(device)
    for dtype in dtypes:
        _run_dtype(backends, dtype, plan, timer, path, previous, excluded or {}, provenance, device, rounds)
    return path
