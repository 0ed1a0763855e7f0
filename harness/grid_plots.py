"""The prefill grid's figure, one per GPU and dtype (<plots>/<gpu>/prefill_grid_<dtype>.png), in the
style of harness/plots.py: a heatmap over (B, T) at GPT-2 small's heads of the track's version's
device time over that of the fastest of PyTorch's kernels measured in the same run at that shape
(harness/grid.py), the ratio written in each cell, and a small second panel of GPT-2 medium's,
large's and xl's heads. The colours diverge at 1 (blue: faster than PyTorch, red: slower) on a
log scale, so that 0.5x and 2x are equally strong; a cell without a ratio is hatched, without a
number, and the footer lists it. A GPU that has not measured the grid gets no such figure.
"""
from __future__ import annotations

import math
from typing import Sequence

from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from backends import registry
from gpt2.config import SIZES
from harness.grid import GridCell, GridSummary, grid_dtypes, grid_summaries, shape_text
from harness.plots import AXIS_PT, PANEL_PT, TICK_PT, PerDtypeFigure, _frame
from harness.study import GPT2_HEADS, GRID_BATCHES, GRID_LENGTHS, WIDE_BATCHES, WIDE_LENGTHS, WIDE_MODELS
from harness.tables import GpuResults, baselines, name_ranges

COLOURS = "RdBu_r"  # diverging: blue below 1 (faster than PyTorch), red above
MIN_SPAN = 1.5  # the colour scale spans at least 1/1.5 to 1.5, so that 0.97 is not drawn dark
BLANK = {"facecolor": "0.95", "edgecolor": "0.7", "hatch": "///", "linewidth": 0.0}
CELL_W, CELL_H = 0.72, 0.36  # inches
DARK = 0.55  # a cell whose colour is this far from white (of the scale's half) gets white text
COLOURBAR_TICKS = (0.1, 0.2, 0.25, 0.33, 0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 10.0)


def _span(summaries: Sequence[GridSummary]) -> float:
    """The colour scale's end: the largest ratio or inverse ratio drawn, at least MIN_SPAN."""
    extremes = [max(c.ratio, 1 / c.ratio) for s in summaries for c in s.measured]  # type: ignore[operator]
    return max([MIN_SPAN, *extremes]) * 1.02


def _wide_label(B: int, H: int) -> str:
    model = next(m for m in WIDE_MODELS if SIZES[m].n_head == H)
    return f"{model}, H={H}, B={B}"


def _heatmap(ax: Axes, cells: Sequence[Sequence[GridCell]], norm: LogNorm, columns: Sequence[int],
             rows: Sequence[str]) -> None:
    """cells[i][j]: row i (top to bottom), column j; each a coloured square with its ratio, or
    hatched without a number."""
    span = math.log(norm.vmax)
    for i, line in enumerate(cells):
        for j, cell in enumerate(line):
            if cell.ratio is None:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, **BLANK))
                continue
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=ScalarMappable(norm, COLOURS).to_rgba(
                cell.ratio), edgecolor="white", linewidth=1.0))
            dark = abs(math.log(cell.ratio)) / span > DARK
            ax.text(j, i, f"{cell.ratio:.2f}", ha="center", va="center", fontsize=TICK_PT + 0.5,
                    color="white" if dark else "black", fontweight="bold" if cell.ratio > 1 else "normal")
    ax.set_xlim(-0.5, len(columns) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xticks(range(len(columns)), labels=[str(t) for t in columns], fontsize=TICK_PT)
    ax.set_yticks(range(len(rows)), labels=list(rows), fontsize=TICK_PT)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_xlabel("sequence length T", fontsize=AXIS_PT)


def _small_cells(s: GridSummary) -> list[list[GridCell]]:
    by_shape = {(c.shape.B, c.shape.T): c for c in s.small()}
    return [[by_shape[B, T] for T in GRID_LENGTHS] for B in GRID_BATCHES]


def _wide_cells(s: GridSummary) -> tuple[list[list[GridCell]], list[str]]:
    by_shape = {(c.shape.B, c.shape.H, c.shape.T): c for c in s.wide()}
    heads = [SIZES[m].n_head for m in WIDE_MODELS]
    cells = [[by_shape[B, H, T] for T in WIDE_LENGTHS] for H in heads for B in WIDE_BATCHES]
    return cells, [_wide_label(B, H) for H in heads for B in WIDE_BATCHES]


def summary_text(s: GridSummary) -> str:
    """'h23: worst 1.29× at B=16 T=256 (sdpa-cudnn), geometric mean 0.93× over 47 of 47 shapes.'"""
    worst, mean = s.worst(), s.geomean()
    if worst is None or mean is None:
        return f"{s.version}: no ratio at any grid shape."
    reference = f" ({worst.reference.backend})" if worst.reference else ""
    return (f"{s.version}: worst {worst.ratio:.2f}× at {shape_text(worst.shape)}{reference}, geometric mean "
            f"{mean:.2f}× over {len(s.measured)} of {len(s.cells)} shapes.")


def references_note(s: GridSummary) -> str:
    """Which of PyTorch's kernels each cell divides by: the most common with its count, the others
    with their cells; and the runs that timed only some of them."""
    by_reference: dict[str, list[GridCell]] = {}
    partial: dict[tuple[str, ...], list[GridCell]] = {}
    for cell in s.measured:
        assert cell.reference is not None  # a cell with a ratio has one
        by_reference.setdefault(cell.reference.backend, []).append(cell)
        if cell.reference.missing:
            partial.setdefault(cell.reference.missing, []).append(cell)
    ordered = sorted(by_reference.items(), key=lambda item: -len(item[1]))
    parts = [f"{name} ({len(cells)} cells)" if i == 0 else f"{name} at {', '.join(shape_text(c.shape) for c in cells)}"
             for i, (name, cells) in enumerate(ordered)]
    text = f"PyTorch's fastest in each cell's run ({s.version}, {s.dtype}): " + "; ".join(parts) + "."
    if partial:
        text += " Runs that timed only some of PyTorch's kernels: " + "; ".join(
            f"{', '.join(shape_text(c.shape) for c in cells)} (no {name_ranges(missing)})"
            for missing, cells in partial.items()) + "."
    return text


def blank_note(s: GridSummary, lead: str = "Hatched, no number") -> str:
    """The cells without a ratio (drawn hatched), named ('' where there are none)."""
    if not s.blank:
        return ""
    listed = ", ".join(shape_text(c.shape) for c in s.blank)
    return (f"{lead} ({s.version}, {s.dtype}): no ratio on this GPU at {len(s.blank)} of {len(s.cells)} shapes (not "
            f"measured, no device time, or no PyTorch kernel timed in that run there): {listed}.")


def grid_figure(r: GpuResults, dtype: str) -> Figure | None:
    """Per track measured on the grid in `dtype` (one in practice: float32's, or half
    precision's), the B x T heatmap at GPT-2 small's heads and the wider heads beside it."""
    shown = [s for s in grid_summaries(r) if s.dtype == dtype and s.version is not None]
    if not shown:
        return None
    norm = LogNorm(vmin=1 / _span(shown), vmax=_span(shown))
    rows = [x.row for s in shown for x in s.cells if x.row is not None]
    wide_rows = _wide_cells(shown[0])[1]
    label_w = max(len(label) for label in wide_rows) * TICK_PT * 0.6 / 72 + 0.2
    versions = " and ".join(str(s.version) for s in shown)
    pytorch = [name for name in baselines() if registry.get(name).accepts(dtype)]
    frame = _frame(title=f"The prefill grid: {versions}'s kernel time over PyTorch's fastest, same run, {dtype} — "
                         f"{r.gpu}",
                   subtitle=" ".join(summary_text(s) for s in shown),
                   notes=[f"Each cell: the version's device time per call (median of CUDA-graph replays, L2 flushed "
                          f"before each call) over that of the fastest of PyTorch's kernels ({', '.join(pytorch)}) "
                          f"measured in the same run at that shape; d={registry.HEAD_DIM}, causal. Below 1 (blue) is "
                          f"faster than PyTorch, above 1 (red, bold) slower; the colours are on a log scale.",
                          *(references_note(s) for s in shown), *(blank_note(s) for s in shown)],
                   source=r.provenance_line(dtype, rows), cols=2, rows=[len(GRID_BATCHES) * CELL_H] * len(shown),
                   panel_w=[len(GRID_LENGTHS) * CELL_W, len(WIDE_LENGTHS) * CELL_W], left=0.75, right=1.0,
                   wspace=label_w + 0.35, hspace=0.9, bottom=0.55)
    for s, (small, wide) in zip(shown, frame.axes):
        _heatmap(small, _small_cells(s), norm, GRID_LENGTHS, [f"B={B}" for B in GRID_BATCHES])
        small.set_title(f"{s.version}, {dtype}: GPT-2 small, H={GPT2_HEADS}", fontsize=PANEL_PT, loc="left")
        small.set_ylabel("batch B", fontsize=AXIS_PT)
        cells, labels = _wide_cells(s)
        _heatmap(wide, cells, norm, WIDE_LENGTHS, labels)
        wide.set_title("wider heads", fontsize=PANEL_PT, loc="left")
    _colourbar(frame.fig, frame.axes[0][1], frame.axes[-1][1], norm)
    return frame.fig


def _colourbar(fig: Figure, top: Axes, bottom: Axes, norm: LogNorm) -> None:
    """A vertical colour bar right of the wide panels, labelled in ratios."""
    upper, lower = top.get_position(), bottom.get_position()
    width = fig.get_figwidth()
    ax = fig.add_axes((upper.x1 + 0.2 / width, lower.y0, 0.14 / width, upper.y1 - lower.y0))
    bar = fig.colorbar(ScalarMappable(norm, COLOURS), cax=ax)
    ticks = [t for t in COLOURBAR_TICKS if norm.vmin <= t <= norm.vmax]
    bar.ax.yaxis.set_major_locator(FixedLocator(ticks))
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}×"))
    bar.ax.yaxis.set_minor_locator(NullLocator())
    bar.ax.tick_params(labelsize=TICK_PT)
    bar.outline.set_visible(False)


PER_DTYPE = (PerDtypeFigure("prefill_grid", "kernel rows at the prefill grid's shapes", grid_dtypes, grid_figure),)
