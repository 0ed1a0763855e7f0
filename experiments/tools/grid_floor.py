"""The prefill grid against what memory and the tensor cores allow: per shape, the floor
(harness/prefill_floor.py: bytes over the copy's rate measured in the same sweep, FLOPs over
the dtype's matmul rate), the last version's and PyTorch's fastest time over it, and issue 43's
target over it, so that a target under the floor shows as out of reach (target / floor < 1).

    python experiments/tools/grid_floor.py --gpu nvidia-h100-80gb-hbm3 --commit f184cca4d08c

Reads the committed results (no GPU); prints one markdown table per dtype. The copy's rate is
the median of that commit's decode rows (the decode benchmark measures it in each run).

With --io-floor CSV (experiments/tools/io_floor.py's rows, measured on the same GPU) each row
also gets the I/O floor: the device time of one elementwise kernel that reads Q, K and V and
writes O, which the bytes over the copy rate understate at small shapes (a launch and HBM's
latency), and the target over it.
"""
from __future__ import annotations

import csv
import math
import statistics
import sys
from pathlib import Path

from backends import arguments, precision, registry
from harness.grid import GridCell, GridSummary, grid_summaries, shape_text
from harness.one_run import add_run_arguments, copy_rate, load_run
from harness.prefill_floor import compute_floor_us, floor_us, memory_floor_us
from harness.study import Shape
from harness.tables import GpuResults

# Issue 43's targets: in 16 bits at most 1.0x the fastest SDPA backend; in float32 at most
# 0.35x sdpa-efficient.
HALF_TARGET, FLOAT32_TARGET, FLOAT32_REFERENCE = 1.0, 0.35, "sdpa-efficient"


def target_us(times: dict[str, float], dtype: str) -> float | None:
    """Issue 43's target at one shape from PyTorch's times there (µs, by backend)."""
    if dtype == precision.FLOAT32:
        ref = times.get(FLOAT32_REFERENCE)
        return None if ref is None else FLOAT32_TARGET * ref
    sdpa = [t for name, t in times.items() if name.startswith("sdpa-")]
    return HALF_TARGET * min(sdpa) if sdpa else None


def pytorch_times(r: GpuResults, cell: GridCell, dtype: str) -> dict[str, float]:
    """The device times of PyTorch's kernels that the cell's row's run timed at its shape."""
    rows = {name: r.kernel_in_run(name, cell.shape, dtype, cell.row.provenance)
            for name in registry.baseline_names(registry.PREFILL)}
    return {name: row.us_device_median for name, row in rows.items() if row and row.us_device_median}


IoFloors = dict[tuple[str, Shape], float]  # (dtype, shape) -> µs


def read_io_floor(path: Path, gpu: str) -> IoFloors:
    """io_floor.py's rows of `gpu` (the GPU's name, as the results rows give it); a file that is
    not such a CSV, or holds another GPU's rows, raises ValueError naming the file and line."""
    floors: IoFloors = {}
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in ("gpu", "dtype", "B", "H", "T", "us_device_median") if c not in (reader.fieldnames or ())]
            if missing:
                raise ValueError(f"{path}: not io_floor.py's CSV (no column {', '.join(missing)})")
            for line, row in enumerate(reader, 2):
                if row["gpu"] != gpu:
                    raise ValueError(f"{path}:{line}: measured on {row['gpu']!r}, not {gpu!r}: floors of "
                                     "different GPUs never mix")
                try:
                    shape, us = Shape(int(row["B"]), int(row["H"]), int(row["T"])), float(row["us_device_median"])
                except (TypeError, ValueError):
                    raise ValueError(f"{path}:{line}: a damaged row") from None
                if not math.isfinite(us) or us <= 0:
                    raise ValueError(f"{path}:{line}: a damaged row (us_device_median={us})")
                floors[(row["dtype"], shape)] = us
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: cannot be read ({err})") from None
    return floors


def table(r: GpuResults, summary: GridSummary, commit: str, copy_gbps: float, io: IoFloors | None = None) -> str:
    """The summary's cells measured at `commit` against the floors; the fastest PyTorch kernel
    of each is the grid page's (GpuResults.kernel_vs_fastest: same run, same shape)."""
    dtype, version = summary.dtype, summary.version
    cells = [c for c in summary.measured if c.row.provenance.commit == commit]
    # The compute floor takes the matmul rate of each row's own run; float32's is the FMA rate,
    # which TF32 kernels exceed, so float32 has the memory floor only.
    def peak(cell: GridCell) -> float | None:
        return None if dtype == precision.FLOAT32 else cell.row.peak_tflops

    peaks = sorted({round(rate) for c in cells if (rate := peak(c))})
    rates = f"{peaks[0]:,}" if len(peaks) == 1 else f"{peaks[0]:,}-{peaks[-1]:,}" if peaks else ""
    lines = [f"### {dtype}: `{version}`; copy {copy_gbps:,.0f} GB/s"
             + (f", matmul {rates} TFLOP/s (each row's run)" if rates else " (memory floor only: float32's peak is "
                "the FMA rate, which TF32 kernels exceed)"),
             "",
             "| B | H | T | memory floor µs | compute floor µs | fastest PyTorch | its µs | its / floor "
             f"| `{version}` µs | `{version}` / floor | target µs | target / floor |"
             + (" I/O floor µs | target / I/O floor |" if io is not None else ""),
             "|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if io is not None else "")]
    over, reach, io_reach = [], [], []
    for cell in cells:
        shape, ours, fastest = cell.shape, cell.row.us_device_median, cell.reference
        floor = floor_us(shape, dtype, copy_gbps, peak(cell))
        target = target_us(pytorch_times(r, cell, dtype), dtype)
        compute = f"{compute_floor_us(shape, rate):.1f}" if (rate := peak(cell)) else "–"
        lines.append(f"| {shape.B} | {shape.H} | {shape.T} | {memory_floor_us(shape, dtype, copy_gbps):.1f} "
                     f"| {compute} | `{fastest.backend}` | {fastest.time:.1f} | {fastest.time / floor:.2f} "
                     f"| {ours:.1f} | {ours / floor:.2f} | "
                     + (f"{target:.1f} | {target / floor:.2f} |" if target else "– | – |")
                     + (io_cells(io.get((dtype, shape)), target) if io is not None else ""))
        over.append(ours / floor)
        if target:
            reach.append((target / floor, shape))
            if io is not None and (io_us := io.get((dtype, shape))):
                io_reach.append((target / io_us, shape))
    if over:
        lines += ["", f"{len(over)} shapes: `{version}` at {min(over):.2f}-{max(over):.2f} of the floor "
                  f"(geometric mean {math.exp(statistics.fmean(map(math.log, over))):.2f}); targets under the "
                  f"floor: {under(reach)}" + (f"; under the I/O floor: {under(io_reach)}" if io is not None else "")
                  + "."]
    return "\n".join(lines)


def io_cells(io_us: float | None, target: float | None) -> str:
    """The I/O floor's two cells: its time, and the target over it."""
    if io_us is None:
        return " – | – |"
    return f" {io_us:.1f} | " + (f"{target / io_us:.2f} |" if target else "– |")


def under(reach: list[tuple[float, Shape]]) -> str:
    """The shapes whose target is under a floor (target / floor < 1), lowest first, or 'none'."""
    below = [f"{shape_text(s)} ({x:.2f})" for x, s in sorted(reach) if x < 1]
    return ", ".join(below) if below else "none"


def main(argv: list[str] | None = None) -> int:
    parser = arguments.OneLineParser(prog="grid_floor.py", description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    parser.add_argument("--dtypes", type=arguments.text, default="all",
                        help="e.g. bfloat16 or float32,bfloat16 (default: all)")
    parser.add_argument("--io-floor", type=arguments.path, metavar="CSV",
                        help="io_floor.py's rows of this GPU: add the I/O floor and the target over it")
    args = parser.parse_args(argv)
    try:
        dtypes = precision.select(args.dtypes)
    except precision.UnknownDtypeError as err:
        parser.error(f"--dtypes: {err}")
    r = load_run(parser, args)
    io = None
    if args.io_floor is not None:
        if args.io_floor.is_dir():
            parser.error(f"--io-floor {args.io_floor} is a folder: name io_floor.py's CSV")
        if not args.io_floor.is_file():
            parser.error(f"--io-floor {args.io_floor}: no such file")
        try:
            io = read_io_floor(args.io_floor, r.gpu)
        except ValueError as err:
            parser.error(f"--io-floor: {err}")
    # Each track's last version measured on the grid at that commit (a later one may exist).
    summaries = [g for g in grid_summaries(r, commit=args.commit) if g.dtype in dtypes and g.version
                 and any(c.row.provenance.commit == args.commit for c in g.measured)]
    copy = copy_rate(r, args.commit)
    if not summaries or copy is None:
        print(f"grid_floor: {args.gpu} has no grid rows or no copy rate at {args.commit}", file=sys.stderr)
        return 1
    print(f"## The prefill grid against its floors: {r.gpu}, commit {args.commit}\n\n"
          f"Generated from the committed rows by `python experiments/tools/grid_floor.py --gpu {args.gpu} "
          f"--commit {args.commit}" + (f" --io-floor {args.io_floor}" if io is not None else "")
          + "`. Floors: harness/prefill_floor.py. Targets: issue 43 (16 bits: 1.0x the "
          f"fastest SDPA backend; float32: {FLOAT32_TARGET}x {FLOAT32_REFERENCE}).\n")
    print("\n\n".join(table(r, g, args.commit, copy, io) for g in summaries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
