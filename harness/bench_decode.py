"""Decode benchmark: every backend's decode op at the same shapes, in each of its dtypes:
device time, call time, and the K and V bytes read per second against the HBM bandwidth
measured in the same run.

Each dtype starts with a measurement of the HBM's rate (a 2 GiB device-to-device copy,
read and written bytes over its time), which every row of that dtype is compared with. At
each shape the backends are timed in DECODE_ROUNDS rounds, the order reversed every other
round, as in the prefill benchmark (harness/bench_kernels.py); each row's reference is the
fastest PyTorch backend at that shape and dtype in the same run (naive, SDPA's kernels,
flex-attention: whichever is fastest), named in the row. Ragged shapes (lengths "ramp") are
timed for the rows that take ragged batches in one call (the decode versions) only.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch
from tqdm import tqdm

from backends import precision, registry
from backends.environment import Provenance, collect
from backends.registry import DECODE, Backend, Target
from harness.bench_kernels import in_rounds
from harness.decode_calls import call_decode
from harness.decode_inputs import random_decode_inputs
from harness.device_timing import Bandwidth, CallTiming, DeviceTimer, Repetitions, measure_bandwidth
from harness.results import DECODE_TIMES, OK, DecodeRow, done
from harness.study import DECODE_ROUNDS, FULL, DecodeShape


def shape_seed(shape: DecodeShape) -> int:
    return shape.B * 100003 + shape.S + (7 if shape.lengths != FULL else 0)


def _status_row(backend: str, dtype: str, shape: DecodeShape, status: str, provenance: Provenance) -> DecodeRow:
    return DecodeRow(backend=backend, dtype=dtype, B=shape.B, H=shape.H, S=shape.S, lengths=shape.lengths,
                     status=status, notes=None, reps=None, replays=None, rounds=None, us_device_median=None,
                     us_device_min=None, us_device_max=None, us_call_median=None,
                     bytes_read=shape.bytes_read(precision.torch_dtype(dtype).itemsize), gbps=None, hbm_gbps=None,
                     fraction_of_hbm=None, reference=None, ratio_to_reference=None, provenance=provenance)


def measured_row(backend: str, dtype: str, shape: DecodeShape, timing: CallTiming, reference: tuple[str, float] | None,
                 bandwidth: Bandwidth, provenance: Provenance) -> DecodeRow:
    """A row from a timing: the rate, its fraction of the copy's and the ratio to the
    reference, all from the device median."""
    median = timing.us_device_median
    nbytes = shape.bytes_read(precision.torch_dtype(dtype).itemsize)
    gbps = nbytes / (median * 1e-6) / 1e9 if median and median > 0 else None
    return DecodeRow(backend=backend, dtype=dtype, B=shape.B, H=shape.H, S=shape.S, lengths=shape.lengths, status=OK,
                     notes=None if timing.not_captured is None else
                     f"{timing.not_captured}: timed eagerly only, no device time",
                     reps=timing.repetitions.reps, replays=timing.repetitions.replays, rounds=timing.rounds,
                     us_device_median=median, us_device_min=min(timing.us_device) if timing.us_device else None,
                     us_device_max=max(timing.us_device) if timing.us_device else None,
                     us_call_median=timing.us_call_median, bytes_read=nbytes, gbps=gbps, hbm_gbps=bandwidth.gbps,
                     fraction_of_hbm=gbps / bandwidth.gbps if gbps else None,
                     reference=reference[0] if reference and median else None,
                     ratio_to_reference=median / reference[1] if reference and median else None,
                     provenance=provenance)


def fastest_baseline(times: dict[str, float | None]) -> tuple[str, float] | None:
    """(name, device us) of the fastest PyTorch backend among `times` (any backend's device
    median at one shape and dtype), or None if no baseline has a device time."""
    pytorch = registry.baseline_names(DECODE)
    baselines = [(us, name) for name, us in times.items() if us is not None and name in pytorch]
    if not baselines:
        return None
    us, name = min(baselines)
    return name, us


def _run_dtype(backends: Sequence[Backend], dtype: str, shapes: Sequence[DecodeShape], timer: DeviceTimer, path: Path,
               previous: dict, excluded: dict[tuple[str, str], str], provenance: Provenance,
               device: torch.device, rounds: int) -> None:
    runnable, unavailable = registry.partition(backends, Target.of(device), dtype, DECODE)
    reasons = {**unavailable, **{name: why for (name, d), why in excluded.items() if d == dtype}}

    def wanted(b: Backend, shape: DecodeShape) -> bool:
        return shape.lengths == FULL or b.ragged_lengths

    def key(name: str, shape: DecodeShape) -> tuple:
        return name, dtype, shape.B, shape.H, shape.S, shape.lengths

    todo = [(shape, b) for shape in shapes for b in backends if wanted(b, shape) and key(b.name, shape) not in previous]
    if not todo:
        return
    bandwidth = measure_bandwidth(device)
    tqdm.write(f"HBM bandwidth ({dtype} rows; a {bandwidth.bytes_copied / 2**30:.0f} GiB device-to-device copy, "
               f"read + written): {bandwidth.gbps:.0f} GB/s")
    functions = {b.name: b.timed_decode(device, dtype) for b in runnable if b.name not in reasons}
    torch_dtype = precision.torch_dtype(dtype)
    progress = tqdm(total=len(todo) * rounds, desc=f"decode benchmark, {dtype}", unit="run")
    for shape in shapes:
        missing = [b for b in backends if wanted(b, shape) and key(b.name, shape) not in previous]
        for b in missing:
            if b.name in reasons:
                DECODE_TIMES.append(path, _status_row(b.name, dtype, shape, reasons[b.name], provenance))
                progress.update(rounds)
        timed = [b for b in missing if b.name not in reasons]
        if not timed:
            continue
        x = random_decode_inputs(shape.B, shape.H, shape.S, shape.host_lengths(), seed=shape_seed(shape),
                                 device=device, dtype=torch_dtype)
        by_name = {b.name: b for b in timed}

        def time_one(name: str, plan: Repetitions | None) -> CallTiming:
            backend, fn = by_name[name], functions[name]
            timing = timer.time(lambda: call_decode(backend, fn, x.q, x.k_cache, x.v_cache, x.lengths,
                                                    x.host_lengths, shape.H), plan=plan)
            progress.update()
            shown = timing.us_device_median if timing.us_device_median is not None else timing.us_call_median
            progress.set_postfix_str(f"{name} {shape.label()}: {shown:.1f} us")
            return timing

        # Rows are written once a shape's rounds are done: an interrupted run loses at most
        # this shape's measurements.
        combined = in_rounds(list(by_name), rounds, time_one)
        times = {name: t.us_device_median for name, t in combined.items()}
        for b in backends:  # baselines measured at this shape by an earlier part of this run
            row = previous.get(key(b.name, shape))
            if b.name not in times and row is not None and row.measured:
                times[b.name] = row.us_device_median
        reference = fastest_baseline(times)
        for name in by_name:
            row = measured_row(name, dtype, shape, combined[name], reference, bandwidth, provenance)
            if row.notes:
                tqdm.write(f"{name} ({dtype}) {shape.label()}: {row.notes}")
            DECODE_TIMES.append(path, row)
        del x
    progress.close()


def run(backends: Sequence[Backend], dtypes: Sequence[str], shapes: Sequence[DecodeShape], *, results_dir: Path,
        resume: bool = True, excluded: dict[tuple[str, str], str] | None = None, device: torch.device,
        rounds: int = DECODE_ROUNDS) -> Path:
    """Time every backend's decode op at every shape in each of `dtypes`; one row per backend
    and shape; returns the file. Only rows that provide a decode op and are not composites
    take part. excluded: (backend, dtype) pairs left out before this step (the decode gate)
    and why; they get a row saying so."""
    backends = registry.providing(backends, DECODE)
    provenance = collect(device)
    path = DECODE_TIMES.path(results_dir, provenance.slug)
    previous = done(DECODE_TIMES, path, provenance) if resume else {}
    timer = DeviceTimer(device)
    for dtype in dtypes:
        _run_dtype(backends, dtype, shapes, timer, path, previous, excluded or {}, provenance, device, rounds)
    return path
