"""The prefill grid on one GPU (harness/study.py GRID_SHAPES): per track and dtype, the track's
version that the grid was measured for, and at each grid shape its device time over that of the
fastest of PyTorch's kernels measured in the same run at that shape (GpuResults.kernel_vs_fastest,
the rule of every other ratio); the worst of those ratios and their geometric mean. Drawn by
harness/grid_plots.py, tabled by harness/grid_page.py.

The version shown is the last of its track with a row at one of the grid's own shapes (those the
study's shapes do not include) on this GPU: the registry's last version once a sweep has measured
it, an earlier one before. A GPU without such rows has not measured the grid yet.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from harness.results import KERNELS, KernelRow
from harness.study import GPT2_HEADS, GRID_SHAPES, GRID_SMALL_SHAPES, GRID_WIDE_SHAPES, KERNEL_SHAPES, Shape
from harness.tables import GpuResults, Reference, Track, latest, tracks

NOT_MEASURED = "not measured on this GPU yet"
# The shapes only the grid measures: where a GPU's rows say it has measured the grid.
GRID_OWN_SHAPES = tuple(s for s in GRID_SHAPES if s not in KERNEL_SHAPES)


def shape_text(shape: Shape) -> str:
    """'B=16 T=256' at GPT-2 small's heads, 'B=16 T=256 H=20' at others."""
    return shape.label() if shape.H == GPT2_HEADS else f"{shape.label()} H={shape.H}"


@dataclass(frozen=True)
class GridCell:
    """One grid shape: the version's row there (None: not measured) and its ratio to the
    fastest of PyTorch's kernels of the same run (None: no row, no device time, or no PyTorch
    kernel timed in that run there)."""

    shape: Shape
    row: KernelRow | None
    ratio: float | None
    reference: Reference | None


@dataclass(frozen=True)
class GridSummary:
    """A track's grid in one dtype on one GPU."""

    track: Track
    dtype: str
    version: str | None  # the version the cells are of; None: the grid is not measured here
    cells: tuple[GridCell, ...]  # one per GRID_SHAPES shape, in its order

    @property
    def measured(self) -> tuple[GridCell, ...]:
        """The cells with a ratio."""
        return tuple(c for c in self.cells if c.ratio is not None)

    @property
    def blank(self) -> tuple[GridCell, ...]:
        """The cells without a ratio."""
        return tuple(c for c in self.cells if c.ratio is None)

    def worst(self) -> GridCell | None:
        """The cell of the largest ratio (the first in grid order on a tie); None without any."""
        return max(self.measured, key=lambda c: c.ratio, default=None)  # type: ignore[arg-type, return-value]

    def geomean(self) -> float | None:
        """The geometric mean of the ratios; None without any."""
        ratios = [c.ratio for c in self.measured]
        return math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else None  # type: ignore[arg-type]

    def cell(self, shape: Shape) -> GridCell:
        return next(c for c in self.cells if c.shape == shape)

    def small(self) -> tuple[GridCell, ...]:
        """The cells at GPT-2 small's heads (B x T)."""
        return tuple(self.cell(s) for s in GRID_SMALL_SHAPES)

    def wide(self) -> tuple[GridCell, ...]:
        """The cells at GPT-2 medium's, large's and xl's heads."""
        return tuple(self.cell(s) for s in GRID_WIDE_SHAPES)


def _rows(r: GpuResults, commit: str | None) -> list[KernelRow]:
    """The rows a grid is drawn from: the tables' (the latest of each measurement), or the
    latest of each among the rows measured at one sweep's `commit` (a later version's grid may
    have taken the tables' place, and a later sweep may have measured the same shapes again)."""
    if commit is None:
        return r.kernels
    return latest((x for x in r.measured_kernels if x.provenance.commit == commit), KERNELS)


def grid_version(r: GpuResults, track: Track, dtype: str, rows: list[KernelRow]) -> str | None:
    """The last of the track's versions with a row among `rows` (_rows) at one of the grid's own
    shapes in `dtype`."""
    return r.last_measured(track.versions, dtype, [x for x in rows if x.shape in GRID_OWN_SHAPES])


def grid_summary(r: GpuResults, track: Track, dtype: str, commit: str | None = None) -> GridSummary:
    rows = _rows(r, commit)
    version = grid_version(r, track, dtype, rows)
    found = {(x.backend, x.dtype, x.shape): x for x in rows}
    cells = []
    for shape in GRID_SHAPES:
        row = found.get((version, dtype, shape)) if version else None
        ratio, reference = r.kernel_vs_fastest(row)
        cells.append(GridCell(shape, row, ratio, reference))
    return GridSummary(track, dtype, version, tuple(cells))


def grid_summaries(r: GpuResults, commit: str | None = None) -> list[GridSummary]:
    """Every track in each of its dtypes that this GPU has rows in (measured on the grid or
    not), in the study's order; of one sweep's rows where `commit` is given (grid_summary)."""
    return [grid_summary(r, t, d, commit) for t in tracks() for d in t.dtypes if r.has(d)]


def grid_dtypes(r: GpuResults) -> list[str]:
    """The dtypes in which this GPU has measured a track's grid."""
    return [s.dtype for s in grid_summaries(r) if s.version is not None]
