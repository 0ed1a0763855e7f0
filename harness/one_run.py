"""The command-line arguments of the tools that read one sweep of one GPU from the committed
results (experiments/tools/grid_floor.py, h23_cost_model.py): --gpu, --commit, --results-dir."""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from backends import arguments
from harness.results import ResultsFileError
from harness.tables import GpuResults, load


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpu", type=arguments.text, required=True, help="the GPU's folder under --results-dir")
    parser.add_argument("--commit", type=arguments.text, required=True,
                        help="the sweep's commit: rows of other commits are left out")
    parser.add_argument("--results-dir", type=arguments.path, default=Path("results"), help="default: results")


def load_run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> GpuResults:
    """The GPU's results; a missing folder, or a results file that cannot be used at all, is the
    parser's error (exit 2, one line with arguments.OneLineParser); each damaged row is a warning
    on stderr, and left out."""
    if not (args.results_dir / args.gpu).is_dir():
        parser.error(f"no folder {args.results_dir / args.gpu}")
    if args.gpu in (".", "..") or Path(args.gpu).name != args.gpu:
        parser.error(f"--gpu {args.gpu!r}: name one GPU's folder under {args.results_dir}, not a path")
    try:
        r = load(args.gpu, args.results_dir)
    except ResultsFileError as err:
        parser.error(str(err))
    for problem in r.problems:
        print(f"warning: {problem}", file=sys.stderr)
    return r


def copy_rate(r: GpuResults, commit: str) -> float | None:
    """The rate of the large device-to-device copy measured in that sweep (GB/s, read and
    written bytes over its time): the median over its decode rows, each of which records the
    copy of its run; None if the sweep ran no decode benchmark."""
    rates = [x.hbm_gbps for x in r.measured_decode if x.provenance.commit == commit and x.hbm_gbps]
    return statistics.median(rates) if rates else None
