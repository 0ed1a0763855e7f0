"""One GPU's results, loaded once for plots and tables: the latest row per measurement (what
the tables show), every measured row by the run that measured it (what a ratio of two
backends' times divides by: the other backend's row of the same run), and the study's two
tracks as the registry defines them. Beside the prefill kernels and the original setup's
generation: the decode benchmark (decode.csv), its gate (decode_correctness.csv) and the
KV-cache generation rows of e2e.csv, each of which a GPU may not have yet (empty lists)."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Generic, Hashable, Iterable, Sequence, TypeVar

from backends import precision, registry
from backends.environment import Provenance
from gpt2.modes import KV_CACHE, RECOMPUTE
from harness import kernel_plan
from harness.markdown import DASH
from harness.results import (CORRECTNESS, DECODE_CORRECTNESS, DECODE_TIMES, E2E, KERNELS, STAGES, CorrectnessRow,
                             DecodeCorrectnessRow, DecodeRow, E2ERow, KernelRow, ResultsFileError, StageRow, Table,
                             gpu_slugs)
from harness.study import KERNEL_SHAPES, DecodeShape, KvPlan, Shape

R = TypeVar("R", KernelRow, E2ERow, CorrectnessRow, DecodeRow, DecodeCorrectnessRow)
Timed = TypeVar("Timed", KernelRow, E2ERow, DecodeRow)
Shown = KernelRow | E2ERow | DecodeRow  # a row a table shows


def backend_rank(name: str) -> int:
    """Registry order (baselines, then versions); unknown names last."""
    order = registry.names()
    return order.index(name) if name in order else len(order)


def dtype_rank(name: str) -> int:
    """The study's order of dtypes (float32, bfloat16, float16); unknown names last."""
    return precision.EVERY.index(name) if name in precision.EVERY else len(precision.EVERY)


def registry_row(name: str) -> registry.Backend | None:
    """The registry row of `name`, or None for a backend the registry no longer has."""
    try:
        return registry.get(name)
    except registry.UnknownBackendError:
        return None


def prefill_backends() -> list[str]:
    """The rows the prefill benchmarks measure, in registry order: the baselines and the
    prefill versions (not a composite row, whose parts are measured alone)."""
    return [b.name for b in registry.providing(registry.BACKENDS, registry.PREFILL)]


def baselines(kind: registry.OpKind = registry.PREFILL) -> list[str]:
    """PyTorch's own kernels of `kind` (naive, the SDPA backends, flex-attention), in registry
    order: the options a ratio's reference is the fastest of."""
    return registry.baseline_names(kind)


def study_pair() -> registry.StudyPair | None:
    """The registry's row of the study's own kernels for KV-cache generation (a composite)."""
    return next((b for b in registry.BACKENDS if isinstance(b, registry.StudyPair)), None)


def decode_track() -> list[str]:
    """The decode versions (d01, ...), in registry order."""
    return [v.name for v in registry.decode_versions()]


def is_version(name: str) -> bool:
    row = registry_row(name)
    return row is not None and row.is_version


@dataclass(frozen=True)
class Track:
    """The versions of one precision track (float32: v01...; half precision: h01...), in
    registry order, and the dtypes they run in (the study's order: the first is the one the
    figures draw)."""

    dtypes: tuple[str, ...]
    versions: tuple[str, ...]

    @property
    def dtype(self) -> str:
        return self.dtypes[0]

    @property
    def half_precision(self) -> bool:
        return all(precision.is_half(d) for d in self.dtypes)

    @property
    def title(self) -> str:
        """'float32' or 'half precision (bfloat16)': the track and the dtype its figures draw."""
        return f"half precision ({self.dtype})" if self.half_precision else self.dtype

    def emphasised(self, count: int) -> tuple[str, ...]:
        """The last `count` steps: what the figures draw strongly."""
        return self.versions[-count:]

    def span(self) -> str:
        """'v01–v18'."""
        return f"{self.versions[0]}–{self.versions[-1]}" if len(self.versions) > 1 else self.versions[0]


def tracks() -> list[Track]:
    """The registry's versions grouped by the dtypes they accept, in registry order."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for version in registry.versions():
        groups.setdefault(tuple(sorted(version.dtypes, key=dtype_rank)), []).append(version.name)
    return [Track(dtypes, tuple(names)) for dtypes, names in groups.items()]


def track_of(name: str) -> Track | None:
    return next((t for t in tracks() if name in t.versions), None)


def name_ranges(names: Iterable[str]) -> str:
    """Backend names in registry order, runs of consecutive versions of one track joined:
    'sdpa-efficient, v01–v18'."""
    order = registry.names()
    ordered = sorted(set(names), key=backend_rank)
    parts: list[list[str]] = []
    for name in ordered:
        previous = parts[-1][-1] if parts else None
        if (previous is not None and is_version(name) and is_version(previous) and name in order
                and previous in order and order.index(name) == order.index(previous) + 1
                and track_of(name) == track_of(previous)):
            parts[-1].append(name)
        else:
            parts.append([name])
    return ", ".join(p[0] if len(p) == 1 else (f"{p[0]}, {p[1]}" if len(p) == 2 else f"{p[0]}–{p[-1]}")
                     for p in parts)


def kv_cache_row(row: E2ERow) -> bool:
    """A generation with a KV cache (any batch and prompt): the KV-cache tables and figures."""
    return row.mode == KV_CACHE.name


def original_setup(row: E2ERow) -> bool:
    """The original study's generation: recompute mode, one sequence. The end-to-end tables and
    figures show these rows; the other modes and batches are kept apart (GpuResults.e2e_every_mode)."""
    return row.mode == RECOMPUTE.name and row.batch == 1


def stored_ratio(row: KernelRow) -> float | None:
    """The row's device time over the registry's kernel reference of its dtype at its shape
    (sdpa-efficient in float32, sdpa-cudnn in half precision), as the benchmark stored it (the
    reference measured in the same run); None where it has none, or where it was measured
    against another reference than the registry names now. The version notes show it, named;
    every other ratio is to the fastest of PyTorch's kernels (GpuResults.kernel_reference)."""
    return row.ratio_to_reference if row.reference == registry.kernel_reference(row.dtype) else None


@dataclass(frozen=True)
class Reference:
    """What a ratio divides by: the fastest of PyTorch's kernels (baselines()) that one run
    measured at one shape (or generation length) in one dtype."""

    backend: str  # the fastest
    time: float  # its device time (µs) or GPU time (s)
    missing: tuple[str, ...]  # baselines that take the dtype but have no time from that run there

    def ratio(self, time: float | None) -> float | None:
        return None if not time else time / self.time


class SameRun(Generic[Timed]):
    """Measured rows of one kind by (backend, dtype, where, run), the latest last (where one run
    wrote a key twice, the row shown is the one found), and the times PyTorch's kernels had in
    each run: what a ratio divides by. `where` is the shape or plan a row was measured at."""

    def __init__(self, rows: Iterable[Timed], where: Callable[[Timed], Hashable],
                 time: Callable[[Timed], float | None], candidates: Callable[[str], Sequence[str]]) -> None:
        self._where, self._candidates = where, candidates
        self._rows = {(r.backend, r.dtype, where(r), r.provenance.setup()): r for r in rows}
        self._timed: dict[tuple, list[tuple[str, float]]] = {}
        for (backend, dtype, at, setup), row in self._rows.items():
            if backend in candidates(dtype) and (value := time(row)):
                self._timed.setdefault((dtype, at, setup), []).append((backend, value))

    def in_run(self, backend: str, dtype: str, where: Hashable, provenance: Provenance) -> Timed | None:
        return self._rows.get((backend, dtype, where, provenance.setup()))

    def reference(self, row: Timed) -> Reference | None:
        """The fastest of PyTorch's kernels that `row`'s run timed where and in the dtype it was
        measured (the row itself, for a baseline, among them); None where that run timed none."""
        timed = self._timed.get((row.dtype, self._where(row), row.provenance.setup()), [])
        return _fastest(timed, self._candidates(row.dtype))


def _candidates(kinds: Sequence[registry.OpKind], end_to_end: bool) -> Callable[[str], Sequence[str]]:
    """dtype -> PyTorch's kernels that a run of `kinds` times in it (end to end: those the
    end-to-end sweep runs): what a Reference's `missing` lists when a run lacks some."""
    @functools.cache
    def names(dtype: str) -> tuple[str, ...]:
        rows = [registry.get(name) for name in baselines(kinds[0])]
        return tuple(b.name for b in rows if all(b.provides(kind) for kind in kinds) and b.accepts(dtype)
                     and not (end_to_end and b.end_to_end))
    return names


def _kernel_time(row: KernelRow | DecodeRow) -> float | None:
    return row.us_device_median


def _gpu_time(row: E2ERow) -> float | None:
    return row.seconds_gpu_median


def kv_plan(row: E2ERow) -> KvPlan:
    return KvPlan(row.batch, row.prompt_tokens)


def decode_shape(row: DecodeRow) -> DecodeShape:
    return DecodeShape(row.B, row.H, row.S, row.lengths)


@dataclass
class GpuResults:
    slug: str
    gpu: str
    kernels: list[KernelRow]  # measured rows, latest per (backend, dtype, B, H, T); by dtype, then registry order
    # measured rows of the original setup (recompute, batch 1), latest per (backend, dtype, tokens); by
    # dtype, then registry order
    e2e: list[E2ERow]
    # (backend, dtype) -> why it was not measured (its status rows)
    not_measured: dict[tuple[str, str], str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # damaged rows that were skipped
    stages: list[StageRow] = field(default_factory=list)  # ./run_all.sh runs at the results' commits, by start
    correctness: list[CorrectnessRow] = field(default_factory=list)  # latest per key, any status
    # Every measured row, the latest and the ones a later run replaced: a ratio of two backends'
    # times pairs a shown row with the other backend's row of the same run (see *_in_run).
    measured_kernels: list[KernelRow] = field(default_factory=list, repr=False)
    measured_e2e: list[E2ERow] = field(default_factory=list, repr=False)
    # Measured rows of every generation mode and batch, latest per key (results.E2E), by dtype, then
    # registry order: the KV-cache rows beside the original setup's
    e2e_every_mode: list[E2ERow] = field(default_factory=list, repr=False)
    # The decode benchmark's measured rows, latest per key (results.DECODE_TIMES), by dtype, then
    # registry order; every measured one (for ratios); the decode gate's rows, latest per case
    decode: list[DecodeRow] = field(default_factory=list)
    measured_decode: list[DecodeRow] = field(default_factory=list, repr=False)
    decode_correctness: list[DecodeCorrectnessRow] = field(default_factory=list, repr=False)
    # Every measured row of every generation mode, latest or not (the KV-cache rows' ratios)
    measured_e2e_every_mode: list[E2ERow] = field(default_factory=list, repr=False)
    # (backend, dtype) -> why it has no decode rows / no KV-cache rows (their status rows)
    decode_not_measured: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)
    kv_not_measured: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)
    _kernel_runs: SameRun[KernelRow] = field(init=False, repr=False)
    _e2e_runs: SameRun[E2ERow] = field(init=False, repr=False)
    _decode_runs: SameRun[DecodeRow] = field(init=False, repr=False)
    _kv_runs: SameRun[E2ERow] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        prefill, decode = [registry.PREFILL], [registry.DECODE]
        self._kernel_runs = SameRun([*self.measured_kernels, *self.kernels], lambda r: r.shape, _kernel_time,
                                    _candidates(prefill, end_to_end=False))
        self._e2e_runs = SameRun([*self.measured_e2e, *self.e2e], lambda r: r.tokens, _gpu_time,
                                 _candidates(prefill, end_to_end=True))
        self._decode_runs = SameRun([*self.measured_decode, *self.decode], decode_shape, _kernel_time,
                                    _candidates(decode, end_to_end=False))
        self._kv_runs = SameRun([r for r in [*self.measured_e2e_every_mode, *self.e2e_every_mode] if kv_cache_row(r)],
                                lambda r: (kv_plan(r), r.tokens), _gpu_time,
                                _candidates([*prefill, *decode], end_to_end=True))

    @property
    def empty(self) -> bool:
        return not self.kernels and not self.e2e and not self.decode and not self.kv

    def dtypes(self) -> list[str]:
        """The dtypes with measured rows, in the study's order."""
        return sorted({r.dtype for r in [*self.kernels, *self.e2e]}, key=dtype_rank)

    def has(self, dtype: str) -> bool:
        return dtype in self.dtypes()

    def kernel(self, backend: str, shape: Shape, dtype: str) -> KernelRow | None:
        return next((r for r in self.kernels if r.backend == backend and r.shape == shape and r.dtype == dtype),
                    None)

    def kernel_in_run(self, backend: str, shape: Shape, dtype: str, provenance: Provenance) -> KernelRow | None:
        """`backend`'s measured row at `shape` and `dtype` from the run of `provenance` (Provenance.setup),
        latest or not; None if that run has none."""
        return self._kernel_runs.in_run(backend, dtype, shape, provenance)

    def kernel_rows(self, shape: Shape, dtype: str) -> list[KernelRow]:
        return [r for r in self.kernels if r.shape == shape and r.dtype == dtype]

    @functools.cached_property
    def study_kernels(self) -> list[KernelRow]:
        """The rows at the study's shapes (KERNEL_SHAPES), which every version is measured at: what
        the figures against T draw (the prefill grid, measured for a few backends, has its own)."""
        return [r for r in self.kernels if r.shape in KERNEL_SHAPES]

    def kernel_series(self, backend: str, dtype: str, B: int) -> list[KernelRow]:
        """One backend's rows at batch B and the study's shapes with a device time, by T."""
        return sorted((r for r in self.study_kernels if r.backend == backend and r.dtype == dtype and r.B == B
                       and r.us_device_median), key=lambda r: r.T)

    def kernel_shapes(self, dtype: str | None = None) -> list[Shape]:
        return sorted({r.shape for r in self.kernels if dtype is None or r.dtype == dtype})

    def end_to_end(self, backend: str, tokens: int, dtype: str) -> E2ERow | None:
        return next((r for r in self.e2e if r.backend == backend and r.tokens == tokens and r.dtype == dtype), None)

    def end_to_end_in_run(self, backend: str, tokens: int, dtype: str, provenance: Provenance) -> E2ERow | None:
        """`backend`'s measured row at `tokens` and `dtype` from the run of `provenance` (Provenance.setup),
        latest or not; None if that run has none."""
        return self._e2e_runs.in_run(backend, dtype, tokens, provenance)

    def kernel_time_ratio(self, row: KernelRow, other: str, dtype: str) -> float | None:
        """`row`'s device time over `other`'s in `dtype` at the same shape, measured in the same
        run; None where either has no device time (`other`: none from that run)."""
        ref = self.kernel_in_run(other, row.shape, dtype, row.provenance)
        if not row.us_device_median or ref is None or not ref.us_device_median:
            return None
        return row.us_device_median / ref.us_device_median

    def kernel_reference(self, row: KernelRow) -> Reference | None:
        """The fastest of PyTorch's kernels that `row`'s run timed at its shape and dtype (the
        row itself, for a baseline, among them); None where that run timed none there."""
        return self._kernel_runs.reference(row)

    def kernel_vs_fastest(self, row: KernelRow | None) -> tuple[float | None, Reference | None]:
        """`row`'s device time over its reference's (kernel_reference), and the reference."""
        reference = self.kernel_reference(row) if row else None
        return (reference.ratio(row.us_device_median) if reference and row else None), reference

    def end_to_end_reference(self, row: E2ERow) -> Reference | None:
        """The fastest of PyTorch's kernels in GPT-2 that `row`'s run timed at its length and
        dtype (GPU time); None where that run timed none there."""
        return self._e2e_runs.reference(row)

    def end_to_end_vs_fastest(self, row: E2ERow | None) -> tuple[float | None, Reference | None]:
        """`row`'s GPU time over its reference's (end_to_end_reference), and the reference."""
        reference = self.end_to_end_reference(row) if row else None
        return (reference.ratio(row.seconds_gpu_median) if reference and row else None), reference

    # -- decode ----------------------------------------------------------------------------------
    def decode_dtypes(self) -> list[str]:
        """The dtypes with decode rows, in the study's order."""
        return sorted({r.dtype for r in self.decode}, key=dtype_rank)

    def decode_row(self, backend: str, shape: DecodeShape, dtype: str) -> DecodeRow | None:
        return next((r for r in self.decode if r.backend == backend and r.dtype == dtype
                     and decode_shape(r) == shape), None)

    def decode_in_run(self, backend: str, shape: DecodeShape, dtype: str, provenance: Provenance) -> DecodeRow | None:
        """`backend`'s measured decode row at `shape` and `dtype` from the run of `provenance`."""
        return self._decode_runs.in_run(backend, dtype, shape, provenance)

    def decode_shapes(self, dtype: str) -> list[DecodeShape]:
        return sorted({decode_shape(r) for r in self.decode if r.dtype == dtype})

    def decode_vs_fastest(self, row: DecodeRow | None) -> tuple[float | None, Reference | None]:
        """`row`'s device time over that of the fastest of PyTorch's decode kernels its run timed
        at its shape and dtype, and that reference (None where the run timed none there)."""
        reference = self._decode_runs.reference(row) if row else None
        return (reference.ratio(row.us_device_median) if reference and row else None), reference

    def last_decode(self, dtype: str) -> str | None:
        """The last decode version with a decode row in `dtype` on this GPU."""
        return self.last_measured(decode_track(), dtype, self.decode)

    # -- generation with a KV cache -------------------------------------------------------------
    @property
    def kv(self) -> list[E2ERow]:
        """The KV-cache rows shown: latest per key, measured."""
        return [r for r in self.e2e_every_mode if kv_cache_row(r)]

    def kv_dtypes(self) -> list[str]:
        return sorted({r.dtype for r in self.kv}, key=dtype_rank)

    def kv_plans(self, dtype: str) -> list[KvPlan]:
        """The (batch, prompt) plans with rows in `dtype`: prompt, then batch."""
        return sorted({kv_plan(r) for r in self.kv if r.dtype == dtype},
                      key=lambda p: (p.prompt_tokens, p.batch))

    def kv_row(self, backend: str, plan: KvPlan, dtype: str) -> E2ERow | None:
        """`backend`'s latest row of `plan` in `dtype` (its longest generation)."""
        rows = [r for r in self.kv if r.backend == backend and r.dtype == dtype and kv_plan(r) == plan]
        return max(rows, key=lambda r: r.tokens, default=None)

    def study_parts(self, dtype: str) -> str:
        """'h23 + d08': the versions the study row's KV-cache rows shown in `dtype` ran, as the
        rows recorded them (' / ' between several); '–' where none did."""
        pair = study_pair()
        if pair is None:
            return DASH
        plans = {kv_plan(x) for x in self.kv if x.backend == pair.name and x.dtype == dtype}
        shown = (self.kv_row(pair.name, plan, dtype) for plan in plans)
        return " / ".join(sorted({x.parts for x in shown if x is not None and x.parts})) or DASH

    def kv_vs_fastest(self, row: E2ERow | None) -> tuple[float | None, Reference | None]:
        """`row`'s GPU time over that of the fastest of PyTorch's kernels generating the same plan
        and length in the same run, and that reference (None where the run timed none)."""
        reference = self._kv_runs.reference(row) if row else None
        return (reference.ratio(row.seconds_gpu_median) if reference and row else None), reference

    def e2e_rows(self, tokens: int, dtype: str) -> list[E2ERow]:
        return [r for r in self.e2e if r.tokens == tokens and r.dtype == dtype]

    def e2e_series(self, backend: str, dtype: str) -> list[E2ERow]:
        return sorted((r for r in self.e2e if r.backend == backend and r.dtype == dtype), key=lambda r: r.tokens)

    def backends(self, rows: Iterable[KernelRow | E2ERow]) -> list[str]:
        return sorted({r.backend for r in rows}, key=backend_rank)

    def notes(self, dtype: str | None = None) -> dict[str, str]:
        """backend -> its notes (e.g. not capturable), from the measured rows (of `dtype`)."""
        found: dict[str, str] = {}
        for row in [*self.kernels, *self.e2e]:
            if row.notes and row.backend not in found and dtype in (None, row.dtype):
                found[row.backend] = row.notes
        return found

    def not_measured_in(self, dtype: str) -> dict[str, str]:
        """backend -> why it has no rows in `dtype`, leaving out the versions of another track
        (a float32 version is not 'missing' from the half-precision tables)."""
        return {backend: why for (backend, d), why in sorted(self.not_measured.items(),
                                                             key=lambda item: backend_rank(item[0][0]))
                if d == dtype and not (is_version(backend) and not registry.get(backend).accepts(dtype))}

    def max_rel_err(self, backend: str, dtype: str) -> float | None:
        """The largest relative error against float64 over the correctness gate's shapes."""
        errors = [r.rel_err for r in self.correctness if r.backend == backend and r.dtype == dtype]
        return max(errors) if errors else None

    def last_measured(self, versions: Sequence[str], dtype: str,
                      rows: Sequence[KernelRow | E2ERow | DecodeRow] | None = None) -> str | None:
        """The last of `versions` (a track, in order) with a measured row in `dtype` on this GPU
        (among `rows`; by default the prefill kernels and the original setup's generations):
        what the headline and the figures show of a track (its newest step, unless this GPU's
        sweeps predate it)."""
        measured = {x.backend for x in (rows if rows is not None else [*self.kernels, *self.e2e]) if x.dtype == dtype}
        return next((v for v in reversed(versions) if v in measured), None)

    def shown_rows(self) -> list[Shown]:
        """Every row a table of this GPU shows: kernels, generations of every mode, decode."""
        return [*self.kernels, *self.e2e, *self.kv, *self.decode]

    def provenance_line(self, dtype: str | None = None, rows: Sequence[Shown] | None = None) -> str:
        """GPU, driver, CUDA, torch, commits, dates and weights of `rows` (by default the prefill
        kernels and the original setup's generations) in `dtype` (any, for None)."""
        rows = [r for r in (rows if rows is not None else [*self.kernels, *self.e2e]) if dtype in (None, r.dtype)]
        if not rows:
            return self.gpu
        commits = ", ".join(sorted({r.provenance.commit for r in rows}))
        dates = sorted(r.provenance.date[:10] for r in rows)
        when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
        last = max(rows, key=lambda r: r.provenance.date).provenance
        weights = sorted({r.weights for r in rows if isinstance(r, E2ERow)})
        return (f"{self.gpu}, driver {last.driver}, CUDA {last.cuda}, torch {last.torch}, commit {commits}, {when}"
                + (f", weights {', '.join(weights)}" if weights else ""))

    def commits(self) -> list[tuple[str, str, list[Shown]]]:
        """(commit, dates, the shown rows measured at it), oldest first: where each number in
        the tables comes from."""
        by_commit: dict[str, list[Shown]] = {}
        for row in self.shown_rows():
            by_commit.setdefault(row.provenance.commit, []).append(row)
        found = []
        for commit, rows in by_commit.items():
            dates = sorted(r.provenance.date[:10] for r in rows)
            found.append((commit, dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}", rows))
        return sorted(found, key=lambda item: min(r.provenance.date for r in item[2]))


def _fastest(times: Sequence[tuple[str, float]], candidates: Sequence[str]) -> Reference | None:
    """The Reference among (baseline, time) pairs of one run, ties to registry order; the
    `candidates` (the baselines such a run times in the dtype) not among them are its `missing`."""
    if not times:
        return None
    backend, time = min(times, key=lambda item: (item[1], backend_rank(item[0])))
    timed = {name for name, _ in times}
    return Reference(backend, time, tuple(b for b in candidates if b not in timed))


def _not_measured(rows: Iterable[KernelRow | E2ERow | DecodeRow]) -> dict[tuple[str, str], str]:
    """(backend, dtype) -> the statuses of its rows that were not measured, joined."""
    found: dict[tuple[str, str], str] = {}
    for row in rows:
        key = (row.backend, row.dtype)
        reasons = found.get(key, "")
        if not row.measured and row.status not in reasons:
            found[key] = f"{reasons}; {row.status}" if reasons else row.status
    return found


def superseded_left_out(kernels: list[KernelRow]) -> list[KernelRow]:
    """The kernel rows the tables show: a version that was its track's last keeps its rows at
    the prefill grid's shapes in kernels.csv, but out of the tables (and so out of the
    provenance) once a later version of its track has a row at that shape and dtype: the
    full benchmark (harness/kernel_plan.py) no longer measures it there. A GPU whose sweeps
    predate the later version still shows the earlier one's grid."""
    measured = {(r.backend, r.dtype, r.shape) for r in kernels}
    known = set(registry.names())
    later: dict[str, list[str] | None] = {}  # a version off the grid -> its track's later versions

    def later_versions(name: str) -> list[str] | None:
        """None for what is never superseded: a baseline, a version on the grid, a name the
        registry no longer has (nothing says it is not wanted)."""
        if name not in later:
            backend = registry.get(name) if name in known else None
            if backend is None or not backend.is_version or kernel_plan.on_grid(backend):
                later[name] = None
            else:
                track = registry.track_of(backend)
                later[name] = [v.name for v in track[track.index(backend) + 1:]]
        return later[name]

    def superseded(row: KernelRow) -> bool:
        names = later_versions(row.backend)
        if names is None or row.shape in kernel_plan.FULL.every:  # off the grid: measured at `every` alone
            return False
        return any((name, row.dtype, row.shape) in measured for name in names)

    return [r for r in kernels if not superseded(r)]


def latest(rows: Iterable[R], table: Table[R]) -> list[R]:
    """The latest row (by date) of each of `table`'s keys, by dtype, then registry order."""
    newest: dict[tuple, R] = {}
    for row in sorted(rows, key=lambda r: r.provenance.date):
        newest[table.key(row)] = row
    return sorted(newest.values(), key=lambda r: (dtype_rank(r.dtype), backend_rank(r.backend)))


def load(slug: str, results_dir: Path) -> GpuResults:
    """The results of one GPU folder. Raises ResultsFileError for a file of another schema
    or a folder that mixes GPUs."""
    problems: list[str] = []
    loaded = {}
    every: dict[str, list] = {}  # file name -> its rows, latest or not
    for table in (KERNELS, E2E, CORRECTNESS, DECODE_TIMES, DECODE_CORRECTNESS):
        read = table.read(table.path(results_dir, slug))
        problems += read.problems
        every[table.file_name] = read.rows
        loaded[table.file_name] = latest(read.rows, table)
    kernels: list[KernelRow] = superseded_left_out(loaded[KERNELS.file_name])
    e2e_every_mode: list[E2ERow] = loaded[E2E.file_name]
    decode: list[DecodeRow] = loaded[DECODE_TIMES.file_name]
    e2e = [r for r in e2e_every_mode if original_setup(r)]
    gpus = sorted({r.provenance.gpu for r in [*kernels, *e2e_every_mode, *decode]})
    if len(gpus) > 1:
        raise ResultsFileError(f"{results_dir / slug} mixes GPUs {gpus}: numbers from different GPUs never mix")
    not_measured = _not_measured([*kernels, *e2e])
    gpu = gpus[0] if gpus else slug
    commits = {r.provenance.commit for r in [*kernels, *e2e_every_mode, *decode] if r.measured}
    stages = STAGES.read(STAGES.path(results_dir, slug))
    problems += stages.problems
    runs = sorted((r for r in stages.rows if r.provenance.commit in commits and r.provenance.gpu == gpu),
                  key=lambda r: r.run)
    correctness = [r for r in loaded[CORRECTNESS.file_name] if r.provenance.gpu == gpu]
    decode_correctness = [r for r in loaded[DECODE_CORRECTNESS.file_name] if r.provenance.gpu == gpu]
    every_e2e = [r for r in every[E2E.file_name] if r.measured]
    return GpuResults(slug, gpu, [r for r in kernels if r.measured], [r for r in e2e if r.measured], not_measured,
                      problems, runs, correctness, [r for r in every[KERNELS.file_name] if r.measured],
                      [r for r in every_e2e if original_setup(r)], [r for r in e2e_every_mode if r.measured],
                      decode=[r for r in decode if r.measured],
                      measured_decode=[r for r in every[DECODE_TIMES.file_name] if r.measured],
                      decode_correctness=decode_correctness, measured_e2e_every_mode=every_e2e,
                      decode_not_measured=_not_measured(decode),
                      kv_not_measured=_not_measured(r for r in e2e_every_mode if kv_cache_row(r)))


def load_all(results_dir: Path) -> list[GpuResults]:
    """Every GPU folder under `results_dir` that holds results."""
    return [r for r in (load(slug, results_dir) for slug in gpu_slugs(results_dir)) if not r.empty or r.not_measured]
