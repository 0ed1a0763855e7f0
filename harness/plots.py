"""Figures drawn from the results (no GPU needed): per GPU into <plots>/<gpu>/, and one
figure comparing the GPUs into <plots>/.

Matplotlib is used through Figure objects with the Agg canvas (no pyplot, no global
backend). Figures are built for many series (two tracks of versions, six baselines, three
dtypes):
- small multiples: one row of panels per track (float32; half precision in bfloat16), each
  against the baselines measured in that track's dtype;
- emphasis: the last few steps of a track in strong colours, the earlier ones light; the
  baselines dashed, a colour each;
- labels at the line ends instead of legends, moved apart where they would overlap;
- log axes labelled 10, 20, 50, 100, ... (as dense as the axis has room for);
- laid out in inches (header, panels, footer), so every text lies inside the canvas: the
  tests check it.
Points are medians; whiskers span min to max (the footer says over what). A ratio of two
rows' times divides rows of the same run: a version's ratio is to the fastest of PyTorch's
kernels its run timed at that shape (GpuResults.kernel_vs_fastest), and any other pair is the row
drawn and the other's row of its run (none: no ratio, and the figure says so). Figures are
deterministic: the same results give the same bytes.
"""
from __future__ import annotations

import io
import math
import statistics
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from backends import registry
from harness.files import write_atomically
from harness.results import E2ERow, KernelRow
from harness.study import HEADLINE_SHAPES, HEADLINE_TOKENS, Shape
from harness import tables
from harness.tables import (GpuResults, Track, backend_rank, dtype_rank, is_version, name_ranges,
                            registry_row, track_of, tracks)

GPU_COMPARISON = "gpu_comparison.png"
HEADLINE_FIGURE = "headline.png"  # the README's first figure (drawn for every GPU, shown for the first)
DPI = 110
EMPHASISED_STEPS = 3  # the last steps of each track drawn strongly
MEMORY_COLUMNS = 2  # peak_memory_vs_tokens: panels (one per dtype) per row

# Type sizes (points) and the average width of a character in DejaVu Sans (in ems), for
# wrapping and margins.
TITLE_PT, SUBTITLE_PT, PANEL_PT, AXIS_PT, TICK_PT, END_PT, NOTE_PT, SOURCE_PT = 12.0, 9.5, 10.0, 9.0, 8.0, 7.5, 8.0, 7.0
CHAR_EM = 0.6
LINE = 1.3  # line height, in ems

# Colours: the last steps of a track, oldest to newest; the earlier steps; the baselines in
# registry order; the line at 1 of a ratio panel (PyTorch's fastest); the GPUs side by side.
STRONG = ("#1f77b4", "#ff7f0e", "#d62728")
LIGHT, LIGHT_TEXT = "#b4c0d0", "#7a889c"
BASELINE_COLOURS = ("#8c564b", "#7f7f7f", "#2ca02c", "#17becf", "#9467bd", "#e377c2")
BASELINE_LINES = ((0, (1, 1.5)), (0, (4, 1.5, 1, 1.5)), (0, (6, 2)), (0, (3, 1.2)), (0, (2, 1)),
                  (0, (5, 1.5, 1, 1.5, 1, 1.5)))
REFERENCE = "black"
VERSIONS = "#3a66a0"  # the versions as one line (progression)
MISSING = "#c0392b"
GPU_COLOURS = ("#1f77b4", "#e6850e", "#2ca02c", "#9467bd")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
NOT_IN_ONE_RUN = "not measured in the same run"  # a ratio panel's note for a pair it has no ratio of
PYTORCH_IN_BOTH = registry.KERNEL_REFERENCE  # precision_cost: PyTorch's kernel drawn in both precisions
# progression: a kernel panel spans its versions and PyTorch's fastest kernel, this factor wider
# each way; a baseline beyond is named at the panel's edge with its time, not drawn
# (half-precision naive at B=8 T=4096 is 40x cuDNN, and would flatten the steps near cuDNN).
PROGRESSION_MARGIN = 1.3


# -- looks ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Look:
    """How one backend's series is drawn in a panel of one dtype."""

    color: str
    linestyle: object
    marker: str
    linewidth: float
    markersize: float
    hollow: bool
    strong: bool

    def line(self) -> dict:
        return {"color": self.color, "linestyle": self.linestyle, "marker": self.marker, "linewidth": self.linewidth,
                "markersize": self.markersize, "markerfacecolor": "white" if self.hollow else self.color,
                "zorder": 3 if self.strong else 2}

    @property
    def text_color(self) -> str:
        return self.color if self.strong else LIGHT_TEXT


def look(backend: str, dtype: str) -> Look:
    """Versions: the last EMPHASISED_STEPS of their track strong (newest red), the rest light.
    Baselines: dashed, hollow markers, a colour each."""
    row = registry_row(backend)
    if row is not None and row.is_version:
        track = track_of(backend)
        strong = track.emphasised(EMPHASISED_STEPS) if track else ()
        if backend in strong:
            colour = STRONG[len(STRONG) - len(strong) + strong.index(backend)]
            return Look(colour, "-", "o", 2.0, 4.5, False, True)
        return Look(LIGHT, "-", "o", 1.1, 2.5, False, False)
    baselines = tables.baselines()
    i = baselines.index(backend) if backend in baselines else len(baselines)
    line = BASELINE_LINES[i % len(BASELINE_LINES)]
    return Look(BASELINE_COLOURS[i % len(BASELINE_COLOURS)], line, MARKERS[i % len(MARKERS)], 1.4, 4.0, True, True)


# -- text and layout -------------------------------------------------------------------------
def _width(text: str, size: float) -> float:
    """An upper estimate of a line's width, inches."""
    return len(text) * size * CHAR_EM / 72


def _wrap(text: str, width: float, size: float) -> list[str]:
    return textwrap.wrap(text, max(20, int(width * 72 / (size * CHAR_EM)))) or [""]


def _lines_height(lines: int, size: float) -> float:
    return lines * size * LINE / 72


@dataclass
class Frame:
    """A figure laid out in inches: a header (title, and room for a legend), a grid of
    panels, a footer (notes, then the provenance)."""

    fig: Figure
    axes: list[list[Axes]]
    header_bottom: float  # figure fraction: where the header ends (a legend goes just below)


def _frame(*, title: str, notes: Sequence[str], source: str, cols: int, rows: Sequence[float],
           panel_w: float | Sequence[float],
           left: float, right: float, bottom: float, wspace: float = 0.7, hspace: float = 1.0,
           header_extra: float = 0.0, sharex: bool = False, subtitle: str = "") -> Frame:
    """`rows`: each row's panel height; `left`, `right`: room beside the grid for tick labels
    and line-end labels; `bottom`: room under it for tick labels and axis labels;
    `hspace`/`wspace`: room between panels (tick labels, axis labels, panel titles). Empty
    notes are left out."""
    widths = [panel_w] * cols if isinstance(panel_w, (int, float)) else list(panel_w)
    width = left + sum(widths) + (cols - 1) * wspace + right
    text_w = width - 0.3
    title_lines = _wrap(title, text_w, TITLE_PT)
    subtitle_lines = _wrap(subtitle, text_w, SUBTITLE_PT) if subtitle else []
    note_lines = [line for note in notes if note for line in _wrap(note, text_w, NOTE_PT)]
    source_lines = _wrap(source, text_w, SOURCE_PT)
    title_h = _lines_height(len(title_lines), TITLE_PT) + _lines_height(len(subtitle_lines), SUBTITLE_PT)
    header = 0.15 + title_h + header_extra + 0.35
    footer = 0.12 + _lines_height(len(note_lines), NOTE_PT) + _lines_height(len(source_lines), SOURCE_PT) + 0.08
    height = header + sum(rows) + (len(rows) - 1) * hspace + bottom + footer
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(len(rows), cols, left=left / width, right=1 - right / width, top=1 - header / height,
                            bottom=(bottom + footer) / height, wspace=wspace / statistics.fmean(widths),
                            hspace=hspace / statistics.fmean(rows), height_ratios=list(rows), width_ratios=widths)
    axes: list[list[Axes]] = []
    for i in range(len(rows)):
        axes.append([fig.add_subplot(grid[i, j], sharex=axes[0][j] if sharex and i else None) for j in range(cols)])
    fig.text(0.12 / width, 1 - 0.15 / height, "\n".join(title_lines), fontsize=TITLE_PT, va="top", ha="left",
             linespacing=LINE)
    if subtitle_lines:
        fig.text(0.12 / width, 1 - (0.15 + _lines_height(len(title_lines), TITLE_PT)) / height,
                 "\n".join(subtitle_lines), fontsize=SUBTITLE_PT, va="top", ha="left", color="0.2", linespacing=LINE)
    fig.text(0.12 / width, (0.08 + _lines_height(len(source_lines), SOURCE_PT)) / height, "\n".join(note_lines),
             fontsize=NOTE_PT, va="bottom", ha="left", color="0.2", linespacing=LINE)
    fig.text(0.12 / width, 0.08 / height, "\n".join(source_lines), fontsize=SOURCE_PT, va="bottom", ha="left",
             color="0.45", linespacing=LINE)
    header_bottom = 1 - (0.15 + title_h + 0.05) / height
    return Frame(fig, axes, header_bottom)


def _panel_inches(ax: Axes) -> tuple[float, float]:
    box = ax.get_position()
    return box.width * ax.figure.get_figwidth(), box.height * ax.figure.get_figheight()


# -- axes ------------------------------------------------------------------------------------
def _number(value: float) -> str:
    """Tick labels: 0.05, 2, 50, 1,000, 200,000."""
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _decade_ticks(lo: float, hi: float, subs: Sequence[float]) -> list[float]:
    ticks = []
    for exponent in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        ticks += [s * 10.0 ** exponent for s in subs]
    return [t for t in ticks if lo <= t * (1 + 1e-9) and t <= hi * (1 + 1e-9)]


def _nice_linear(lo: float, hi: float) -> list[float]:
    """Evenly spaced round values in [lo, hi] (1, 2, 2.5 or 5 times a power of ten apart)."""
    span = hi - lo
    for step_mantissa in (1, 2, 2.5, 5):
        step = step_mantissa * 10.0 ** math.floor(math.log10(span / 3))
        ticks = [k * step for k in range(math.ceil(lo / step), math.floor(hi / step) + 1)]
        if 3 <= len(ticks) <= 7:
            return ticks
    return [lo, hi]


def log_axis(ax: Axes, axis: str = "y") -> None:
    """A log axis labelled in plain numbers, 1-2-5 per decade where it has room (10, 20, 50,
    100, ...), else every decade; a narrow range gets round values in between."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    length = _panel_inches(ax)[1 if axis == "y" else 0]
    label_room = (TICK_PT * 1.9 / 72) if axis == "y" else (_width(_number(hi), TICK_PT) + 0.15)
    fitting = int(length / label_room) + 1
    ticks: list[float] = []
    for subs in ((1, 2, 5), (1, 3), (1,)):
        candidate = _decade_ticks(lo, hi, subs)
        if len(candidate) <= fitting:
            ticks = candidate
            break
    if len(ticks) < 3:
        ticks = _nice_linear(lo, hi) if hi / lo < 10 else _decade_ticks(lo, hi, range(1, 10))
    target.set_major_locator(FixedLocator(ticks))
    target.set_major_formatter(FuncFormatter(lambda value, _: _number(value)))
    target.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10)), numticks=100))
    target.set_minor_formatter(NullFormatter())


def _fixed_x(ax: Axes, values: Sequence[int]) -> None:
    """A log2 x axis labelled at exactly `values` (sequence lengths, token counts)."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(list(values)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    if len(values) == 1:
        ax.set_xlim(values[0] / 1.5, values[0] * 1.5)
    else:
        ax.set_xlim(values[0] / 1.25, values[-1] * 1.25)


def _style_axes(ax: Axes, title: str) -> None:
    ax.set_title(title, fontsize=PANEL_PT, loc="left")
    ax.tick_params(labelsize=TICK_PT)
    ax.grid(alpha=0.35, which="major")
    ax.grid(alpha=0.12, which="minor")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _freeze(ax: Axes) -> None:
    """Fix the limits autoscaling chose, before anything is placed by data coordinates."""
    ax.set_xlim(ax.get_xlim())
    ax.set_ylim(ax.get_ylim())


# -- labels at line ends ---------------------------------------------------------------------
@dataclass(frozen=True)
class EndLabel:
    text: str
    y: float  # data
    x: float | None  # data; None: the axes' right edge (a horizontal line's end)
    color: str
    bold: bool = False
    optional: bool = False  # drawn only where it fits without moving far (a light line's label)


def _spread(wanted: Sequence[float], heights: Sequence[float], lo: float, hi: float) -> list[float]:
    """Centres as near `wanted` as they can be without overlapping (each label `heights`
    tall), within [lo, hi]; squeezed evenly when they do not fit."""
    order = sorted(range(len(wanted)), key=lambda i: (wanted[i], i))
    total = sum(heights)
    scale = min(1.0, (hi - lo) / total) if total else 1.0
    h = [heights[i] * scale for i in order]
    pos = [min(max(wanted[i], lo + hk / 2), hi - hk / 2) for i, hk in zip(order, h)]
    for k in range(1, len(pos)):
        pos[k] = max(pos[k], pos[k - 1] + (h[k - 1] + h[k]) / 2)
    if pos and pos[-1] > hi - h[-1] / 2:
        pos[-1] = hi - h[-1] / 2
        for k in range(len(pos) - 2, -1, -1):
            pos[k] = min(pos[k], pos[k + 1] - (h[k] + h[k + 1]) / 2)
    result = [0.0] * len(wanted)
    for k, i in enumerate(order):
        result[i] = pos[k]
    return result


def _free_spot(want: float, height: float, taken: Sequence[tuple[float, float]], lo: float,
               hi: float) -> float | None:
    """The nearest centre to `want`, at most a label's height away, where a label `height`
    tall overlaps none of `taken` (centre, height) and stays in [lo, hi]; None if none."""
    for step in (0.0, 0.35, -0.35, 0.7, -0.7, 1.0, -1.0):
        at = want + step * height
        if lo + height / 2 <= at <= hi - height / 2 and all(abs(at - c) >= (height + h) / 2 for c, h in taken):
            return at
    return None


def label_ends(ax: Axes, labels: Sequence[EndLabel], size: float = END_PT) -> None:
    """Each label just right of the axes at its line's last value, a thin leader joining it to
    its line: the others moved apart where they would overlap, then each optional one where
    it fits near its line (else left out)."""
    if not labels:
        return
    _freeze(ax)
    _, height = _panel_inches(ax)
    to_axes = ax.transAxes.inverted()
    x_left = ax.get_xlim()[0]
    wanted = [float(to_axes.transform(ax.transData.transform((x_left if lab.x is None else lab.x, lab.y)))[1])
              for lab in labels]
    heights = [_lines_height(lab.text.count("\n") + 1, size) / height for lab in labels]
    lo, hi = -0.02, 1.02
    required = [i for i, lab in enumerate(labels) if not lab.optional]
    spread = _spread([wanted[i] for i in required], [heights[i] for i in required], lo, hi)
    placed = dict(zip(required, spread))
    for i in sorted((i for i, lab in enumerate(labels) if lab.optional), key=lambda i: wanted[i]):
        spot = _free_spot(wanted[i], heights[i], [(placed[k], heights[k]) for k in placed], lo, hi)
        if spot is not None:
            placed[i] = spot
    for i, at in sorted(placed.items()):
        lab = labels[i]
        xy, coords = ((1.0, lab.y), ("axes fraction", "data")) if lab.x is None else ((lab.x, lab.y), "data")
        moved = abs(at - wanted[i]) > 0.004
        ax.annotate(lab.text, xy=xy, xycoords=coords, xytext=(1.04, at), textcoords="axes fraction",
                    fontsize=size, color=lab.color, fontweight="bold" if lab.bold else "normal", va="center",
                    ha="left", annotation_clip=False, linespacing=1.05,
                    arrowprops={"arrowstyle": "-", "color": lab.color, "lw": 0.6, "alpha": 0.6 if moved else 0.35,
                                "shrinkA": 1, "shrinkB": 2})


def _end_label_room(texts: Sequence[str], size: float = END_PT) -> float:
    """Room right of the axes for labels at the line ends, inches."""
    longest = max((_width(line, size) for text in texts for line in text.split("\n")), default=0.0)
    return 0.45 + longest


# -- what a panel shows ----------------------------------------------------------------------
def _tracks_with(r: GpuResults, has_rows: Callable[[Track], bool]) -> list[Track]:
    return [t for t in tracks() if r.has(t.dtype) and has_rows(t)]


def _panel_backends(r: GpuResults, track: Track, rows: Sequence[KernelRow | E2ERow]) -> list[str]:
    """The baselines measured in the track's dtype, then the track's versions, in registry order."""
    present = {x.backend for x in rows if x.dtype == track.dtype}
    return [b for b in sorted(present, key=backend_rank) if b in track.versions or not is_version(b)]


def _model(rows: Sequence[E2ERow]) -> str:
    row = rows[0]
    return (f"GPT-2 ({row.model_description()}), batch 1, greedy from a prompt of {row.prompt_tokens} tokens, "
            f"no KV cache")


def _eager_runs_note(runs: int | None) -> str:
    """How many eager runs the whiskers span: one run has none."""
    if runs == 1:
        return "one eager run, no whiskers"
    return f"{runs or '–'} eager runs"


def _replays_note(r: GpuResults, shown: Sequence[Track]) -> str:
    """How many timed graph replays each track's points have: 'float32: 1, bfloat16: 2'."""
    def counts(dtype: str) -> str:
        found = sorted({x.replays for x in r.e2e if x.dtype == dtype and x.replays})
        if not found:
            return "–"
        return str(found[0]) if found[0] == found[-1] else f"{found[0]} to {found[-1]}"
    return ", ".join(f"{t.dtype}: {counts(t.dtype)}" for t in shown)


def _lines_note() -> str:
    return (f"Dashed lines: PyTorch's kernels ({', '.join(tables.baselines())}), a colour each; solid: the study's "
            f"versions, the last {EMPHASISED_STEPS} of each track in colour, earlier ones light (labelled where "
            f"there is room).")


def _half_note(r: GpuResults, shown: Sequence[Track]) -> str:
    """What the figure leaves out of a track with several dtypes (float16 beside bfloat16),
    and how far apart the two are at the headline shapes."""
    notes = []
    for track in shown:
        for other in track.dtypes[1:]:
            gaps = [abs(1 / ratio - 1) for a in r.kernels if a.dtype == track.dtype and a.shape in HEADLINE_SHAPES
                    and (ratio := r.kernel_time_ratio(a, a.backend, other))]
            if gaps:
                notes.append(f"{other} is not drawn: at {' and '.join(s.label() for s in HEADLINE_SHAPES)} every "
                             f"backend's {other} time is within {100 * max(gaps):.0f}% of its {track.dtype} time of "
                             f"the same run (the GPU's page has both).")
    return " ".join(notes)


# -- per-GPU figures ---------------------------------------------------------------------------
def progression(r: GpuResults) -> Figure | None:
    """Each track's versions in order against the baselines of its dtype (horizontal lines):
    kernel device time at the headline shapes and the headline generation's GPU time."""
    measures: list[tuple[str, Shape | None]] = [(f"kernel, {s.label()}", s) for s in HEADLINE_SHAPES]
    measures.append((f"{HEADLINE_TOKENS}-token generation", None))

    def value(track: Track, backend: str, shape: Shape | None) -> KernelRow | E2ERow | None:
        return r.kernel(backend, shape, track.dtype) if shape else r.end_to_end(backend, HEADLINE_TOKENS, track.dtype)

    shown = _tracks_with(r, lambda t: any(value(t, v, s) for v in t.versions for _, s in measures))
    measures = [m for m in measures if any(value(t, b, m[1]) for t in shown for b in tables.prefill_backends())]
    if not shown or not measures:
        return None
    uncaptured = any(isinstance(x, KernelRow) and not x.us_device_median or isinstance(x, E2ERow)
                     and not x.seconds_gpu_median for t in shown for v in t.versions for _, s in measures
                     if (x := value(t, v, s)) is not None)
    # Versions this GPU has no row of (added after its last sweep): their columns stay empty.
    unmeasured = [v for t in shown for v in t.versions if not any(value(t, v, s) for _, s in measures)]
    # Room for the longest end label: a baseline's name with a six-digit time off the scale.
    room = _end_label_room([_off_scale_text(name, 888_888.0) for name in tables.baselines()])
    frame = _frame(title=f"The versions in order against PyTorch's kernels, per precision — {r.gpu}",
                   notes=[_progression_note(shown, uncaptured) + _not_measured_note(unmeasured),
                          "Dashed horizontal lines: PyTorch's kernels measured in the row's dtype (their latest "
                          "rows), the fastest labelled in bold. A kernel panel spans its versions and the fastest "
                          "of PyTorch's kernels; one beyond that is named at the panel's edge with its time (↑ "
                          "above, ↓ below).",
                          _half_note(r, shown)],
                   source=r.provenance_line(), cols=len(measures), rows=[3.0] * len(shown), panel_w=4.0, left=0.9,
                   right=room, wspace=0.95 + room, hspace=1.15, bottom=0.65)
    for track, axes in zip(shown, frame.axes):
        for ax, (title, shape) in zip(axes, measures):
            rows = {b: value(track, b, shape) for b in tables.prefill_backends()}
            _progression_panel(ax, track, {b: x for b, x in rows.items() if x is not None}, shape is not None)
            _style_axes(ax, f"{track.title}: {title}")
            ax.set_ylabel("device time per call (µs)" if shape else "GPU time (s)", fontsize=AXIS_PT)
    return frame.fig


def _not_measured_note(versions: Sequence[str]) -> str:
    """' Not measured on this GPU: v19, v20.' for versions whose columns stay empty (added after
    the GPU's last sweep); '' when there are none."""
    return f" Not measured on this GPU: {name_ranges(versions)}." if versions else ""


def _parent_notes(shown: Sequence[Track]) -> str:
    """' (h01's parent is v17, of the float32 track; h06's parent is h04)': the parents that
    are not the step before."""
    notes = []
    for track in shown:
        for i, name in enumerate(track.versions):
            parent = registry.get(name).parent
            if parent and parent not in track.versions:
                other = track_of(parent)
                notes.append(f"{name}'s parent is {parent}" + (f", of the {other.dtype} track" if other else ""))
            elif parent and (i == 0 or track.versions[i - 1] != parent):
                notes.append(f"{name}'s parent is {parent}")
    return f" ({'; '.join(notes)})" if notes else ""


def _progression_note(shown: Sequence[Track], uncaptured: bool) -> str:
    return ("Points: median device time per call (kernel: CUDA-graph replays of L2 flush + call, minus the flushes) "
            "or per generation (graph replays); whiskers: min to max over the replays. A line joins each version "
            f"to its parent{_parent_notes(shown)}."
            + (" A red cross: no GPU time (not capturable), drawn at its call or eager time." if uncaptured else ""))


def _progression_panel(ax: Axes, track: Track, rows: dict[str, KernelRow | E2ERow], kernel: bool) -> None:
    field = "us_device" if kernel else "seconds_gpu"
    fallback = "us_call_median" if kernel else "seconds_eager_median"
    position = {name: i for i, name in enumerate(track.versions)}

    def median(name: str) -> float | None:
        row = rows.get(name)
        return getattr(row, f"{field}_median") if row else None

    for name in track.versions:
        parent = registry.get(name).parent
        if parent in position and median(name) and median(parent):
            ax.plot([position[parent], position[name]], [median(parent), median(name)], color=VERSIONS,
                    linewidth=1.4, zorder=2)
    measured = [n for n in track.versions if median(n)]
    if measured:
        ax.errorbar([position[n] for n in measured], [median(n) for n in measured],
                    yerr=_whiskers([(median(n), getattr(rows[n], f"{field}_min"), getattr(rows[n], f"{field}_max"))
                                    for n in measured]),
                    color=VERSIONS, marker="o", markersize=4.5, linestyle="none", capsize=2, zorder=3)
    missing = [n for n in track.versions if n in rows and not median(n) and getattr(rows[n], fallback)]
    if missing:
        ax.plot([position[n] for n in missing], [getattr(rows[n], fallback) for n in missing], color=MISSING,
                marker="x", linestyle="none", markersize=8, markeredgewidth=2, zorder=4)
    baselines = [b for b in rows if b not in position and median(b)]
    fastest = min(baselines, key=lambda b: (median(b), backend_rank(b))) if baselines else None
    lo, hi = 0.0, math.inf
    if kernel:
        # (µs) the versions' whiskers (or, not captured, their call times) and PyTorch's fastest
        spanned = [getattr(rows[n], f"{field}_{end}") for n in measured for end in ("min", "max")]
        spanned += [getattr(rows[n], fallback) for n in missing] + ([median(fastest)] if fastest else [])
        if spanned:
            lo, hi = min(spanned) / PROGRESSION_MARGIN, max(spanned) * PROGRESSION_MARGIN
    drawn = [b for b in baselines if lo <= median(b) <= hi]
    for b in drawn:
        lk = look(b, track.dtype)
        ax.axhline(median(b), color=lk.color, linestyle=lk.linestyle, linewidth=lk.linewidth, zorder=1)
    ax.set_xticks(range(len(track.versions)), labels=track.versions, rotation=90, fontsize=TICK_PT)
    ax.set_xlim(-0.6, len(track.versions) - 0.4)
    if kernel:
        ax.set_yscale("log")
        if math.isfinite(hi):
            ax.set_ylim(lo, hi)
        else:
            ax.autoscale_view()
        log_axis(ax)
    else:
        ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.05)
    labels = [EndLabel(b, median(b), None, look(b, track.dtype).color, b == fastest) for b in drawn]
    labels += [EndLabel(_off_scale_text(b, median(b), median(b) > hi), hi if median(b) > hi else lo, None,
                        look(b, track.dtype).color, b == fastest) for b in baselines if b not in drawn]
    label_ends(ax, labels)


def _off_scale_text(backend: str, us: float, above: bool = True) -> str:
    """A progression panel's label for a baseline beyond its scale: 'naive ↑ 18,344 µs'."""
    return f"{backend} {'↑' if above else '↓'} {_number(us)} µs"


def kernel_headline(r: GpuResults) -> Figure | None:
    """Every backend at the headline shapes, per track: device time (filled) and call time
    (hollow)."""
    shapes = [s for s in HEADLINE_SHAPES if any(r.kernel_rows(s, t.dtype) for t in tracks())]
    shown = _tracks_with(r, lambda t: any(r.kernel(v, s, t.dtype) for v in t.versions for s in shapes))
    if not shown:
        return None
    names = {t: _panel_backends(r, t, [x for s in shapes for x in r.kernel_rows(s, t.dtype)]) for t in shown}
    longest = max(_width(n, TICK_PT) for t in shown for n in names[t])
    frame = _frame(title=f"Attention forward, every backend at the headline shapes — {r.gpu}",
                   notes=["Filled: device time per call (median; whiskers min to max over CUDA-graph replays); hollow: "
                          "call time (CUDA events around one eager call, what a Python caller pays). The dashed "
                          "vertical line: the fastest of PyTorch's kernels shown at that shape. Log axes.",
                          _half_note(r, shown)],
                   source=r.provenance_line(), cols=len(shapes), rows=[0.19 * len(names[t]) + 0.3 for t in shown],
                   panel_w=4.6, left=longest + 0.35, right=0.3, wspace=longest + 0.45, hspace=0.95, bottom=0.55)
    for track, axes in zip(shown, frame.axes):
        for ax, shape in zip(axes, shapes):
            _headline_panel(ax, r, track, names[track], shape)
            _style_axes(ax, f"{track.title}: kernel, {shape.describe()}")
    for ax in frame.axes[-1]:
        ax.set_xlabel("µs per call (log scale)", fontsize=AXIS_PT)
    return frame.fig


def _headline_panel(ax: Axes, r: GpuResults, track: Track, names: list[str], shape: Shape) -> None:
    """One row per backend: device time filled with its min-max whisker, call time hollow
    (drawn a marker shape at a time: a few artists, however many backends)."""
    device: dict[str, list[tuple[float, int, str]]] = {}
    call: dict[str, list[tuple[float, int, str]]] = {}
    whiskers: list[tuple[int, float, float, str]] = []
    for y, name in enumerate(names):
        row = r.kernel(name, shape, track.dtype)
        if row is None:
            continue
        lk = look(name, track.dtype)
        colour = lk.color if lk.strong else LIGHT_TEXT
        if row.us_device_median:
            device.setdefault(lk.marker, []).append((row.us_device_median, y, colour))
            whiskers.append((y, row.us_device_min, row.us_device_max, colour))
        if row.us_call_median:
            call.setdefault(lk.marker, []).append((row.us_call_median, y, colour))
    if whiskers:
        ax.hlines([w[0] for w in whiskers], [w[1] for w in whiskers], [w[2] for w in whiskers],
                  colors=[w[3] for w in whiskers], linewidth=1.2, zorder=3)
    for marker, points in device.items():
        ax.scatter([p[0] for p in points], [p[1] for p in points], c=[p[2] for p in points], marker=marker, s=28,
                   zorder=4)
    for marker, points in call.items():
        ax.scatter([p[0] for p in points], [p[1] for p in points], facecolors="white",
                   edgecolors=[p[2] for p in points], marker=marker, s=28, zorder=2)
    fastest = [row.us_device_median for name in names if not is_version(name)
               and (row := r.kernel(name, shape, track.dtype)) and row.us_device_median]
    if fastest:
        ax.axvline(min(fastest), color=REFERENCE, linestyle=(0, (4, 2)), linewidth=0.9, zorder=1)
    ax.set_yticks(range(len(names)), labels=names, fontsize=TICK_PT)
    for tick, name in zip(ax.get_yticklabels(), names):
        tick.set_color(look(name, track.dtype).text_color)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_xscale("log")
    ax.autoscale_view(scaley=False)
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo / 1.15, hi * 1.15)
    log_axis(ax, "x")


def kernel_time_vs_t(r: GpuResults) -> Figure | None:
    """Device time against T, one row of panels per track, one column per batch size."""
    batches = sorted({x.B for x in r.study_kernels})
    shown = _tracks_with(r, lambda t: any(r.kernel_series(v, t.dtype, B) for v in t.versions for B in batches))
    if not shown:
        return None
    names = {t: _panel_backends(r, t, r.study_kernels) for t in shown}
    frame = _frame(title=f"Attention kernel device time against sequence length, per precision — {r.gpu}",
                   notes=["Medians of CUDA-graph replays (L2 flushed before each call); both axes logarithmic. A "
                          "backend without device time (not capturable) is missing here: the GPU's page says why.",
                          _lines_note(), _half_note(r, shown)],
                   source=r.provenance_line(), cols=len(batches), rows=[3.6] * len(shown), panel_w=4.6, left=0.85,
                   right=_end_label_room([n for t in shown for n in names[t]]),
                   wspace=0.85 + _end_label_room([n for t in shown for n in names[t]]), hspace=1.0, bottom=0.6)
    for track, axes in zip(shown, frame.axes):
        for ax, B in zip(axes, batches):
            series = {n: s for n in names[track] if (s := r.kernel_series(n, track.dtype, B))}
            heads = sorted({x.H for s in series.values() for x in s})
            _style_axes(ax, f"{track.title}: B={B}, H={'/'.join(map(str, heads))}, d={registry.HEAD_DIM}, causal")
            _lines_with_labels(ax, {n: [(x.T, x.us_device_median) for x in s] for n, s in series.items()},
                               track.dtype, log_y=True)
            ax.set_xlabel("sequence length T", fontsize=AXIS_PT)
        axes[0].set_ylabel("device time per call (µs)", fontsize=AXIS_PT)
    return frame.fig


def _whiskers(points: list[tuple[float, float, float]]) -> list[list[float]]:
    """errorbar's yerr for (value, low, high) points: the lengths below and above each value,
    never negative (a spread that does not hold its median, in a row the harness did not
    write, draws no whisker on that side)."""
    return [[max(0.0, value - low) for value, low, _ in points], [max(0.0, high - value) for value, _, high in points]]


def _lines_with_labels(ax: Axes, series: dict[str, list[tuple[float, float]]], dtype: str, log_y: bool,
                       whiskers: dict[str, list[tuple[float, float]]] | None = None) -> None:
    """One line per backend (light ones first, so the strong ones are drawn over them), a
    label at each line's end; log x (base 2) at the points' x values."""
    ordered = sorted(series, key=lambda n: (look(n, dtype).strong, backend_rank(n)))
    for name in ordered:
        points = series[name]
        lk = look(name, dtype)
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        if whiskers and name in whiskers:
            low_high = whiskers[name]
            ax.errorbar(xs, ys, yerr=_whiskers([(y, *lh) for y, lh in zip(ys, low_high)]), capsize=1.5,
                        elinewidth=0.8, **lk.line())
        else:
            ax.plot(xs, ys, **lk.line())
    _fixed_x(ax, sorted({p[0] for points in series.values() for p in points}))
    if log_y:
        ax.set_yscale("log")
        ax.autoscale_view(scalex=False)
        log_axis(ax)
    label_ends(ax, [EndLabel(n, series[n][-1][1], series[n][-1][0], look(n, dtype).text_color, False,
                             not look(n, dtype).strong)
                    for n in ordered if series[n]])


def e2e_time_vs_tokens(r: GpuResults) -> Figure | None:
    """Generation time against length, per track: GPU time (graph replays) and eager time."""
    shown = _tracks_with(r, lambda t: any(r.e2e_series(v, t.dtype) for v in t.versions))
    if not shown:
        return None
    names = {t: _panel_backends(r, t, r.e2e) for t in shown}
    kinds = (("gpu", "GPU time: replays of one CUDA graph of the whole generation"),
             ("eager", "eager time: run from Python, host included"))
    room = _end_label_room([n for t in shown for n in names[t]])
    first = next(x for x in r.e2e if x.dtype == shown[0].dtype)
    frame = _frame(title=f"{_model(r.e2e)}: generation time — {r.gpu}",
                   notes=[f"Points: median; whiskers: min to max over the timed graph replays "
                          f"({_replays_note(r, shown)}; one has no whiskers) (left) "
                          f"and {_eager_runs_note(first.eager_runs)} (right). Both axes logarithmic.",
                          _lines_note()],
                   source=r.provenance_line(), cols=2, rows=[3.6] * len(shown), panel_w=4.6, left=0.85, right=room,
                   wspace=0.85 + room, hspace=1.0, bottom=0.6)
    for track, axes in zip(shown, frame.axes):
        for ax, (kind, title) in zip(axes, kinds):
            series, spread = {}, {}
            for name in names[track]:
                rows = [x for x in r.e2e_series(name, track.dtype) if getattr(x, f"seconds_{kind}_median")]
                if rows:
                    series[name] = [(x.tokens, getattr(x, f"seconds_{kind}_median")) for x in rows]
                    spread[name] = [(getattr(x, f"seconds_{kind}_min"), getattr(x, f"seconds_{kind}_max"))
                                    for x in rows]
            _style_axes(ax, f"{track.title}: {title}")
            _lines_with_labels(ax, series, track.dtype, log_y=True, whiskers=spread)
            ax.set_xlabel("tokens generated to (prompt included)", fontsize=AXIS_PT)
        axes[0].set_ylabel("seconds (median)", fontsize=AXIS_PT)
    return frame.fig


def peak_memory_vs_tokens(r: GpuResults) -> Figure | None:
    """Peak GPU memory against length, one panel per dtype; backends with the same curve (to
    the MiB) share a line."""
    dtypes = [d for d in r.dtypes() if any(x.peak_memory_bytes for x in r.e2e if x.dtype == d)]
    if not dtypes:
        return None
    groups = {d: _memory_groups(r, d) for d in dtypes}
    room = _end_label_room([label for d in dtypes for _, label, _ in groups[d]])
    cols = min(len(dtypes), MEMORY_COLUMNS)
    rows = math.ceil(len(dtypes) / cols)
    frame = _frame(title=f"Peak GPU memory during generation, per dtype — {r.gpu}",
                   notes=[f"{_model(r.e2e)}. torch's allocator peak up to each length in the eager runs, weights "
                          f"included; backends whose peaks agree to the MiB at every length share a line. The axis "
                          f"starts at zero."],
                   source=r.provenance_line(), cols=cols, rows=[3.0] * rows, panel_w=3.4, left=0.85, right=room,
                   wspace=0.85 + room, hspace=1.0, bottom=0.6)
    panels = [ax for row in frame.axes for ax in row]
    for ax, dtype in zip(panels, dtypes):
        _style_axes(ax, dtype)
        labels = []
        for members, label, points in groups[dtype]:
            lk = look(members[0], dtype)
            colour = VERSIONS if len(members) > 1 and is_version(members[0]) else lk.color
            ax.plot([p[0] for p in points], [p[1] for p in points], color=colour, linestyle=lk.linestyle,
                    marker=lk.marker, markerfacecolor="white", markersize=4, linewidth=1.6)
            labels.append(EndLabel(label, points[-1][1], points[-1][0], colour))
        _fixed_x(ax, sorted({p[0] for _, _, points in groups[dtype] for p in points}))
        ax.set_ylim(0, max(p[1] for _, _, points in groups[dtype] for p in points) * 1.12)
        label_ends(ax, labels)
        ax.set_xlabel("tokens generated to (prompt included)", fontsize=AXIS_PT)
        ax.set_ylabel("peak GPU memory (MiB)", fontsize=AXIS_PT)
    for ax in panels[len(dtypes):]:
        ax.set_visible(False)
    return frame.fig


def _memory_groups(r: GpuResults, dtype: str) -> list[tuple[list[str], str, list[tuple[int, float]]]]:
    """(backends, label, points) per distinct curve, the highest last; a label lists its
    backends."""
    curves: dict[tuple, list[str]] = {}
    points: dict[tuple, list[tuple[int, float]]] = {}
    for name in sorted({x.backend for x in r.e2e if x.dtype == dtype}, key=backend_rank):
        rows = [x for x in r.e2e_series(name, dtype) if x.peak_memory_bytes]
        if rows:
            key = tuple((x.tokens, round(x.peak_memory_bytes / 2**20)) for x in rows)
            curves.setdefault(key, []).append(name)
            points[key] = [(x.tokens, x.peak_memory_bytes / 2**20) for x in rows]
    ordered = sorted(curves, key=lambda key: (key[-1][1], backend_rank(curves[key][0])))
    return [(curves[key], "\n".join(textwrap.wrap(name_ranges(curves[key]), 24, break_on_hyphens=False)), points[key])
            for key in ordered]


def precision_cost(r: GpuResults) -> Figure | None:
    """What float32 accuracy costs: device time against T of the last float32 step, the last
    half-precision step, and one PyTorch kernel (sdpa-efficient) in both precisions; below,
    float32 time over half-precision time."""
    full = next((t for t in tracks() if not t.half_precision), None)
    half = next((t for t in tracks() if t.half_precision), None)
    if full is None or half is None or not (r.has(full.dtype) and r.has(half.dtype)):
        return None
    last_full = r.last_measured(full.versions, full.dtype)
    last_half = r.last_measured(half.versions, half.dtype)
    both = PYTORCH_IN_BOTH
    series = [(last_full, full.dtype, STRONG[0], "-"), (both, full.dtype, STRONG[0], (0, (5, 2))),
              (last_half, half.dtype, STRONG[2], "-"), (both, half.dtype, STRONG[2], (0, (5, 2)))]
    series = [s for s in series if s[0] is not None]
    batches = sorted({x.B for x in r.study_kernels if x.dtype in (full.dtype, half.dtype)})
    if last_full is None or last_half is None or not batches:
        return None
    labels = [f"{name} {dtype}" for name, dtype, _, _ in series]
    ratio_labels = [f"{last_full} ÷ {last_half}", f"{both}: {full.dtype} ÷ {half.dtype}"]
    pairs = [((last_full, full.dtype), (last_half, half.dtype), ratio_labels[0], "-"),
             ((both, full.dtype), (both, half.dtype), ratio_labels[1], (0, (5, 2)))]
    room = _end_label_room(labels + ratio_labels)
    frame = _frame(title=f"What does {full.dtype} accuracy cost? The last {full.dtype} step against the last "
                         f"half-precision one — {r.gpu}",
                   subtitle=_cost_summary(r, (last_full, full.dtype), (last_half, half.dtype)),
                   notes=[f"Solid: the last of the study's {full.dtype} steps and of its half-precision steps measured "
                          f"on this GPU; dashed: {both}, PyTorch's kernel in both precisions. Device time per call, "
                          f"medians of CUDA-graph replays. Below: the {full.dtype} row drawn above over the "
                          f"{half.dtype} row measured in the same run, where that run has one."],
                   source=r.provenance_line(), cols=len(batches), rows=[3.4, 1.6], panel_w=4.6, left=0.85, right=room,
                   wspace=0.85 + room, hspace=0.75, bottom=0.6, sharex=True)
    for j, B in enumerate(batches):
        top, bottom = frame.axes[0][j], frame.axes[1][j]
        lines = {}
        for name, dtype, colour, style in series:
            rows = r.kernel_series(name, dtype, B)
            if rows:
                lines[(name, dtype)] = {x.T: x.us_device_median for x in rows}
                top.plot([x.T for x in rows], [x.us_device_median for x in rows], color=colour, linestyle=style,
                         marker="o" if style == "-" else "s", markerfacecolor=colour if style == "-" else "white",
                         markersize=4.5, linewidth=2.0 if style == "-" else 1.4)
        lengths = sorted({t for points in lines.values() for t in points})
        _style_axes(top, f"B={B}, H={'/'.join(str(h) for h in sorted({x.H for x in r.study_kernels if x.B == B}))}, "
                         f"d={registry.HEAD_DIM}, causal: device time")
        _fixed_x(top, lengths)
        top.set_yscale("log")
        top.autoscale_view(scalex=False)
        log_axis(top)
        label_ends(top, [EndLabel(f"{name} {dtype}", lines[(name, dtype)][max(lines[(name, dtype)])],
                                  max(lines[(name, dtype)]), colour, style == "-")
                         for name, dtype, colour, style in series if (name, dtype) in lines])
        top.set_ylabel("µs per call", fontsize=AXIS_PT)
        _ratio_panel(bottom, [(same_run_ratios(r, slow, fast, B), label, style) for slow, fast, label, style in pairs
                              if slow in lines])
        _style_axes(bottom, f"B={B}: {full.dtype} time ÷ {half.dtype} time")
        bottom.set_xlabel("sequence length T", fontsize=AXIS_PT)
        bottom.set_ylabel("times slower", fontsize=AXIS_PT)
    return frame.fig


def same_run_ratios(r: GpuResults, slow: tuple[str, str], fast: tuple[str, str], B: int) -> dict[int, float]:
    """T -> the device time of `slow` (backend, dtype) at batch B, its row drawn, over `fast`'s
    row of the same run; lengths where that run has no device time of `fast` are left out."""
    return {row.T: ratio for row in r.kernel_series(*slow, B) if (ratio := r.kernel_time_ratio(row, *fast))}


def _ratio_panel(ax: Axes, pairs: Sequence[tuple[dict[int, float], str, object]]) -> None:
    """One line per (T -> ratio, label, line style); a pair without a same-run ratio is named
    in the panel instead."""
    labels = []
    unpaired = []
    for ratios, label, style in pairs:
        if not ratios:
            unpaired.append(label)
            continue
        common = sorted(ratios)
        ax.plot(common, [ratios[t] for t in common], color="0.15", linestyle=style,
                marker="o" if style == "-" else "s", markerfacecolor="0.15" if style == "-" else "white",
                markersize=4, linewidth=1.6)
        labels.append(EndLabel(label, ratios[common[-1]], common[-1], "0.15", style == "-"))
    ax.set_ylim(0, max([lab.y for lab in labels] + [1.0]) * 1.35)
    ax.axhline(1.0, color="0.6", linewidth=0.8, zorder=1)
    for i, label in enumerate(unpaired):
        ax.text(0.02, 0.95 - 0.14 * i, f"{label}: {NOT_IN_ONE_RUN}", transform=ax.transAxes, fontsize=TICK_PT,
                color="0.45", style="italic", va="top", ha="left")
    label_ends(ax, labels)


def _cost_summary(r: GpuResults, full: tuple[str, str], half: tuple[str, str]) -> str:
    """'On this GPU float32 (v18) takes 1.4× (B=1 T=512) to 5.0× (B=8 T=4096) the time of
    bfloat16 (sdpa-cudnn), for a 2,800× smaller error against float64.': each float32 row shown
    over the bfloat16 row of its run; where its run has none, a sentence saying so."""
    ratios = [(s, ratio) for s in HEADLINE_SHAPES
              if (a := r.kernel(full[0], s, full[1])) and (ratio := r.kernel_time_ratio(a, *half))]
    if not ratios:
        return (f"On this GPU, the run that measured {full[1]} ({full[0]}) at "
                f"{' and '.join(s.label() for s in HEADLINE_SHAPES)} has no {half[1]} ({half[0]}) time: their ratio "
                f"needs a sweep of both dtypes.")
    low, high = min(ratios, key=lambda x: x[1]), max(ratios, key=lambda x: x[1])
    times = (f"{low[1]:.1f}× ({low[0].label()})" if low == high
             else f"{low[1]:.1f}× ({low[0].label()}) to {high[1]:.1f}× ({high[0].label()})")
    errors = [r.max_rel_err(*full), r.max_rel_err(*half)]
    accuracy = (f", for a {_two_digits(errors[1] / errors[0]):,.0f}× smaller error against float64 (largest "
                f"relative error over the correctness gate's shapes: {_sci(errors[0])} against {_sci(errors[1])})"
                if all(errors) else "")
    return f"On this GPU, {full[1]} ({full[0]}) takes {times} the time of {half[1]} ({half[0]}){accuracy}."


def _two_digits(value: float) -> float:
    """2,808 -> 2,800: a ratio of errors to the precision it deserves."""
    return float(f"{value:.2g}")


def _sci(value: float) -> str:
    """7.2e-7."""
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


FASTEST_PYTORCH = "PyTorch's fastest"  # headline: the label of the line at 1


def _references_note(r: GpuResults, shown: Sequence[Track]) -> str:
    """Which of PyTorch's kernels each ratio of the headline figure divides by: per track and
    shape, the fastest in each version's run ('flex-attention (v25–v29), sdpa-efficient
    (v01–v24)'), and the versions whose run timed only some of them."""
    parts, partial = [], {}
    for track in shown:
        for shape in HEADLINE_SHAPES:
            by_reference: dict[str, list[str]] = {}
            for v in track.versions:
                if (row := r.kernel(v, shape, track.dtype)) and (reference := r.kernel_reference(row)):
                    by_reference.setdefault(reference.backend, []).append(v)
                    if reference.missing:
                        partial.setdefault(reference.missing, []).append(v)
            if by_reference:
                parts.append(f"{track.dtype} {shape.label()}: " + ", ".join(
                    f"{name} ({name_ranges(versions)})" for name, versions in by_reference.items()))
    text = "PyTorch's fastest kernel in each version's run: " + "; ".join(parts) + "."
    if partial:
        text += " Runs that timed only some of PyTorch's kernels: " + "; ".join(
            f"{name_ranges(sorted(set(versions), key=backend_rank))} (no {', '.join(missing)})"
            for missing, versions in partial.items()) + "."
    return text


def headline(r: GpuResults) -> Figure | None:
    """Each step's kernel device time over that of the fastest of PyTorch's kernels measured in
    the same run at that shape, at the headline shapes: one panel per track, narrow enough to
    read at a README's width."""
    shown = _tracks_with(r, lambda t: any(r.kernel(v, s, t.dtype) for v in t.versions for s in HEADLINE_SHAPES))
    if not shown:
        return None
    shape_looks = {s: (STRONG[2 * i % len(STRONG)], MARKERS[i % len(MARKERS)]) for i, s in enumerate(HEADLINE_SHAPES)}
    labels = [s.label() for s in HEADLINE_SHAPES] + [FASTEST_PYTORCH]
    room = _end_label_room(labels, AXIS_PT)
    widths = [max(1.6, 0.22 * len(t.versions) + 0.4) for t in shown]
    unmeasured = [v for t in shown for v in t.versions if not any(r.kernel(v, s, t.dtype) for s in HEADLINE_SHAPES)]
    title = f"Each step's kernel time over PyTorch's fastest kernel of its precision, same run — {r.gpu}"
    frame = _frame(title=title,
                   notes=[f"Device time per call (median of CUDA-graph replays) over that of the fastest of PyTorch's "
                          f"kernels ({', '.join(tables.baselines())}) measured in the same run at that shape, "
                          f"H={HEADLINE_SHAPES[0].H}, d={registry.HEAD_DIM}, causal; below 1: faster than PyTorch. A "
                          f"line joins each version to its parent{_parent_notes(shown)}."
                          + _not_measured_note(unmeasured), _references_note(r, shown)],
                   source=r.provenance_line(), cols=len(shown), rows=[2.9], panel_w=widths, left=0.8, right=room,
                   wspace=0.75 + room, bottom=0.55)
    for ax, track in zip(frame.axes[0], shown):
        ends = []
        for shape in HEADLINE_SHAPES:
            colour, marker = shape_looks[shape]
            ratios = {v: ratio for v in track.versions
                      if (row := r.kernel(v, shape, track.dtype)) and (ratio := r.kernel_vs_fastest(row)[0])}
            position = {v: i for i, v in enumerate(track.versions)}
            for v in ratios:
                parent = registry.get(v).parent
                if parent in ratios:
                    ax.plot([position[parent], position[v]], [ratios[parent], ratios[v]], color=colour,
                            linewidth=1.6, zorder=2)
            ax.plot([position[v] for v in ratios], list(ratios.values()), color=colour, marker=marker, markersize=5,
                    linestyle="none", zorder=3)
            if ratios:
                last = max(ratios, key=lambda v: position[v])
                ends.append(EndLabel(shape.label(), ratios[last], position[last], colour, True))
        ax.axhline(1.0, color=REFERENCE, linestyle=(0, (6, 2)), linewidth=1.6, zorder=1)
        ends.append(EndLabel(FASTEST_PYTORCH, 1.0, None, REFERENCE, False))
        ax.set_xticks(range(len(track.versions)), labels=track.versions, rotation=90, fontsize=TICK_PT)
        ax.set_xlim(-0.6, len(track.versions) - 0.4)
        ax.set_yscale("log")
        ax.autoscale_view(scalex=False)
        lo, hi = ax.get_ylim()
        ax.set_ylim(min(lo, 0.8), max(hi, 1.25))
        log_axis(ax)
        _style_axes(ax, track.title)
        label_ends(ax, ends, AXIS_PT)
    frame.axes[0][0].set_ylabel("time ÷ PyTorch's fastest (log)", fontsize=AXIS_PT)
    return frame.fig


# Per-GPU figures, in the order of a GPU's page: file name -> drawing function.
FIGURES: dict[str, Callable[[GpuResults], Figure | None]] = {
    HEADLINE_FIGURE: headline,
    "progression.png": progression,
    "precision_cost.png": precision_cost,
    "kernel_headline.png": kernel_headline,
    "kernel_time_vs_T.png": kernel_time_vs_t,
    "e2e_time_vs_tokens.png": e2e_time_vs_tokens,
    "peak_memory_vs_tokens.png": peak_memory_vs_tokens,
}


# -- the GPUs side by side ---------------------------------------------------------------------
def gpu_comparison(gpus: Sequence[GpuResults]) -> Figure | None:
    """The GPUs side by side, one row per track's dtype: the headline generation's GPU time and
    the kernel device times at the headline shapes, a marker per GPU."""
    if len(gpus) < 2:
        return None
    measures: list[tuple[str, Callable[[GpuResults, str, str], tuple[float, float, float] | None], bool]] = [
        (f"{HEADLINE_TOKENS}-token generation, GPU time (s)", _e2e_value, False)]
    for shape in HEADLINE_SHAPES:
        measures.append((f"kernel {shape.label()}, device time (µs)", _kernel_value(shape), True))
    dtypes = sorted({t.dtype for t in tracks() if any(r.has(t.dtype) for r in gpus)}, key=dtype_rank)
    names = {d: sorted({x.backend for r in gpus for x in [*r.kernels, *r.e2e] if x.dtype == d}, key=backend_rank)
             for d in dtypes}
    dtypes = [d for d in dtypes if names[d]]
    measures = [m for m in measures if any(m[1](r, b, d) for r in gpus for d in dtypes for b in names[d])]
    if not dtypes or not measures:
        return None
    longest = max(_width(n, TICK_PT) for d in dtypes for n in names[d])
    frame = _frame(title="The GPUs side by side (each GPU's own sweep; numbers never mixed)",
                   notes=["Points: median; whiskers: min to max over CUDA-graph replays. Kernel times on log axes; "
                          "generation times from zero. \"no GPU time\": no GPU's results have a row with it (not "
                          "measured, or not capturable: the GPU's page says why)."],
                   source=" | ".join(r.provenance_line() for r in gpus), cols=len(measures),
                   rows=[0.2 * len(names[d]) + 0.3 for d in dtypes], panel_w=3.4, left=longest + 0.35, right=0.3,
                   wspace=0.45, hspace=0.95, bottom=0.55, header_extra=0.3)
    for dtype, axes in zip(dtypes, frame.axes):
        for j, (ax, (title, value, log)) in enumerate(zip(axes, measures)):
            _comparison_panel(ax, gpus, names[dtype], dtype, value, log, show_names=j == 0)
            _style_axes(ax, f"{dtype}: {title}")
    handles = [frame.axes[0][0].plot([], [], color=GPU_COLOURS[g % len(GPU_COLOURS)], marker=MARKERS[g % len(MARKERS)],
                                     linestyle="none")[0] for g in range(len(gpus))]
    frame.fig.legend(handles, [r.gpu for r in gpus], loc="upper left", ncol=len(gpus), fontsize=AXIS_PT,
                     frameon=False, bbox_to_anchor=(0.1 / frame.fig.get_figwidth(), frame.header_bottom))
    return frame.fig


def _e2e_value(r: GpuResults, backend: str, dtype: str) -> tuple[float, float, float] | None:
    row = r.end_to_end(backend, HEADLINE_TOKENS, dtype)
    return (row.seconds_gpu_median, row.seconds_gpu_min, row.seconds_gpu_max) if row and row.seconds_gpu_median \
        else None


def _kernel_value(shape: Shape) -> Callable[[GpuResults, str, str], tuple[float, float, float] | None]:
    def value(r: GpuResults, backend: str, dtype: str) -> tuple[float, float, float] | None:
        row = r.kernel(backend, shape, dtype)
        return (row.us_device_median, row.us_device_min, row.us_device_max) if row and row.us_device_median else None
    return value


def _comparison_panel(ax: Axes, gpus: Sequence[GpuResults], names: list[str], dtype: str,
                      value: Callable[[GpuResults, str, str], tuple[float, float, float] | None], log: bool,
                      show_names: bool) -> None:
    offset = 0.22
    for g, r in enumerate(gpus):
        points = [(i + (g - (len(gpus) - 1) / 2) * offset, v) for i, b in enumerate(names)
                  if (v := value(r, b, dtype)) is not None]
        if points:
            ys, vs = zip(*points)
            ax.errorbar([v[0] for v in vs], ys, xerr=[[v[0] - v[1] for v in vs], [v[2] - v[0] for v in vs]],
                        color=GPU_COLOURS[g % len(GPU_COLOURS)], marker=MARKERS[g % len(MARKERS)], markersize=4.5,
                        linestyle="none", capsize=1.5)
    ax.set_yticks(range(len(names)), labels=names if show_names else [], fontsize=TICK_PT)
    ax.set_ylim(len(names) - 0.5, -0.5)
    if log:
        ax.set_xscale("log")
        ax.autoscale_view(scaley=False)
        lo, hi = ax.get_xlim()
        ax.set_xlim(lo / 1.2, hi * 1.2)
        log_axis(ax, "x")
    else:
        ax.set_xlim(0, ax.get_xlim()[1] * 1.08)
    _freeze(ax)
    for i, b in enumerate(names):
        if all(value(r, b, dtype) is None for r in gpus):
            ax.text(0.02, i, "no GPU time", transform=ax.get_yaxis_transform(), fontsize=TICK_PT, color="0.5",
                    style="italic", va="center")


# -- figures drawn once per dtype ---------------------------------------------------------------
@dataclass(frozen=True)
class PerDtypeFigure:
    """A figure drawn once per dtype that has its rows: <stem>_<dtype>.png."""

    stem: str
    rows: str  # what it is drawn from, for the message when a GPU has none
    dtypes: Callable[[GpuResults], list[str]]
    draw: Callable[[GpuResults, str], Figure | None]

    def name(self, dtype: str) -> str:
        return f"{self.stem}_{dtype}.png"

    def drawn(self, r: GpuResults) -> list[tuple[str, Figure]]:
        """(file name, figure) for each dtype r has its rows in."""
        return [(self.name(dtype), fig) for dtype in self.dtypes(r) if (fig := self.draw(r, dtype)) is not None]

    def skipped(self, r: GpuResults) -> str | None:
        """The line saying that r has none of its rows (None where it has)."""
        return None if self.dtypes(r) else \
            f"{r.gpu}: no {self.stem}_<dtype>.png: not measured on this GPU yet (no {self.rows})"


def per_dtype_figures() -> tuple[PerDtypeFigure, ...]:
    """Every figure drawn once per dtype: decode and KV-cache generation (harness/decode_plots.py),
    the prefill grid (harness/grid_plots.py)."""
    from harness import decode_plots, grid_plots  # they draw with this module's pieces

    return (*decode_plots.PER_DTYPE, *grid_plots.PER_DTYPE)


def skipped(r: GpuResults) -> list[str]:
    """One line per per-dtype figure r has no rows for."""
    return [line for f in per_dtype_figures() if (line := f.skipped(r)) is not None]


# -- writing -----------------------------------------------------------------------------------
def save(fig: Figure, path: Path) -> Path:
    """PNG at the figure's own size, without the software version in its metadata (so the
    bytes depend on the results alone); drawn in memory, then written whole (harness/files.py)."""
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=DPI, metadata={"Software": None})
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, png.getvalue())
    return path


def plot_all(gpus: Sequence[GpuResults], plots_dir: Path) -> list[Path]:
    """Every figure for every GPU (the decode, KV-cache and prefill-grid ones per dtype:
    per_dtype_figures()), and the comparison when there are several GPUs."""
    written = [save(fig, plots_dir / r.slug / name) for r in gpus for name, figure in FIGURES.items()
               if (fig := figure(r)) is not None]
    written += [save(fig, plots_dir / r.slug / name) for r in gpus for f in per_dtype_figures()
                for name, fig in f.drawn(r)]
    comparison = gpu_comparison(gpus)
    return written + ([save(comparison, plots_dir / GPU_COMPARISON)] if comparison else [])
