"""CSV files of measurements under <results>/<gpu>/, one schema per file.

Each file's schema is a frozen dataclass (its fields are the columns, the provenance
fields last); the writer and every reader use it, so values are parsed into their
types once, here. Rows are appended and pushed to disk one by one, so an interrupted
sweep keeps every finished row and a rerun resumes where it stopped. A damaged row (cut
short, a value that does not parse, a number that is not finite, is negative or zero where it
cannot be, or lies beyond any measurement (NUMBER_RANGE), bytes the csv module rejects) is
reported with its file and line and skipped: never drawn, never tabled. A file that cannot be
used at all (a folder in its place, unreadable, another schema) is a ResultsFileError that
names it.
"""
from __future__ import annotations

import csv
import dataclasses
import math
import os
import re
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar, Generic, TypeVar

from backends import arguments, precision
from backends.environment import Provenance
from gpt2.modes import MODES
from harness.study import FULL, RAMP, Shape

if typing.TYPE_CHECKING:
    from _csv import Reader as CsvReader  # what csv.reader returns

PROVENANCE_COLUMNS = tuple(f.name for f in dataclasses.fields(Provenance))
OK = "ok"  # the status of a measured row; any other status says why it was not measured
# The sizes a number of a results file other than zero may have: far beyond any time (µs or s),
# count, size in bytes, error or ratio the study measures on either side. Beyond them a number
# is damage, and a sum, product or ratio of such numbers could overflow to inf in a table.
NUMBER_RANGE = (1e-15, 1e15)
# A text column's only values (a row's CHOICES): the harness measures in no other dtype.
DTYPE_CHOICES: dict[str, tuple[str, ...]] = {"dtype": precision.EVERY}


class ResultsFileError(Exception):
    """A results file that cannot be used at all (another schema); the message names it."""


@dataclass(frozen=True)
class CorrectnessRow:
    """One backend at one shape and dtype against float64 computed from the same inputs; the
    bounds it was held to (float32: fixed; half precision: derived from the vendor kernels'
    errors on the same inputs, harness/reference.py)."""

    backend: str
    dtype: str  # backends/precision.py: float32, bfloat16, float16
    B: int
    H: int
    T: int
    rel_err: float
    max_abs_err: float
    rel_tol: float
    abs_tol: float
    passed: bool
    provenance: Provenance

    # Numbers that may be zero (an exact result, a tolerance); every other number of every row
    # is a time, a count or a size that a measurement cannot have none of.
    MAY_BE_ZERO: ClassVar[tuple[str, ...]] = ("rel_err", "max_abs_err", "rel_tol", "abs_tol")
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = DTYPE_CHOICES


@dataclass(frozen=True)
class KernelRow:
    """One backend at one shape. Device times: GPU time per call without host gaps (CUDA
    graph replays of reps x [L2 flush, call] minus the flushes alone); call time: CUDA
    events around one eager call, what a Python caller pays."""

    backend: str
    dtype: str  # of q, k, v and out (backends/precision.py)
    B: int
    H: int
    T: int
    d: int
    status: str
    notes: str | None  # e.g. why the device time is missing (not capturable)
    reps: int | None  # calls per graph replay
    replays: int | None  # timed replays of each graph, per round
    rounds: int | None  # rounds of the backends in alternating order, each with its replays
    us_device_median: float | None
    us_device_min: float | None
    us_device_max: float | None
    us_call_median: float | None
    tflops: float | None  # from the device median
    reference: str | None  # the kernel reference of this dtype (registry.kernel_reference)
    ratio_to_reference: float | None  # device median / the reference's at this shape and dtype, same run
    peak: str | None  # which peak: "float32 FMA" (float32 rows), "bfloat16 tensor" / "float16 tensor"
    peak_tflops: float | None  # measured in the same run
    fraction_of_peak: float | None
    provenance: Provenance

    # The spread of one measurement, (min, median, max): all three empty or all there.
    SPREADS: ClassVar[tuple[tuple[str, str, str], ...]] = (("us_device_min", "us_device_median", "us_device_max"),)
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = DTYPE_CHOICES

    @property
    def shape(self) -> Shape:
        return Shape(self.B, self.H, self.T)

    @property
    def measured(self) -> bool:
        return self.status == OK


@dataclass(frozen=True)
class E2ERow:
    """One backend generating `tokens` tokens per sequence (prompt included) for `batch`
    sequences at once, greedy, in generation mode `mode`, with the model (weights and
    activations) in `dtype`."""

    backend: str
    dtype: str  # backends/precision.py
    mode: str  # gpt2/modes.py: "recompute" (the original study's) or "kv-cache"
    batch: int  # sequences generated at once
    tokens: int
    prompt_tokens: int
    status: str
    notes: str | None
    parts: str | None  # a composite backend's versions as this run ran them, e.g. "h23 + d08" (the study row)
    n_layer: int
    n_head: int
    n_embd: int
    replays: int | None  # timed graph replays
    eager_runs: int | None
    seconds_gpu_median: float | None  # replays of the whole generation captured as one CUDA graph
    seconds_gpu_min: float | None
    seconds_gpu_max: float | None
    seconds_eager_median: float | None  # the generation run from Python, host included
    seconds_eager_min: float | None
    seconds_eager_max: float | None
    tokens_per_second: float | None  # generated tokens of all `batch` sequences over the GPU median
    peak_memory_bytes: int | None
    tokens_sha256: str | None  # of the generated ids, so comparisons survive a resume
    same_tokens_as_naive: bool | None  # as the same-dtype naive run's (float32's rule)
    token_agreement: float | None  # fraction of generated tokens equal to the same-dtype naive run's, position-wise
    # Teacher-forced on the float32 naive run's longest sequence: |logits - float32 naive logits|
    logits_max_abs_err: float | None
    logits_mean_abs_err: float | None
    accuracy_check: bool | None  # float32: same tokens as naive; half: logits error within 1.25x naive's
    graph_tokens_match_eager: bool | None
    seconds_floor_gpu: float | None  # the same graph with attention replaced by a no-op stand-in
    attention_gpu_share: float | None  # 1 - floor / GPU median
    weights: str
    provenance: Provenance

    # Numbers that may be below zero (a floor measured above a fast backend's time); every
    # other number of every row is a time, a count, a size, an error or a ratio, never negative.
    SIGNED: ClassVar[tuple[str, ...]] = ("attention_gpu_share",)
    MAY_BE_ZERO: ClassVar[tuple[str, ...]] = ("token_agreement", "logits_max_abs_err", "logits_mean_abs_err",
                                              *SIGNED)
    SPREADS: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("seconds_gpu_min", "seconds_gpu_median", "seconds_gpu_max"),
        ("seconds_eager_min", "seconds_eager_median", "seconds_eager_max"))
    LESS: ClassVar[tuple[tuple[str, str], ...]] = (("prompt_tokens", "tokens"),)  # (a, b): a < b (a token generated)
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {**DTYPE_CHOICES, "mode": tuple(m.name for m in MODES)}

    @property
    def measured(self) -> bool:
        return self.status == OK

    def model_description(self) -> str:
        return f"{self.n_layer} layers, {self.n_head} heads, width {self.n_embd}"

    @property
    def generated_in_batch(self) -> int:
        """Tokens generated (not given) in all `batch` sequences: what tokens/s counts."""
        return self.batch * (self.tokens - self.prompt_tokens)

    @property
    def eager_tokens_per_second(self) -> float | None:
        """Generated tokens of every sequence over the eager median (host included)."""
        return self.generated_in_batch / self.seconds_eager_median if self.seconds_eager_median else None


@dataclass(frozen=True)
class StageRow:
    """One stage of one ./run_all.sh run: its wall time and exit status."""

    run: str  # when the run started (UTC, ISO 8601): every stage of a run has the same
    mode: str  # "full" or "quick"
    backends: str  # the --backends selection: "all", "quick" or a list
    dtypes: str  # the --dtypes selection: "all" or a list
    stage: str  # "build", "correctness gate", "kernel benchmark", "end-to-end"
    seconds: float
    exit_status: int
    provenance: Provenance

    MAY_BE_ZERO: ClassVar[tuple[str, ...]] = ("seconds", "exit_status")  # a stage under a second; success


@dataclass(frozen=True)
class DecodeCorrectnessRow:
    """One backend's decode op on one case of the decode gate (harness/decode_gate.py) against
    float64 computed from the same inputs, with the bounds it was held to."""

    backend: str
    dtype: str
    case: str  # the gate case's name: what it exercises (ragged lengths, strided caches, ...)
    B: int
    H: int
    S: int  # rows of each cache
    rel_err: float
    max_abs_err: float
    rel_tol: float
    abs_tol: float
    passed: bool
    provenance: Provenance

    MAY_BE_ZERO: ClassVar[tuple[str, ...]] = CorrectnessRow.MAY_BE_ZERO
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = DTYPE_CHOICES


@dataclass(frozen=True)
class DecodeRow:
    """One backend's decode op at one shape: device time per call (CUDA graph replays of
    reps x [L2 flush, call] minus the flushes alone), the K and V bytes it must read, and the
    rate against the HBM bandwidth measured in the same run (a large device-to-device copy)."""

    backend: str
    dtype: str
    B: int
    H: int
    S: int  # rows of each cache
    lengths: str  # harness/study.py: "full" (every sequence attends to S rows) or "ramp"
    status: str
    notes: str | None
    reps: int | None
    replays: int | None
    rounds: int | None
    us_device_median: float | None
    us_device_min: float | None
    us_device_max: float | None
    us_call_median: float | None
    bytes_read: int  # K and V bytes of every attended row
    gbps: float | None  # bytes_read over the device median, in GB/s (10^9 bytes)
    hbm_gbps: float | None  # the copy's rate in the same run: read + written bytes over its time
    fraction_of_hbm: float | None
    reference: str | None  # the fastest PyTorch backend at this shape and dtype in the same run
    ratio_to_reference: float | None  # device median / the reference's

    provenance: Provenance

    SPREADS: ClassVar[tuple[tuple[str, str, str], ...]] = KernelRow.SPREADS
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {**DTYPE_CHOICES, "lengths": (FULL, RAMP)}

    @property
    def measured(self) -> bool:
        return self.status == OK


R = TypeVar("R")


@dataclass(frozen=True)
class ReadResult(Generic[R]):
    rows: list[R]
    problems: list[str]  # "path:line: what is wrong", one per skipped row


class Table(Generic[R]):
    """One kind of results file: its row type, file name and the fields that key a row."""

    def __init__(self, row_type: type[R], file_name: str, key: tuple[str, ...]) -> None:
        self.row_type = row_type
        self.file_name = file_name
        self.key_fields = key
        hints = typing.get_type_hints(row_type)
        self._types = {f.name: hints[f.name] for f in dataclasses.fields(row_type) if f.name != "provenance"}
        signed = frozenset(getattr(row_type, "SIGNED", ()))
        zero = frozenset(getattr(row_type, "MAY_BE_ZERO", ()))
        choices: dict[str, tuple[str, ...]] = getattr(row_type, "CHOICES", {})
        self._spreads: tuple[tuple[str, str, str], ...] = getattr(row_type, "SPREADS", ())
        self._less: tuple[tuple[str, str], ...] = getattr(row_type, "LESS", ())
        # One parser per column, made once: a results file has tens of thousands of cells.
        self._parsers = {name: _cell_parser(kind, name, name in signed, name in zero, choices.get(name))
                         for name, kind in self._types.items()}
        self._provenance_parsers = {name: _cell_parser(str, name) for name in PROVENANCE_COLUMNS}
        self.columns = tuple(self._types) + PROVENANCE_COLUMNS

    def path(self, results_dir: Path, slug: str) -> Path:
        return results_dir / slug / self.file_name

    def key(self, row: R) -> tuple:
        return tuple(getattr(row, name) for name in self.key_fields)

    # -- reading ---------------------------------------------------------------------
    def read(self, path: Path) -> ReadResult[R]:
        """Every row of `path` that parses; damaged ones are listed in `problems`."""
        self._check_file(path)
        if not path.exists() or path.stat().st_size == 0:
            return ReadResult([], [])
        rows: list[R] = []
        problems: list[str] = []
        try:
            cut_short = _cut_short(path)
            with _open_text(path) as f:
                reader = csv.reader(f)
                header = self._read_header(path, reader)
                last: tuple[str, bool] | None = None  # the last row's lines, and whether it was read
                for fields, lines in _records(reader, path, problems):
                    if not fields:
                        continue
                    try:
                        _check_text(fields)
                        rows.append(self._parse(dict(zip(header, fields)), len(fields), len(header)))
                        last = lines, True
                    except ValueError as err:
                        problems.append(_skipped(path, lines, err))
                        last = lines, False
        except OSError as err:
            raise ResultsFileError(f"{path}: cannot read it ({err.strerror or err})") from None
        if cut_short and last is not None and last[1]:
            # The writer ends every row with a line break: one without is a write cut short, which
            # may have cut its last value (a date, a commit) and still have every field.
            rows.pop()
            problems.append(_skipped(path, last[0], ValueError("cut short: the file ends inside it, with no line "
                                                               "break after it")))
        return ReadResult(rows, problems)

    def _check_file(self, path: Path) -> None:
        """ResultsFileError where something other than a file stands at `path` (a folder)."""
        if path.is_dir():
            raise ResultsFileError(f"{path} is a folder, not a {self.file_name} file: move it away (a GPU's "
                                   "results are files in its folder)")

    def _read_header(self, path: Path, reader: typing.Iterator[list[str]]) -> list[str]:
        """The first row of `reader`, checked: ResultsFileError for a damaged header or the
        columns of another schema."""
        try:
            header = next(reader, [])
            _check_text(header)
        except (csv.Error, ValueError) as err:
            raise ResultsFileError(f"{path}:1: the header is damaged ({err}): move the file away, or measure "
                                   "again into a fresh folder (e.g. --results-dir)") from None
        self._check_columns(path, header)
        return header

    def _check_columns(self, path: Path, header: list[str]) -> None:
        missing = [c for c in self.columns if c not in header]
        extra = [c for c in header if c not in self.columns]
        repeated = arguments.repeated(header)
        if missing or extra or repeated:
            detail = "; ".join(part for part in (
                f"missing {', '.join(missing)}" if missing else "",
                f"unknown {', '.join(extra)}" if extra else "",
                f"repeated {', '.join(repeated)}" if repeated else "") if part)
            raise ResultsFileError(f"{path} does not have the columns of a {self.file_name} file ({detail}): it was "
                                   "written by another version of the harness. Measure again into a fresh folder "
                                   "(e.g. --results-dir), or move the file away.")

    def _parse(self, raw: dict[str, str], count: int, expected: int) -> R:
        if count != expected:
            raise ValueError(f"{count} of {expected} fields")
        values = {name: parse(raw[name]) for name, parse in self._parsers.items()}
        for spread in self._spreads:
            _check_spread(spread, values)
        for smaller, larger in self._less:
            if not values[smaller] < values[larger]:  # type: ignore[operator]
                raise ValueError(f"{smaller}={values[smaller]} is not below {larger}={values[larger]}")
        provenance = Provenance(**{name: parse(raw[name]) for name, parse in self._provenance_parsers.items()})
        return self.row_type(**values, provenance=provenance)

    # -- writing ---------------------------------------------------------------------
    def append(self, path: Path, row: R) -> None:
        """Append one row and push it to disk before returning."""
        self._check_file(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists() or path.stat().st_size == 0
        if not new:
            with _open_text(path) as f:
                self._read_header(path, csv.reader(f))
            cut_short = _cut_short(path)  # a row cut short by a crash: start a new line
        with path.open("a", newline="", encoding="utf-8") as f:
            if not new and cut_short:
                f.write("\n")
            writer = csv.writer(f)
            if new:
                writer.writerow(self.columns)
            flat = {**{name: getattr(row, name) for name in self._types},
                    **dataclasses.asdict(row.provenance)}  # type: ignore[attr-defined]
            writer.writerow([_format(flat[c]) for c in self.columns])
            f.flush()
            os.fsync(f.fileno())


def _records(reader: CsvReader, path: Path, problems: list[str]) -> typing.Iterator[tuple[list[str], str]]:
    """The rows `reader` reads after the header, each with the lines of the file it spans ('7';
    '2-37' where an unclosed quote joined lines, all of them lost with the row). One the csv
    module rejects (a field longer than csv.field_size_limit(), as an unclosed quote makes of
    the rest of a file) is listed in `problems` instead of raising csv.Error, and the reader
    goes on at the next line."""
    while True:
        line = reader.line_num
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            if reader.line_num == line:  # it read nothing, so it would fail the same way again
                problems.append(f"{path}:{line + 1}: skipped the rest of the file ({err})")
                return
            problems.append(_skipped(path, _lines(line + 1, reader.line_num), err))
            continue
        yield fields, _lines(line + 1, reader.line_num)


def _cut_short(path: Path) -> bool:
    """Whether the file at `path` (not empty) ends without a line break, as a write cut short
    leaves it (the writer ends every row with one)."""
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"


def _lines(first: int, last: int) -> str:
    return str(last) if first >= last else f"{first}-{last}"


def _skipped(path: Path, lines: str, why: Exception) -> str:
    return f"{path}:{lines}: skipped a damaged row ({why})"


def _open_text(path: Path) -> typing.TextIO:
    """`path` as UTF-8 text for csv, without the byte-order mark a spreadsheet may save it with
    (it would read as part of the first column's name); a byte that is not UTF-8 reads as a
    surrogate, which _check_text reports with its row instead of failing the whole file."""
    return path.open(newline="", encoding="utf-8-sig", errors="surrogateescape")


_NOT_WRITTEN = re.compile("[\0\udc80-\udcff]")  # bytes the writer never writes (_check_text)


def _check_text(fields: list[str]) -> None:
    """ValueError naming the first byte of `fields` the writer never writes: one that was not
    UTF-8 (see _open_text), or a NUL (the zeros a crash or a bad copy can leave in a file;
    csv reads it as text from Python 3.11 on, where before it raised csv.Error)."""
    found = _NOT_WRITTEN.search("".join(fields))
    if found:
        char = found.group()
        raise ValueError("a NUL byte" if char == "\0" else f"not UTF-8 text: byte 0x{ord(char) - 0xdc00:02x}")


def _cell_parser(kind: object, name: str, signed: bool = False, may_be_zero: bool = False,
                 choices: tuple[str, ...] | None = None) -> Callable[[str], object]:
    """The parser of column `name`: a CSV cell as `kind` (str, int, float, bool, or one of them |
    None), ValueError otherwise; a number must be finite, at least zero unless `signed`, other
    than zero unless `may_be_zero`, and within NUMBER_RANGE in size; a text one of `choices`
    where they are given."""
    optional = False
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        optional, kind = True, args[0]
    convert = {bool: _boolean, int: int, float: float}.get(kind)  # type: ignore[call-overload]
    kind_name = getattr(kind, "__name__", kind)

    def parse(text: str) -> object:
        if text == "":
            if optional:
                return None
            raise ValueError(f"{name} is empty")
        if convert is None:
            if choices is not None and text not in choices:
                raise ValueError(f"{name}={text!r} is not one of {', '.join(choices)}")
            return text
        try:
            value = convert(text)
        except ValueError:
            raise ValueError(f"{name}={text!r} is not a {kind_name}") from None
        if convert is not _boolean:
            _check_number(name, text, value, signed, may_be_zero)
        return value

    return parse


def _check_number(name: str, text: str, value: float, signed: bool, may_be_zero: bool) -> None:
    """ValueError unless `value` (read from `text`) is a number column `name` can hold."""
    smallest, largest = NUMBER_RANGE
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name}={text!r} is not a finite number")
    if value < 0 and not signed:
        raise ValueError(f"{name}={text!r} is negative")
    if value == 0 and not may_be_zero:
        raise ValueError(f"{name}={text!r} is zero, which no measurement of it can be")
    if value != 0 and not smallest <= abs(value) <= largest:
        raise ValueError(f"{name}={text!r} is beyond any measurement (a size between {smallest:g} and {largest:g})")


def _check_spread(names: tuple[str, str, str], values: dict[str, object]) -> None:
    """ValueError unless the (min, median, max) columns `names` are all empty or all there."""
    empty = [name for name in names if values[name] is None]
    if empty and len(empty) < len(names):
        raise ValueError(f"{', '.join(empty)} empty beside {', '.join(n for n in names if n not in empty)}")


def _boolean(text: str) -> bool:
    if text not in ("True", "False"):
        raise ValueError(text)
    return text == "True"


def _format(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.7g}"
    return str(value)


CORRECTNESS = Table(CorrectnessRow, "correctness.csv", ("backend", "dtype", "B", "H", "T"))
KERNELS = Table(KernelRow, "kernels.csv", ("backend", "dtype", "B", "H", "T"))
E2E = Table(E2ERow, "e2e.csv", ("backend", "dtype", "mode", "batch", "prompt_tokens", "tokens"))
STAGES = Table(StageRow, "stages.csv", ("run", "stage"))
DECODE_CORRECTNESS = Table(DecodeCorrectnessRow, "decode_correctness.csv", ("backend", "dtype", "case"))
DECODE_TIMES = Table(DecodeRow, "decode.csv", ("backend", "dtype", "B", "H", "S", "lengths"))
TABLES = (CORRECTNESS, KERNELS, E2E, STAGES, DECODE_CORRECTNESS, DECODE_TIMES)  # every results file of a GPU's folder


def read_reporting(table: Table[R], path: Path) -> list[R]:
    """The rows of `path`; each damaged row is reported on stderr, then skipped."""
    result = table.read(path)
    for problem in result.problems:
        print(f"warning: {problem}", file=sys.stderr)
    return result.rows


def done(table: Table[R], path: Path, provenance: Provenance) -> dict[tuple, R]:
    """The rows of `path` already measured on this setup (same GPU, driver, CUDA, torch,
    commit), by key; the latest row wins."""
    return {table.key(r): r for r in read_reporting(table, path)
            if r.provenance.same_setup(provenance)}  # type: ignore[attr-defined]


def gpu_slugs(results_dir: Path) -> list[str]:
    """GPUs with results under `results_dir`, one folder each."""
    if not results_dir.is_dir():
        return []
    return sorted(p.name for p in results_dir.iterdir() if p.is_dir())
