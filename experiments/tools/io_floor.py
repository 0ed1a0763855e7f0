"""What reading Q, K and V once and writing O once takes on this GPU, at every shape of the
prefill grid (GPU): the device time of one elementwise kernel with exactly that traffic,
torch.addcmul(q, k, v, out=o), timed as the kernel benchmark times a call (CUDA-graph
replays, the L2 flushed before each call, harness/device_timing.py).

    python experiments/tools/io_floor.py --out results/<gpu>/experiments/<log>_io_floor.csv

Any attention call must move those bytes, and an elementwise kernel is about the fastest way
to move them: every thread independent, no chain of dependent steps. So its time is a floor
under a prefill call that includes what the memory floor of harness/prefill_floor.py leaves
out at small shapes: the launch inside a graph and the latency of HBM, which bytes over the
copy rate do not see. `grid_floor.py --io-floor CSV` sets issue 43's targets against it.

Writes one row per shape and dtype (GPU, driver, torch and commit with it); nothing goes to
results/ unless --out says so.
"""
from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project, when run as a script
from backends import arguments, environment, precision  # noqa: E402
from harness.device_timing import DeviceTimer, pooled  # noqa: E402
from harness.study import GRID_SHAPES, Shape  # noqa: E402

FIELDS = ("gpu", "driver", "torch", "commit", "date", "dtype", "B", "H", "T", "us_device_median", "us_device_min",
          "us_device_max", "rounds")
MAX_ROUNDS = 20  # each round is about 50 ms of GPU time per shape and dtype


def time_io(timer: DeviceTimer, shape: Shape, dtype: str, rounds: int) -> tuple[float, float, float]:
    """(median, min, max) µs of torch.addcmul(q, k, v, out=o) over `rounds` rounds of replays,
    q, k, v and o (B, T, C) each, contiguous."""
    q, k, v, o = (torch.rand(shape.B, shape.T, shape.C, device="cuda").to(precision.torch_dtype(dtype))
                  for _ in range(4))  # (B, T, C)

    def call() -> torch.Tensor:
        return torch.addcmul(q, k, v, out=o)

    first = timer.time(call)
    timing = pooled([first, *(timer.time(call, first.repetitions) for _ in range(rounds - 1))])
    us = timing.us_device
    if not us:
        raise SystemExit(f"io_floor: {shape.describe()} {dtype}: no device time ({timing.not_captured})")
    return statistics.median(us), min(us), max(us)


def main(argv: list[str] | None = None) -> int:
    parser = arguments.OneLineParser(prog="io_floor.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=arguments.path, required=True, help="the CSV to write (a new file)")
    parser.add_argument("--dtypes", type=arguments.text, default="all",
                        help="e.g. bfloat16 or float32,bfloat16 (default: all)")
    parser.add_argument("--rounds", type=int, default=3, help=f"rounds of replays per shape (1-{MAX_ROUNDS})")
    args = parser.parse_args(argv)
    try:
        dtypes = precision.select(args.dtypes)
    except precision.UnknownDtypeError as err:
        parser.error(f"--dtypes: {err}")
    if problem := arguments.out_of_range("--rounds", args.rounds, 1, MAX_ROUNDS, "a floor needs no more"):
        parser.error(problem)
    if args.out.exists() or not args.out.parent.is_dir():
        parser.error(f"--out {args.out}: " + ("exists (a new file, so that no rows are mixed)" if args.out.exists()
                                             else "its folder does not exist"))
    if not torch.cuda.is_available():
        print("io_floor: no CUDA device is available to torch: the floor is measured on the GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    run = environment.collect(device)
    timer = DeviceTimer(device)
    with args.out.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(FIELDS)
        for dtype in dtypes:
            for shape in GRID_SHAPES:
                median, low, high = time_io(timer, shape, dtype, args.rounds)
                out.writerow((run.gpu, run.driver, run.torch, run.commit, run.date, dtype, shape.B, shape.H,
                              shape.T, f"{median:.3f}", f"{low:.3f}", f"{high:.3f}", args.rounds))
                f.flush()
                print(f"{dtype} {shape.label()} H={shape.H}: {median:.2f} µs ({low:.2f}-{high:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        print("io_floor: interrupted; the rows written so far are in --out", file=sys.stderr)
        raise SystemExit(130)
