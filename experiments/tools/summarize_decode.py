"""Print decode.csv rows as a table per dtype: us (GB/s, ratio to the fastest baseline).

    python experiments/tools/summarize_decode.py results/nvidia-h200/decode.csv
    python experiments/tools/summarize_decode.py $OUT/res/*/decode.csv    # one table per file

Reads the rows as they are (a run's file or the committed one); no GPU.
"""
from __future__ import annotations

import collections
import csv
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project, when run as a script
from backends import arguments  # noqa: E402

PROG = "summarize_decode.py"
COLUMNS = ("backend", "dtype", "B", "S", "lengths", "status", "us_device_median", "gbps", "hbm_gbps",
           "ratio_to_reference")


class NotDecodeRows(ValueError):
    """A file this script cannot read as decode.csv's rows; the message names it (and the line)."""


def read_rows(path: Path) -> list[dict[str, str]]:
    """decode.csv's rows at `path`; NotDecodeRows for a file that is missing, a folder, empty,
    unreadable or another CSV."""
    if path.is_dir():
        raise NotDecodeRows(f"{path} is a folder, not a decode.csv file")
    if not path.exists():
        raise NotDecodeRows(f"{path}: no such file")
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None:
                raise NotDecodeRows(f"{path} is empty: no header, no rows")
            missing = [c for c in COLUMNS if c not in reader.fieldnames]
            if missing:
                raise NotDecodeRows(f"{path}: not decode.csv's rows (no column {', '.join(missing)})")
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise NotDecodeRows(f"{path}: cannot be read ({err})") from None
    if not rows:
        raise NotDecodeRows(f"{path}: a header and no rows")
    return rows


def table(path: Path, rows: list[dict[str, str]]) -> list[str]:
    """The printed lines: the HBM rate, a header and a line per (dtype, B, S, lengths)."""
    by: dict[tuple[str, int, int, str], dict[str, str]] = collections.defaultdict(dict)
    names: list[str] = []
    hbm = "-"
    for line, r in enumerate(rows, 2):
        try:
            key = (r["dtype"], int(r["B"]), int(r["S"]), r["lengths"])
            if r["status"] != "ok":
                by[key][r["backend"]] = r["status"][:20]
            else:
                us = float(r["us_device_median"])
                gb = float(r["gbps"] or 0)
                ratio = r["ratio_to_reference"]
                by[key][r["backend"]] = (f"{us:8.1f} {gb:5.0f} {float(ratio):5.2f}" if ratio
                                         else f"{us:8.1f} {gb:5.0f}   -  ")
                hbm = r["hbm_gbps"]
        except (TypeError, ValueError):
            raise NotDecodeRows(f"{path}:{line}: a damaged row (a number that is not one, or a value "
                                "missing)") from None
        if r["backend"] not in names:
            names.append(r["backend"])
    out = [f"hbm {hbm}",
           f"{'dtype':9s} {'B':>3s} {'S':>6s} {'len':4s} " + " ".join(f"{n:>20s}" for n in names)]
    for key in sorted(by):
        out.append(f"{key[0]:9s} {key[1]:3d} {key[2]:6d} {key[3][:4]:4s} "
                   + " ".join(f"{by[key].get(n, ''):>20s}" for n in names))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments.OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=arguments.path, metavar="CSV",
                        help="decode.csv files (a run's or results/<gpu>/decode.csv); several: one table each")
    args = parser.parse_args(argv)
    tables = []
    for path in args.files:  # every file read before any table is printed
        try:
            tables.append((path, table(path, read_rows(path))))
        except NotDecodeRows as err:
            print(f"{PROG}: error: {err}", file=sys.stderr)
            return 2
    for i, (path, lines) in enumerate(tables):
        if len(tables) > 1:
            print(("\n" if i else "") + f"== {path}")
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
