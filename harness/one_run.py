"""The command-line arguments of the tools that read one sweep of one GPU from the committed
results (experiments/tools/grid_floor.py, h23_cost_model.py): --gpu, --commit, --results-dir."""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from harness.tables import GpuResults, load


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpu", required=True, help="the GPU's folder under --results-dir")
    parser.add_argument("--commit", required=True, help="the sweep's commit: rows of other commits are left out")
    parser.add_argument("--results-dir", type=Path, default=Path("results"), help="default: results")


def load_run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> GpuResults:
    """The GPU's results; a missing folder is the parser's error (exit 2, one line)."""
    if not args.gpu or not (args.results_dir / args.gpu).is_dir():
        parser.error(f"no folder {args.results_dir / args.gpu}")
    return load(args.gpu, args.results_dir)


def copy_rate(r: GpuResults, commit: str) -> float | None:
    """The rate of the large device-to-device copy measured in that sweep (GB/s, read and
    written bytes over its time): the median over its decode rows, each of which records the
    copy of its run; None if the sweep ran no decode benchmark."""
    rates = [x.hbm_gbps for x in r.measured_decode if x.provenance.commit == commit and x.hbm_gbps]
    return statistics.median(rates) if rates else None
