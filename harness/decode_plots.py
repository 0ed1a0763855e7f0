"""Figures of the decode track and of generation with a KV cache, one per GPU and dtype
(<plots>/<gpu>/decode_<dtype>.png, kv_cache_<dtype>.png), in the style of harness/plots.py:

- decode: K+V bytes read per second against the cache length L, a panel per batch, under the
  rate of a large copy measured in the same run (the roof a bandwidth-bound call can approach);
- kv_cache: new tokens per second against the batch, a column of panels per prompt length:
  GPU time (one CUDA graph of the whole generation), GPU time over PyTorch's fastest of the same
  run, and eager time (from Python), where transformers' generate() appears (it has no GPU time).

A GPU without decode rows or KV-cache rows gets no such figure, and `python -m harness plot`
says so (PerDtypeFigure.skipped).
"""
from __future__ import annotations

import math
import statistics
from typing import Callable, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from backends import registry
from harness import hf_generate
from harness.device_timing import COPY_BYTES
from harness.plots import (AXIS_PT, LIGHT, NOTE_PT, REFERENCE, STRONG, TICK_PT, EndLabel, PerDtypeFigure,
                           _end_label_room, _fixed_x, _frame, _freeze, _style_axes, label_ends, log_axis, look)
from harness.markdown import us
from harness.results import DecodeRow, E2ERow
from harness.study import DECODE_BATCHES, FULL
from harness.tables import (GpuResults, backend_rank, baselines, decode_shape, decode_track, is_version, study_pair)

LAST = STRONG[-1]  # the decode track's last version, the study's pair
EAGER_ONLY = "0.1"  # transformers' generate(): eager time only
COLUMNS = 3  # decode: panels per row (the last slot holds the legend)
WHITE_BOX = {"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.85}  # text on lines


def figures(r: GpuResults) -> list[tuple[str, Figure]]:
    """(file name, figure) of every decode and KV-cache figure r has rows for."""
    return [drawn for f in PER_DTYPE for drawn in f.drawn(r)]


# -- decode ------------------------------------------------------------------------------------
def copy_label(gbps: float, commit: str | None = None) -> str:
    """'HBM, 2 GiB copy: 3,021 GB/s' (naming the run's commit where a figure has several)."""
    at = f" at {commit}" if commit else ""
    return f"HBM, {COPY_BYTES / 2**30:g} GiB copy{at}: {gbps:,.0f} GB/s"


ROOF_TOLERANCE = 0.01  # runs whose copy rates lie within 1% share one roof and one label


def roof_groups(roofs: Sequence[tuple[float, str]]) -> list[tuple[float, str]]:
    """The runs' (rate, commit), sorted, as (roof, label): runs within ROOF_TOLERANCE of the
    group's slowest share one roof at their median, labelled with their range and count; a run
    alone keeps copy_label (with its commit where the figure has other roofs)."""
    groups: list[list[tuple[float, str]]] = []
    for roof in sorted(roofs):
        if groups and roof[0] <= groups[-1][0][0] * (1 + ROOF_TOLERANCE):
            groups[-1].append(roof)
        else:
            groups.append([roof])
    drawn = []
    for group in groups:
        rates = [gbps for gbps, _ in group]
        if len(group) == 1:
            drawn.append((rates[0], copy_label(rates[0], group[0][1] if len(groups) > 1 else None)))
            continue
        low, high = f"{min(rates):,.0f}", f"{max(rates):,.0f}"
        span = low if low == high else f"{low}-{high}"
        drawn.append((statistics.median(rates),
                      f"HBM, {COPY_BYTES / 2**30:g} GiB copy: {span} GB/s ({len(group)} runs)"))
    return drawn


def _decode_series(r: GpuResults, dtype: str, B: int) -> dict[str, list[DecodeRow]]:
    """backend -> its full-length rows at batch B with a rate, by L; baselines, then versions."""
    found: dict[str, list[DecodeRow]] = {}
    for row in r.decode:
        if row.dtype == dtype and row.B == B and row.lengths == FULL and row.gbps:
            found.setdefault(row.backend, []).append(row)
    return {name: sorted(found[name], key=lambda x: x.S) for name in sorted(found, key=backend_rank)}


def _decode_line(name: str, dtype: str, last: str | None) -> dict:
    """Baselines as in every figure; the decode track light, its last version strong."""
    if not is_version(name):
        return look(name, dtype).line()
    strong = name == last
    return {"color": LAST if strong else LIGHT, "linestyle": "-", "marker": "o", "linewidth": 2.2 if strong else 1.1,
            "markersize": 4.5 if strong else 2.5, "markerfacecolor": LAST if strong else LIGHT,
            "zorder": 4 if strong else 2}


def _roofs(rows: Sequence[DecodeRow]) -> list[tuple[float, str]]:
    """(copy's rate, commit) of each run the rows come from."""
    return sorted({(x.hbm_gbps, x.provenance.commit) for x in rows if x.hbm_gbps})


def _decode_panel(ax: Axes, r: GpuResults, dtype: str, B: int, last: str | None) -> None:
    series = _decode_series(r, dtype, B)
    for name, rows in sorted(series.items(), key=lambda item: item[0] == last):
        ax.plot([x.S for x in rows], [x.gbps for x in rows], **_decode_line(name, dtype, last))
    _fixed_x(ax, sorted({x.S for rows in series.values() for x in rows}))
    rows = [x for rows in series.values() for x in rows]
    roofs = roof_groups(_roofs(rows))
    ax.set_ylim(0, max([x.gbps for x in rows] + [gbps for gbps, _ in roofs]) * (1.16 + 0.08 * (len(roofs) - 1)))
    _freeze(ax)
    for i, (gbps, label) in enumerate(roofs):  # several roofs: each label a line higher, none over another
        ax.axhline(gbps, color=REFERENCE, linewidth=1.3, zorder=1)
        ax.annotate(label, xy=(0.02, gbps), xycoords=("axes fraction", "data"), xytext=(0, 3 + i * (TICK_PT + 3)),
                    textcoords="offset points", fontsize=TICK_PT, va="bottom", ha="left")
    if len(roofs) == 1:
        rate = roofs[0][0]
        right = ax.secondary_yaxis("right", functions=(lambda g: g / rate, lambda f: f * rate))
        right.tick_params(labelsize=TICK_PT)
        right.set_ylabel("fraction of the copy's rate", fontsize=AXIS_PT)
    low = ax.get_ylim()[1] * 0.15
    for x in series.get(last, []):  # the last version's time at each of its points: below, or above a low one
        above = x.gbps < low
        ax.annotate(f"{us(x.us_device_median)} µs", xy=(x.S, x.gbps), xytext=(0, 6 if above else -6),
                    textcoords="offset points", fontsize=TICK_PT - 0.5, color=LAST, va="bottom" if above else "top",
                    ha="center", zorder=6, bbox=WHITE_BOX)
    _style_axes(ax, f"B={B}, H={'/'.join(str(h) for h in sorted({x.H for x in rows}))}, d={registry.HEAD_DIM}")
    ax.set_xlabel("cache length L (rows attended per sequence)", fontsize=AXIS_PT)
    ax.set_ylabel("K+V bytes read per second (GB/s)", fontsize=AXIS_PT)


def _decode_legend(ax: Axes, r: GpuResults, dtype: str, last: str | None) -> None:
    """The legend in a panel's place: PyTorch's kernels, the earlier versions, the last one."""
    present = {x.backend for x in r.decode if x.dtype == dtype and x.lengths == FULL}
    entries = [(name, _decode_line(name, dtype, last)) for name in baselines(registry.DECODE) if name in present]
    earlier = [v for v in decode_track() if v in present and v != last]
    if earlier:
        entries.append((f"{earlier[0]}–{earlier[-1]}" if len(earlier) > 1 else earlier[0],
                        _decode_line(earlier[0], dtype, last)))
    if last:
        entries.append((f"{last}, the last step (µs: its device time)", _decode_line(last, dtype, last)))
    handles = [Line2D([], [], **{k: v for k, v in line.items() if k != "zorder"}) for _, line in entries]
    ax.legend(handles, [label for label, _ in entries], loc="center left", fontsize=AXIS_PT, frameon=False)
    ax.set_axis_off()


def _decode_summary(r: GpuResults, dtype: str, last: str | None) -> str:
    """'d07 reads at up to 0.93 of the copy's rate (B=64 L=16384), sdpa-cudnn at 0.98 there.'"""
    rows = [x for x in r.decode if x.backend == last and x.dtype == dtype and x.lengths == FULL and x.fraction_of_hbm]
    if not rows:
        return ""
    best = max(rows, key=lambda x: x.fraction_of_hbm)
    _, reference = r.decode_vs_fastest(best)
    there = r.decode_in_run(reference.backend, decode_shape(best), dtype, best.provenance) if reference else None
    fastest = (f"; PyTorch's fastest there, {reference.backend}, at {there.fraction_of_hbm:.2f}"
               if there and there.fraction_of_hbm else "")
    return (f"{last} reads at up to {best.fraction_of_hbm:.2f} of the copy's rate (B={best.B} L={best.S}){fastest}.")


def decode_figure(r: GpuResults, dtype: str) -> Figure | None:
    """K+V bytes per second against L, one panel per batch, the copy's rate as the roof."""
    batches = [B for B in DECODE_BATCHES if _decode_series(r, dtype, B)]
    if not batches:
        return None
    last = r.last_decode(dtype)
    slots = len(batches) + 1  # and the legend
    cols = min(COLUMNS, slots)
    rows = math.ceil(slots / cols)
    decode_rows = [x for x in r.decode if x.dtype == dtype]
    frame = _frame(title=f"Decode: K+V bytes read per second against the cache length, per batch, {dtype} — {r.gpu}",
                   subtitle=_decode_summary(r, dtype, last),
                   notes=["Each point: the K and V bytes one call must read (2 × L rows × H × d × the element "
                          "size, per sequence) over its device time (median of CUDA-graph replays, L2 flushed before "
                          "each call); one new query row per sequence, every sequence attending to all L cached rows. "
                          "The black line: a device-to-device copy's rate (bytes read + written over its time) "
                          "measured in the same run, the roof a call that reads its bytes once can approach. Ragged "
                          "batches and the ratios to PyTorch's fastest are on the GPU's page."],
                   source=r.provenance_line(dtype, decode_rows), cols=cols, rows=[2.7] * rows, panel_w=3.3,
                   left=0.9, right=0.8, wspace=1.45, hspace=1.05, bottom=0.6)
    panels = [ax for row in frame.axes for ax in row]
    for ax, B in zip(panels, batches):
        _decode_panel(ax, r, dtype, B, last)
    _decode_legend(panels[len(batches)], r, dtype, last)
    for ax in panels[len(batches) + 1:]:
        ax.set_visible(False)
    return frame.fig


# -- generation with a KV cache -----------------------------------------------------------------
RATIO_CAP = 2.0  # the ratio panel's scale ends here; a backend beyond is named at the top edge
FASTEST = "PyTorch's fastest"  # the ratio panel's line at 1


def _recompute_point(r: GpuResults, dtype: str, total: int) -> E2ERow | None:
    """The study's prefill version generating one sequence without a cache (recompute mode) at
    the length closest to `total`, or None."""
    pair = study_pair()
    try:
        prefill = pair.parts(dtype)[0].name if pair else None
    except registry.BackendUnavailableError:
        return None
    rows = [x for x in r.e2e_series(prefill, dtype) if x.seconds_gpu_median] if prefill else []
    return min(rows, key=lambda x: (abs(x.tokens - total), x.tokens), default=None)


def _kv_names(r: GpuResults, dtype: str) -> list[str]:
    return sorted({x.backend for x in r.kv if x.dtype == dtype}, key=backend_rank)


def _kv_look(name: str, dtype: str, r: GpuResults) -> tuple[dict, str, str]:
    """(line style, label, label colour) of one backend's line."""
    pair = study_pair()
    if pair and name == pair.name:
        style = {"color": LAST, "linestyle": "-", "marker": "o", "linewidth": 2.2, "markersize": 4.5, "zorder": 4}
        return style, f"{name} ({r.study_parts(dtype)})", LAST
    if name == hf_generate.NAME:
        style = {"color": EAGER_ONLY, "linestyle": (0, (1, 1.2)), "marker": "x", "linewidth": 1.6, "markersize": 6,
                 "zorder": 3}
        return style, "transformers (eager)", EAGER_ONLY
    lk = look(name, dtype)
    return lk.line(), name, lk.color


def _kv_points(r: GpuResults, dtype: str, prompt: int, name: str,
               value: Callable[[E2ERow], float | None]) -> list[tuple[int, float]]:
    """(B, value) of `name`'s rows with prompts of `prompt` tokens, by B; rows without a value left out."""
    return [(plan.batch, v) for plan in r.kv_plans(dtype) if plan.prompt_tokens == prompt
            and (row := r.kv_row(name, plan, dtype)) and (v := value(row))]


def _kv_lines(ax: Axes, r: GpuResults, dtype: str, prompt: int,
              value: Callable[[E2ERow], float | None]) -> list[EndLabel]:
    """One line per backend with a value; their end labels."""
    labels = []
    for name in _kv_names(r, dtype):
        points = _kv_points(r, dtype, prompt, name, value)
        if points:
            style, label, colour = _kv_look(name, dtype, r)
            ax.plot([b for b, _ in points], [v for _, v in points], **style)
            labels.append(EndLabel(label, points[-1][1], points[-1][0], colour, style["color"] == LAST))
    _fixed_x(ax, sorted({plan.batch for plan in r.kv_plans(dtype) if plan.prompt_tokens == prompt}))
    return labels


def _kv_rate_panel(ax: Axes, r: GpuResults, dtype: str, prompt: int, eager: bool) -> None:
    """New tokens per second (GPU or eager time) against B, log axes, and the recompute star."""
    rate: Callable[[E2ERow], float | None] = (
        (lambda x: x.eager_tokens_per_second) if eager else (lambda x: x.tokens_per_second))
    labels = _kv_lines(ax, r, dtype, prompt, rate)
    star = _recompute_star(ax, r, dtype, prompt, rate)
    ax.set_yscale("log")
    ax.autoscale_view(scalex=False)
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo / 1.3, hi * 1.3)
    log_axis(ax)
    if star is not None:
        _freeze(ax)
        row, value = star
        low = ax.transAxes.inverted().transform(ax.transData.transform((1, value)))[1] < 0.25
        ax.annotate(f"{row.backend} without a cache,\n{row.tokens} tokens", xy=(1, value), xytext=(6, 7 if low else -7),
                    textcoords="offset points", fontsize=NOTE_PT - 0.5, va="bottom" if low else "top", ha="left",
                    color=REFERENCE, zorder=6, bbox=WHITE_BOX)
    label_ends(ax, labels)
    ax.set_ylabel(f"new tokens/s, all B sequences ({'eager' if eager else 'GPU'})", fontsize=AXIS_PT)


def _kv_ratio_panel(ax: Axes, r: GpuResults, dtype: str, prompt: int) -> None:
    """Each backend's GPU time over that of the fastest of PyTorch's kernels generating the same
    plan in the same run, against B; above RATIO_CAP named at the top edge."""
    labels = _kv_lines(ax, r, dtype, prompt, lambda x: r.kv_vs_fastest(x)[0])
    ax.axhline(1.0, color=REFERENCE, linestyle=(0, (6, 2)), linewidth=1.2, zorder=1)
    values = [1.0, *(y for line in ax.get_lines() for y in line.get_ydata())]
    lo, hi = min(values) / 1.06, min(max(values), RATIO_CAP) * 1.06
    ax.set_ylim(lo, hi)
    shown = [lab if lab.y <= hi else EndLabel(f"{lab.text} ↑ {lab.y:.1f}×", hi, None, lab.color, lab.bold)
             for lab in labels]
    label_ends(ax, [*shown, EndLabel(FASTEST, 1.0, None, REFERENCE)])
    ax.set_ylabel("GPU time ÷ PyTorch's fastest", fontsize=AXIS_PT)


def _recompute_star(ax: Axes, r: GpuResults, dtype: str, prompt: int,
                    rate: Callable[[E2ERow], float | None]) -> tuple[E2ERow, float] | None:
    """A star at B=1: the study's prefill version without a cache at the length closest to the
    B=1 plan's; (its row, its value), or None where there is none."""
    kv = [x for x in r.kv if x.dtype == dtype and x.prompt_tokens == prompt and x.batch == 1]
    point = _recompute_point(r, dtype, max(x.tokens for x in kv)) if kv else None
    value = rate(point) if point else None
    if point is None or not value:
        return None
    ax.plot([1], [value], marker="*", markersize=10, color=REFERENCE, linestyle="none", zorder=5)
    return point, value


def kv_cache_figure(r: GpuResults, dtype: str) -> Figure | None:
    """Per prompt length, against the batch: new tokens per second by GPU time, GPU time over
    PyTorch's fastest of the same run, and new tokens per second by eager time."""
    prompts = sorted({plan.prompt_tokens for plan in r.kv_plans(dtype)})
    if not prompts:
        return None
    rows = [x for x in r.kv if x.dtype == dtype]
    new = sorted({x.tokens - x.prompt_tokens for x in rows})
    texts = [_kv_look(name, dtype, r)[1] for name in _kv_names(r, dtype)]
    room = _end_label_room([*texts, *(f"{text} ↑ 8.8×" for text in texts if text in baselines()), FASTEST])
    frame = _frame(title=f"GPT-2 with a KV cache: generation against the batch, {dtype} — {r.gpu}",
                   notes=[f"GPT-2 ({rows[0].model_description()}), weights and activations in {dtype}: B sequences, "
                          f"each a prompt of P tokens then {'/'.join(map(str, new))} new tokens, greedy. tokens/s: new "
                          f"tokens of all B sequences over the time of the whole generation (prefill included). GPU "
                          f"time: the generation captured as one CUDA graph and replayed; eager: run from Python, host "
                          f"included. Middle row: GPU time over that of the fastest of PyTorch's kernels generating "
                          f"the same plan in the same run (the dashed line). {hf_generate.NAME}: Hugging Face's "
                          f"generate() with its own cache, which grows from Python, so it has eager time only. Star: "
                          f"the study's prefill version generating one sequence without a cache (recompute mode) at "
                          f"the closest length."],
                   source=r.provenance_line(dtype, rows), cols=len(prompts), rows=[3.0, 2.2, 3.0], panel_w=3.6,
                   left=0.95, right=room, wspace=0.95 + room, hspace=1.05, bottom=0.6)
    for j, prompt in enumerate(prompts):
        gpu, ratio, eager = (frame.axes[i][j] for i in range(3))
        _kv_rate_panel(gpu, r, dtype, prompt, eager=False)
        _kv_ratio_panel(ratio, r, dtype, prompt)
        _kv_rate_panel(eager, r, dtype, prompt, eager=True)
        kinds = ("GPU time", "GPU time ÷ PyTorch's fastest", "eager time, host included")
        for ax, kind in zip((gpu, ratio, eager), kinds):
            _style_axes(ax, f"P={prompt}: {kind}")
            ax.set_xlabel("sequences generated at once, B", fontsize=AXIS_PT)
    return frame.fig


PER_DTYPE = (PerDtypeFigure("decode", "decode.csv rows", GpuResults.decode_dtypes, decode_figure),
             PerDtypeFigure("kv_cache", "kv-cache rows in e2e.csv", GpuResults.kv_dtypes, kv_cache_figure))
