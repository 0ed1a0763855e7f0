"""The prefill grid in the generated pages: its section of a GPU's page (harness/gpu_page.py's
SECTIONS) and its line per GPU in the README's results block (harness/report.py). Per track and
dtype, the grid's worst ratio (with its shape and the PyTorch kernel it divides by) and the
geometric mean of its ratios (harness/grid.py), from the CSVs; a GPU whose rows do not reach the
grid says it has not measured it yet.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from backends.registry import HEAD_DIM
from harness.grid import NOT_MEASURED, GridSummary, grid_summaries, shape_text
from harness.grid_plots import PER_DTYPE, blank_note
from harness.markdown import DASH, Footnotes, link, num, table
from harness.reference_text import reference_cell, with_footnotes
from harness.study import (GPT2_HEADS, GRID_BATCHES, GRID_LENGTHS, GRID_SHAPES, WIDE_BATCHES, WIDE_LENGTHS,
                           WIDE_MODELS)
from harness.tables import GpuResults, baselines

if TYPE_CHECKING:
    from harness.gpu_page import Page

GRID_TITLE = "## Prefill grid"
GRID_FIGURE = PER_DTYPE[0]  # prefill_grid_<dtype>.png
NOT_YET = f"{NOT_MEASURED[0].upper()}{NOT_MEASURED[1:]}"


def grid_description() -> str:
    """'47 shapes: B 1–64 × T 64–1024 at GPT-2 small's H=12, and GPT-2 medium, large and xl's heads at
    B 1, 16 × T 256, 1024'."""
    return (f"{len(GRID_SHAPES)} shapes: B {GRID_BATCHES[0]}–{GRID_BATCHES[-1]} × T {GRID_LENGTHS[0]}–"
            f"{GRID_LENGTHS[-1]} at GPT-2 small's H={GPT2_HEADS}, and GPT-2 {', '.join(WIDE_MODELS[:-1])} and "
            f"{WIDE_MODELS[-1]}'s heads at B {', '.join(map(str, WIDE_BATCHES))} × T "
            f"{', '.join(map(str, WIDE_LENGTHS))}")


def _worst_cells(s: GridSummary, notes: Footnotes) -> list[str]:
    worst = s.worst()
    if worst is None:
        return [DASH, DASH, DASH]
    return [f"{worst.ratio:.2f}×", shape_text(worst.shape), reference_cell(worst.reference, notes)]


def grid_table(summaries: Sequence[GridSummary]) -> str:
    """A row per track and dtype: the version, the shapes with a ratio, the worst ratio where and
    against what, and the geometric mean."""
    notes = Footnotes()
    body = []
    for s in summaries:
        if s.version is None:
            body.append([s.track.span(), s.dtype, NOT_MEASURED, DASH, DASH, DASH, DASH, DASH])
            continue
        body.append([s.track.span(), s.dtype, f"`{s.version}`", f"{len(s.measured)} of {len(s.cells)}",
                     *_worst_cells(s, notes), num(s.geomean(), "{:.2f}×")])
    header = ["track", "dtype", "version", "shapes with a ratio", "worst", "at", "fastest PyTorch there",
              "geometric mean"]
    return with_footnotes(table(header, body), notes)


def _figures(page: Page, summaries: Sequence[GridSummary]) -> list[str]:
    dtypes = list(dict.fromkeys(s.dtype for s in summaries if s.version is not None))
    paths = [page.plots_dir / page.r.slug / GRID_FIGURE.name(d) for d in dtypes]
    return [f"![{path.name}]({link(path, page.path)})" for path in paths if path.exists()]


def grid_section(page: Page) -> str:
    summaries = grid_summaries(page.r)
    if not any(s.version is not None for s in summaries):
        return (f"{GRID_TITLE}\n\n{NOT_YET}: `kernels.csv` has no rows at the grid's own shapes "
                f"(`python -m harness bench-kernels` writes them, or `--grid-only` alone).")
    intro = (f"The kernel benchmark's grid ({grid_description()}; d={HEAD_DIM}, causal), measured for PyTorch's "
             f"kernels and each prefill track's last version. Per track and dtype, at each shape: the version's "
             f"device time over that of the fastest of PyTorch's kernels ({', '.join(f'`{b}`' for b in baselines())}) "
             f"measured in the same run (same GPU, driver, CUDA, torch and commit), below 1 faster; the worst of "
             f"those ratios, where, and against which kernel, and their geometric mean. The figures have every cell.")
    blanks = [note for s in summaries if s.version is not None and (note := blank_note(s, "No ratio"))]
    return "\n\n".join([GRID_TITLE, intro, grid_table(summaries), *blanks, *_figures(page, summaries)])


def grid_line(r: GpuResults) -> str:
    """The README's line of one GPU: 'v29 float32: worst 0.62× (B=64 T=128), geometric mean 0.41×; ...',
    or that it has not measured the grid yet."""
    parts = []
    for s in grid_summaries(r):
        worst, mean = s.worst(), s.geomean()
        if s.version is None or worst is None or mean is None:
            continue
        partial = "" if not s.blank else f" over {len(s.measured)} of {len(s.cells)} shapes"
        parts.append(f"`{s.version}` {s.dtype}: worst {worst.ratio:.2f}× ({shape_text(worst.shape)}), geometric "
                     f"mean {mean:.2f}×{partial}")
    return "; ".join(parts) if parts else NOT_MEASURED
