"""Figures drawn from the results (no GPU needed): per GPU into <plots>/<gpu>/, and one
figure comparing the GPUs into <plots>/.

Matplotlib is used through Figure objects with the Agg canvas (no pyplot, no global
backend). Every series differs from every other in colour and marker; versions are
coloured solid lines, baselines grey/black dashed lines with hollow markers. Points are
medians; whiskers span min to max (the caption says over what). Time axes over several
orders of magnitude are logarithmic and carry points, never bars.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from backends import registry
from harness.results import E2ERow, KernelRow
from harness.study import HEADLINE_SHAPES, HEADLINE_TOKENS, Shape
from harness.tables import GpuResults, backend_rank

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
_BASELINE_LINES = ("--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1)), (0, (1, 2)))
_BASELINE_GREYS = ("0.0", "0.35", "0.55", "0.2", "0.45", "0.65")
GPU_COMPARISON = "gpu_comparison.png"


def _version_palette() -> list:
    tab20 = matplotlib.colormaps["tab20"].colors
    return [c for i, c in enumerate(tab20) if i not in (14, 15)]  # without the two greys


def style(backend: str) -> dict:
    """Colour, marker and line style; baselines set apart (grey, dashed, hollow markers)."""
    baselines = registry.baseline_names()
    if backend in baselines:
        i = baselines.index(backend)
        return {"color": _BASELINE_GREYS[i % len(_BASELINE_GREYS)], "marker": _MARKERS[i % len(_MARKERS)],
                "linestyle": _BASELINE_LINES[i % len(_BASELINE_LINES)], "markerfacecolor": "none"}
    versions = [v.name for v in registry.versions()]
    i = versions.index(backend) if backend in versions else len(versions)
    palette = _version_palette()
    return {"color": palette[i % len(palette)], "marker": _MARKERS[i % len(_MARKERS)], "linestyle": "-"}


def _whiskers(median: float, low: float, high: float) -> list[list[float]]:
    return [[median - low], [high - median]]


def _finish(fig: Figure, note: str, provenance: str, path: Path) -> Path:
    fig.text(0.01, 0.035, note, fontsize=7.5, color="0.2", wrap=True)
    fig.text(0.01, 0.008, provenance, fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.06, 0.87 if fig.legends else 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def _plain_log_ticks(ax: Axes, axis: str = "y") -> None:
    """Log-scale tick labels as plain numbers (30, 100, 300), minor labels off."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    target.set_minor_formatter(NullFormatter())


def _legend(ax: Axes) -> None:
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def _model_title(rows: Sequence[E2ERow]) -> str:
    row = rows[0]
    return (f"GPT-2 ({row.model_description()}), float32, batch 1, greedy from a {row.prompt_tokens}-token "
            f"prompt, no KV cache")


def e2e_time_vs_tokens(r: GpuResults, path: Path) -> Path | None:
    if not r.e2e:
        return None
    fig = Figure(figsize=(13, 6))
    gpu_ax, eager_ax = fig.subplots(1, 2, sharey=True)
    for backend in r.backends(r.e2e):
        rows = sorted((x for x in r.e2e if x.backend == backend), key=lambda x: x.tokens)
        for ax, kind in ((gpu_ax, "gpu"), (eager_ax, "eager")):
            points = [(x.tokens, getattr(x, f"seconds_{kind}_median"), getattr(x, f"seconds_{kind}_min"),
                       getattr(x, f"seconds_{kind}_max")) for x in rows if getattr(x, f"seconds_{kind}_median")]
            if points:
                n, med, low, high = zip(*points)
                ax.errorbar(n, med, yerr=[[m - lo for m, lo in zip(med, low)], [h - m for m, h in zip(med, high)]],
                            label=backend, capsize=2, markersize=5, **style(backend))
    counts = sorted({x.tokens for x in r.e2e})
    for ax, title in ((gpu_ax, "GPU time: replays of one CUDA graph of the whole generation"),
                      (eager_ax, "eager time: run from Python, host included")):
        ax.set(xlabel="tokens generated to (prompt included)", title=title)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(counts, labels=[str(t) for t in counts])
        ax.grid(alpha=0.3, which="both")
    gpu_ax.set_ylabel("seconds (median)")
    _legend(eager_ax)
    fig.suptitle(f"{_model_title(r.e2e)} — {r.gpu}")
    first = r.e2e[0]
    note = (f"Points: median; whiskers: min to max over {first.replays or '–'} graph replays (left) and "
            f"{first.eager_runs} eager runs (right). Both axes logarithmic.")
    return _finish(fig, note, r.provenance_line(), path)


def _version_series(ax: Axes, rows: Sequence[KernelRow | E2ERow], field: str, fallback: str | None = None) -> None:
    """The versions in order as one line of points with whiskers; baselines as horizontal
    lines (the kernel reference bold black). A version without `field` (not capturable) is
    drawn as a cross at its `fallback` time (call or eager time), and says so in the legend."""
    baselines = registry.baseline_names()
    versions = [x for x in rows if x.backend not in baselines]
    position = {x.backend: i for i, x in enumerate(versions)}
    measured = [x for x in versions if getattr(x, f"{field}_median")]
    if measured:
        medians = [getattr(x, f"{field}_median") for x in measured]
        ax.errorbar([position[x.backend] for x in measured], medians,
                    yerr=[[m - getattr(x, f"{field}_min") for m, x in zip(medians, measured)],
                          [getattr(x, f"{field}_max") - m for m, x in zip(medians, measured)]],
                    color="tab:blue", marker="o", linestyle="-", capsize=3, label="versions", zorder=3)
    missing = [x for x in versions if not getattr(x, f"{field}_median") and fallback and getattr(x, fallback)]
    if missing:
        ax.plot([position[x.backend] for x in missing], [getattr(x, fallback) for x in missing], color="tab:red",
                marker="x",
                linestyle="none", markersize=9, label="no GPU time (not capturable): call/eager time")
    ax.set_xticks(range(len(versions)), labels=[x.backend for x in versions])
    for x in rows:
        if x.backend in baselines and getattr(x, f"{field}_median"):
            s = style(x.backend)
            reference = x.backend == registry.KERNEL_REFERENCE
            ax.axhline(getattr(x, f"{field}_median"), color="black" if reference else s["color"],
                       linestyle=s["linestyle"], linewidth=2.2 if reference else 1.0, label=x.backend)
    ax.tick_params(axis="x", rotation=60, labelsize=8)
    ax.grid(alpha=0.3, which="both")


def _figure_legend(fig: Figure, axes: Sequence[Axes]) -> None:
    """One legend for the whole figure, each label once."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    fig.legend(list(seen.values()), list(seen), fontsize=7.5, loc="upper right", bbox_to_anchor=(0.995, 0.93))


def progression(r: GpuResults, path: Path) -> Path | None:
    """v01 to the last version against the baselines (sdpa-efficient in bold)."""
    panels: list[tuple[str, Callable[[Axes], None]]] = []
    for shape in HEADLINE_SHAPES:
        rows = r.kernel_rows(shape)
        if rows:
            def draw(ax: Axes, rows: list[KernelRow] = rows, shape: Shape = shape) -> None:
                _version_series(ax, rows, "us_device", "us_call_median")
                ax.set(yscale="log", ylabel="kernel device time (µs, log scale)", title=f"kernel, {shape.describe()}")
                _plain_log_ticks(ax)
            panels.append(("kernel", draw))
    e2e = r.e2e_rows(HEADLINE_TOKENS)
    if e2e:
        def draw_e2e(ax: Axes) -> None:
            _version_series(ax, e2e, "seconds_gpu", "seconds_eager_median")
            ax.set_ylim(bottom=0)
            ax.set(ylabel="GPU time (s, axis from zero)", title=f"{HEADLINE_TOKENS}-token generation (GPU time)")
        panels.append(("e2e", draw_e2e))
    if not panels:
        return None
    fig = Figure(figsize=(6 * len(panels) + 2, 5.5))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (_, draw) in zip(axes, panels):
        draw(ax)
    _figure_legend(fig, axes)
    fig.suptitle(f"The versions in order against the baselines (horizontal lines; {registry.KERNEL_REFERENCE} "
                 f"bold) — {r.gpu}")
    note = ("Points: median device time per call (kernel: CUDA-graph replays of L2 flush + call, minus the "
            "flushes) or per generation (graph replays); whiskers: min to max over the replays.")
    return _finish(fig, note, r.provenance_line(), path)


def kernel_headline(r: GpuResults, path: Path) -> Path | None:
    """Every backend at the headline shapes: device time (filled) and call time (hollow)."""
    shapes = [s for s in HEADLINE_SHAPES if r.kernel_rows(s)]
    if not shapes:
        return None
    fig = Figure(figsize=(6.5 * len(shapes), 7))
    axes = fig.subplots(1, len(shapes), squeeze=False)[0]
    for ax, shape in zip(axes, shapes):
        rows = r.kernel_rows(shape)
        for y, row in enumerate(rows):
            s = style(row.backend)
            if row.us_device_median:
                ax.errorbar([row.us_device_median], [y], xerr=_whiskers(row.us_device_median, row.us_device_min,
                                                                       row.us_device_max),
                            color=s["color"], marker=s["marker"], capsize=3, linestyle="none")
            if row.us_call_median:
                ax.plot([row.us_call_median], [y], color=s["color"], marker=s["marker"], markerfacecolor="none",
                        linestyle="none", alpha=0.7)
        ax.set_yticks(range(len(rows)), labels=[x.backend for x in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set(xscale="log", xlabel="µs per call (log scale)", title=f"kernel, {shape.describe()}, causal")
        _plain_log_ticks(ax, "x")
        ax.grid(alpha=0.3, which="both", axis="x")
    fig.suptitle(f"Attention forward, float32 — {r.gpu}")
    note = ("Filled: device time per call (median; whiskers min to max over CUDA-graph replays); hollow: call time "
            "(CUDA events around one eager call, what a Python caller pays).")
    return _finish(fig, note, r.provenance_line(), path)


def kernel_time_vs_t(r: GpuResults, path: Path) -> Path | None:
    batches = sorted({x.B for x in r.kernels})
    if not batches:
        return None
    fig = Figure(figsize=(14, 6))
    axes = fig.subplots(1, len(batches), squeeze=False)[0]
    for ax, B in zip(axes, batches):
        rows = [x for x in r.kernels if x.B == B and x.us_device_median]
        for backend in r.backends(rows):
            mine = sorted((x for x in rows if x.backend == backend), key=lambda x: x.T)
            ax.plot([x.T for x in mine], [x.us_device_median for x in mine], label=backend, markersize=5,
                    **style(backend))
        heads = sorted({x.H for x in rows})
        lengths = sorted({x.T for x in rows})
        ax.set(xlabel="sequence length T", ylabel="kernel device time (µs, median)", yscale="log",
               title=f"B={B}, H={'/'.join(map(str, heads))}, d={rows[0].d if rows else ''}, causal")
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, labels=[str(t) for t in lengths])
        ax.xaxis.set_minor_formatter(NullFormatter())
        _plain_log_ticks(ax)
        ax.grid(alpha=0.3, which="both")
    _legend(axes[-1])
    fig.suptitle(f"Attention kernel device time against sequence length — {r.gpu}")
    note = ("Medians of CUDA-graph replays (L2 flushed before each call); both axes logarithmic. A backend without "
            "device time (not capturable) is missing here: the README's notes say why.")
    return _finish(fig, note, r.provenance_line(), path)


def peak_memory_vs_tokens(r: GpuResults, path: Path) -> Path | None:
    rows = [x for x in r.e2e if x.peak_memory_bytes]
    if not rows:
        return None
    fig = Figure(figsize=(11, 6))
    ax = fig.subplots()
    for backend in r.backends(rows):
        mine = sorted((x for x in rows if x.backend == backend), key=lambda x: x.tokens)
        ax.plot([x.tokens for x in mine], [x.peak_memory_bytes / 2**20 for x in mine], label=backend, markersize=5,
                **style(backend))
    ax.set(xlabel="tokens generated to (prompt included)", ylabel="peak GPU memory (MiB, weights included)",
           xscale="log", title=f"Peak GPU memory during generation, {_model_title(rows)}")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    _legend(ax)
    note = "torch's allocator peak up to each length in the eager runs; the axis starts at zero."
    return _finish(fig, note, r.provenance_line(), path)


# Per-GPU figures, in the README's order: file name -> drawing function.
FIGURES: dict[str, Callable[[GpuResults, Path], Path | None]] = {
    "progression.png": progression,
    "kernel_headline.png": kernel_headline,
    "e2e_time_vs_tokens.png": e2e_time_vs_tokens,
    "kernel_time_vs_T.png": kernel_time_vs_t,
    "peak_memory_vs_tokens.png": peak_memory_vs_tokens,
}


def gpu_comparison(gpus: Sequence[GpuResults], path: Path) -> Path | None:
    """The GPUs side by side: 512-token GPU time and kernel device time at the headline shapes."""
    measures: list[tuple[str, str, Callable[[GpuResults, str], tuple[float, float, float] | None]]] = []

    def e2e_value(r: GpuResults, backend: str):
        row = r.end_to_end(backend, HEADLINE_TOKENS)
        return (row.seconds_gpu_median, row.seconds_gpu_min, row.seconds_gpu_max) \
            if row and row.seconds_gpu_median else None

    measures.append((f"{HEADLINE_TOKENS}-token generation, GPU time", "seconds (axis from zero)", e2e_value))
    for shape in HEADLINE_SHAPES:
        def kernel_value(r: GpuResults, backend: str, shape: Shape = shape):
            row = r.kernel(backend, shape)
            return (row.us_device_median, row.us_device_min, row.us_device_max) \
                if row and row.us_device_median else None
        measures.append((f"kernel, {shape.describe()}", "device time per call (µs, log scale)", kernel_value))
    backends = sorted({x.backend for r in gpus for x in [*r.kernels, *r.e2e]}, key=backend_rank)
    if len(gpus) < 2 or not backends:
        return None
    fig = Figure(figsize=(15, 5.5 * len(measures)))
    axes = fig.subplots(len(measures), 1)
    palette = matplotlib.colormaps["tab10"].colors
    for ax, (title, ylabel, value) in zip(axes, measures):
        for g, r in enumerate(gpus):
            points = [(i + (g - (len(gpus) - 1) / 2) * 0.15, v) for i, b in enumerate(backends)
                      if (v := value(r, b)) is not None]
            if points:
                xs, vs = zip(*points)
                ax.errorbar(xs, [v[0] for v in vs], yerr=[[v[0] - v[1] for v in vs], [v[2] - v[0] for v in vs]],
                            color=palette[g % len(palette)], marker=_MARKERS[g % len(_MARKERS)], linestyle="none",
                            capsize=2, label=r.gpu)
        ax.set_xticks(range(len(backends)), labels=backends, rotation=60, fontsize=8)
        ax.set(title=title, ylabel=ylabel)
        if "log" in ylabel:
            ax.set_yscale("log")
            _plain_log_ticks(ax)
        else:
            ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle("The GPUs side by side (each GPU's own sweep; numbers never mixed)")
    note = "Points: median; whiskers: min to max over CUDA-graph replays."
    provenance = " | ".join(r.provenance_line() for r in gpus)
    return _finish(fig, note, provenance, path)


def plot_all(gpus: Sequence[GpuResults], plots_dir: Path) -> list[Path]:
    """Every figure for every GPU, and the comparison when there are several GPUs."""
    written = [p for r in gpus for name, figure in FIGURES.items()
               if (p := figure(r, plots_dir / r.slug / name)) is not None]
    comparison = gpu_comparison(gpus, plots_dir / GPU_COMPARISON)
    return written + ([comparison] if comparison else [])
