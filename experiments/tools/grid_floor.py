"""The prefill grid against what memory and the tensor cores allow: per shape, the floor
(harness/prefill_floor.py: bytes over the copy's rate measured in the same sweep, FLOPs over
the dtype's matmul rate), the last version's and PyTorch's fastest time over it, and issue 43's
target over it, so that a target under the floor shows as out of reach (target / floor < 1).

    python experiments/tools/grid_floor.py --gpu nvidia-h100-80gb-hbm3 --commit f184cca4d08c

Reads the committed results (no GPU); prints one markdown table per dtype. The copy's rate is
the median of that commit's decode rows (the decode benchmark measures it in each run).
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys

from backends import precision, registry
from harness.prefill_floor import compute_floor_us, floor_us, memory_floor_us
from harness.results import KernelRow
from harness.study import GRID_SHAPES, Shape
from harness.one_run import add_run_arguments, copy_rate, load_run

# Issue 43's targets: in 16 bits at most 1.0x the fastest SDPA backend; in float32 at most
# 0.35x sdpa-efficient.
HALF_TARGET, FLOAT32_TARGET, FLOAT32_REFERENCE = 1.0, 0.35, "sdpa-efficient"


def target_us(times: dict[str, float], dtype: str) -> float | None:
    """Issue 43's target at one shape from PyTorch's times there."""
    if dtype == precision.FLOAT32:
        ref = times.get(FLOAT32_REFERENCE)
        return None if ref is None else FLOAT32_TARGET * ref
    sdpa = [t for name, t in times.items() if name.startswith("sdpa-")]
    return HALF_TARGET * min(sdpa) if sdpa else None


def table(rows: list[KernelRow], dtype: str, copy_gbps: float) -> str:
    version = next(v.name for v in registry.last_versions() if v.accepts(dtype))
    baselines = set(registry.baseline_names(registry.PREFILL))
    peaks = [r.peak_tflops for r in rows if r.dtype == dtype and r.peak_tflops]
    peak = None if dtype == precision.FLOAT32 or not peaks else statistics.median(peaks)
    by_shape: dict[Shape, dict[str, float]] = {}
    for r in rows:
        if r.dtype == dtype and r.measured and r.us_device_median is not None:
            by_shape.setdefault(r.shape, {})[r.backend] = r.us_device_median
    lines = [f"### {dtype}: `{version}`; copy {copy_gbps:,.0f} GB/s"
             + (f", matmul {peak:,.0f} TFLOP/s" if peak else " (memory floor only: float32's peak is the FMA "
                "rate, which TF32 kernels exceed)"),
             "",
             "| B | H | T | memory floor µs | compute floor µs | fastest PyTorch | its µs | its / floor "
             f"| `{version}` µs | `{version}` / floor | target µs | target / floor |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    over, reach = [], []
    for shape in GRID_SHAPES:
        times = by_shape.get(shape, {})
        ours = times.get(version)
        pytorch = {n: t for n, t in times.items() if n in baselines}
        if ours is None or not pytorch:
            continue
        fastest = min(pytorch, key=pytorch.get)
        floor = floor_us(shape, dtype, copy_gbps, peak)
        target = target_us(pytorch, dtype)
        compute = f"{compute_floor_us(shape, peak):.1f}" if peak else "–"
        lines.append(f"| {shape.B} | {shape.H} | {shape.T} | {memory_floor_us(shape, dtype, copy_gbps):.1f} "
                     f"| {compute} | `{fastest}` | {pytorch[fastest]:.1f} | {pytorch[fastest] / floor:.2f} "
                     f"| {ours:.1f} | {ours / floor:.2f} | "
                     + (f"{target:.1f} | {target / floor:.2f} |" if target else "– | – |"))
        over.append(ours / floor)
        if target:
            reach.append((target / floor, shape))
    if over:
        below = [f"B={s.B} H={s.H} T={s.T} ({x:.2f})" for x, s in sorted(reach) if x < 1]
        lines += ["", f"{len(over)} shapes: `{version}` at {min(over):.2f}-{max(over):.2f} of the floor "
                  f"(geometric mean {math.exp(statistics.fmean(map(math.log, over))):.2f}); targets under the "
                  f"floor: {', '.join(below) if below else 'none'}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    parser.add_argument("--dtypes", default="all", help="e.g. bfloat16 or float32,bfloat16 (default: all)")
    args = parser.parse_args(argv)
    r = load_run(parser, args)
    rows = [x for x in r.measured_kernels if x.provenance.commit == args.commit]
    copy = copy_rate(r, args.commit)
    if not rows or copy is None:
        print(f"grid_floor: {args.gpu} has no kernel rows or no copy rate at {args.commit}", file=sys.stderr)
        return 1
    print(f"## The prefill grid against its floors: {r.gpu}, commit {args.commit}\n\n"
          f"Generated from the committed rows by `python experiments/tools/grid_floor.py --gpu {args.gpu} "
          f"--commit {args.commit}`. Floors: harness/prefill_floor.py. Targets: issue 43 (16 bits: 1.0x the "
          f"fastest SDPA backend; float32: {FLOAT32_TARGET}x {FLOAT32_REFERENCE}).\n")
    print("\n\n".join(table(rows, dtype, copy) for dtype in precision.select(args.dtypes)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
