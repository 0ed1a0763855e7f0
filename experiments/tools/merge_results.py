"""Merge the rows a device run brought back into the local results/ folder: each CSV's lines
that the local file lacks are appended, in the run's order; nothing is rewritten or dropped.

    python experiments/tools/merge_results.py RUN [--results-dir results]

RUN is a folder of <gpu>/<file>.csv, as a run's --results-dir is, or full_sweep.sh's
sweep_results.tgz (unpacked into a temporary folder first). A file whose header differs from
the local one's is refused: its rows would land under the wrong columns.
"""
from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
from pathlib import Path


def merge_file(source: Path, target: Path) -> int:
    """Append `source`'s lines missing from `target`; return how many were appended."""
    new_lines = source.read_text().splitlines()
    if not new_lines:
        return 0
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(new_lines) + "\n")
        return len(new_lines) - 1
    old_lines = target.read_text().splitlines()
    if old_lines and old_lines[0] != new_lines[0]:
        raise SystemExit(f"merge_results: {source}'s header differs from {target}'s; not merged")
    have = set(old_lines)
    missing = [line for line in new_lines[1:] if line not in have]
    if missing:
        with target.open("a") as out:
            out.write("".join(line + "\n" for line in missing))
    return len(missing)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the run's results folder (<gpu>/<file>.csv) or a .tgz of it")
    parser.add_argument("--results-dir", type=Path, default=Path("results"),
                        help="the local results folder to append to (default: results)")
    args = parser.parse_args(argv)
    if args.run.is_file() and args.run.name.endswith((".tgz", ".tar.gz")):
        with tempfile.TemporaryDirectory() as unpacked, tarfile.open(args.run) as archive:
            archive.extractall(unpacked, filter="data")  # no paths outside the folder
            return merge(Path(unpacked), args.results_dir, str(args.run))
    return merge(args.run, args.results_dir, str(args.run))


def merge(run_dir: Path, results_dir: Path, shown: str) -> int:
    sources = sorted(run_dir.glob("*/*.csv"))
    if not sources:
        print(f"merge_results: no <gpu>/<file>.csv in {shown}", file=sys.stderr)
        return 2
    for source in sources:
        target = results_dir / source.parent.name / source.name
        print(f"{target}: +{merge_file(source, target)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
