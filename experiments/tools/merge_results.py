"""Merge the rows a device run brought back into the local results/ folder: each CSV's lines
that the local file lacks are appended, in the run's order; nothing is rewritten or dropped.

    python experiments/tools/merge_results.py RUN [--results-dir results]

RUN is a folder of <gpu>/<file>.csv, as a run's --results-dir is, or full_sweep.sh's
sweep_results.tgz (unpacked into a temporary folder first). Refused before anything is
written: a file whose header differs from the local one's (its rows would land under the wrong
columns), and whatever cannot be merged as text: an archive that does not unpack, a CSV that is a
folder or not UTF-8, a --results-dir that is one GPU's folder or has a file in the way.
"""
from __future__ import annotations

import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project, when run as a script
from backends import arguments  # noqa: E402
from harness.cli import CommandError, no_file_in_the_way, not_a_gpu_folder  # noqa: E402

PROG = "merge_results"


def merge_file(source: Path, target: Path) -> int:
    """Append `source`'s lines missing from `target`; return how many were appended."""
    new_lines = _text(source).splitlines()
    if not new_lines:
        return 0
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(new_lines) + "\n")
        return len(new_lines) - 1
    old_text = _text(target)
    old_lines = old_text.splitlines()
    have = set(old_lines)
    missing = [line for line in new_lines[1:] if line not in have]
    if missing:
        with target.open("a") as out:
            cut_short = old_text and not old_text.endswith("\n")  # a last row cut short: not joined to the next
            out.write("\n" * bool(cut_short) + "".join(line + "\n" for line in missing))
    return len(missing)


def _text(path: Path) -> str:
    """`path`'s text; CommandError where it is a folder or not UTF-8 (the csv files are)."""
    if path.is_dir():
        raise CommandError(f"{path} is a folder, not a CSV file: move it away; nothing was merged")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise CommandError(f"{path} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}): "
                           "nothing was merged") from None
    except OSError as err:
        raise CommandError(f"{path}: cannot read it ({err.strerror}); nothing was merged") from None


def _same_header(source: Path, target: Path) -> None:
    """CommandError where `source` and the local file `target` both have a header and they
    differ: the rows would land under the wrong columns."""
    headers = [next(iter(_text(path).splitlines()), None) if path.exists() else None for path in (source, target)]
    if None not in headers and headers[0] != headers[1]:
        raise CommandError(f"{source}'s header differs from {target}'s (written by another version of the harness): "
                           "nothing was merged; merge it into a fresh --results-dir")


def main(argv: list[str] | None = None) -> int:
    parser = arguments.OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=arguments.path,
                        help="the run's results folder (<gpu>/<file>.csv) or a .tgz of it")
    parser.add_argument("--results-dir", type=arguments.path, default=Path("results"),
                        help="the local results folder to append to (default: results)")
    args = parser.parse_args(argv)
    try:
        not_a_gpu_folder(args.results_dir)
        no_file_in_the_way(args.results_dir, "--results-dir")
        if args.run.is_file() and args.run.name.endswith((".tgz", ".tar.gz")):
            with tempfile.TemporaryDirectory() as unpacked:
                _unpack(args.run, Path(unpacked))
                return merge(Path(unpacked), args.results_dir, str(args.run))
        return merge(args.run, args.results_dir, str(args.run))
    except CommandError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2


def _unpack(archive: Path, folder: Path) -> None:
    """`archive` into `folder`; CommandError where it is not a whole .tgz."""
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(folder, filter="data")  # no paths outside the folder
    except (tarfile.TarError, EOFError, OSError) as err:
        why = str(err).splitlines()[0].rstrip(":") or type(err).__name__  # tarfile's can run over lines
        raise CommandError(f"{archive} does not unpack as a .tgz ({why}): nothing was merged") from None


def merge(run_dir: Path, results_dir: Path, shown: str) -> int:
    sources = sorted(run_dir.glob("*/*.csv"))
    if not sources:
        print(f"{PROG}: no <gpu>/<file>.csv in {shown}", file=sys.stderr)
        return 2
    pairs = [(source, results_dir / source.parent.name / source.name) for source in sources]
    for path in (p for pair in pairs for p in pair if p.exists()):
        _text(path)  # every file readable before any is written
    for source, target in pairs:  # and every header the local one's, before any is written
        _same_header(source, target)
    for source, target in pairs:
        print(f"{target}: +{merge_file(source, target)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
