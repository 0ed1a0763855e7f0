"""Figures regenerated from results/<gpu>/*.csv into plots/<gpu>/ (no GPU needed)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from harness.results import PLOTS_ROOT, RESULTS_ROOT, gpu_slugs  # noqa: E402
from harness.tables import BACKEND_ORDER, BASELINES, GpuResults, load  # noqa: E402

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p", "d", "H", "8"]
GEN_SHAPE = (1, 12, 512)
THROUGHPUT_SHAPE = (8, 12, 4096)


def style(backend: str) -> dict:
    """Colour, marker and line style that stay distinct across 15+ backends."""
    i = BACKEND_ORDER.index(backend) if backend in BACKEND_ORDER else len(BACKEND_ORDER)
    colour = plt.get_cmap("tab20")(i % 20)
    return {"color": colour, "marker": MARKERS[i % len(MARKERS)],
            "linestyle": "--" if backend in BASELINES else "-"}


def _finish(fig: plt.Figure, results: GpuResults, path: Path) -> Path:
    fig.text(0.01, 0.005, results.provenance_line(), fontsize=7, color="0.35")
    fig.tight_layout(rect=(0, 0.025, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def e2e_time_vs_tokens(r: GpuResults, out: Path) -> Path | None:
    if r.e2e.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 6))
    for backend, rows in r.e2e.groupby("backend", sort=False):
        rows = rows.sort_values("tokens")
        ax.errorbar(rows["tokens"], rows["seconds_median"],
                    yerr=[rows["seconds_median"] - rows["seconds_min"], rows["seconds_max"] - rows["seconds_median"]],
                    label=backend, capsize=2, markersize=5, **style(backend))
    ax.set(xlabel="generated sequence length (tokens, prompt included)", ylabel="wall time (s, median)",
           title=f"GPT-2 small greedy generation, float32, batch 1 — {r.gpu}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(r.e2e["tokens"].unique()), labels=[str(t) for t in sorted(r.e2e["tokens"].unique())])
    ax.grid(alpha=0.3)
    ax.legend(ncol=2, fontsize=8)
    return _finish(fig, r, out / "e2e_time_vs_tokens.png")


def e2e_progression(r: GpuResults, out: Path, tokens: int = 512) -> Path | None:
    rows = r.e2e[r.e2e["tokens"] == tokens]
    versions = rows[~rows["backend"].isin(BASELINES)]
    if versions.empty:
        return None
    fig, ax = plt.subplots(figsize=(10, 5.5))
    ax.bar(versions["backend"], versions["seconds_median"], color=[style(b)["color"] for b in versions["backend"]],
           yerr=[versions["seconds_median"] - versions["seconds_min"], versions["seconds_max"] - versions["seconds_median"]],
           capsize=3)
    for _, base in rows[rows["backend"].isin(BASELINES)].iterrows():
        ax.axhline(base["seconds_median"], label=f"{base['backend']} ({base['seconds_median']:.2f} s)",
                   **{k: v for k, v in style(base["backend"]).items() if k != "marker"})
    ax.set(xlabel="version", ylabel="wall time (s, median of runs; bars: min to max)",
           title=f"{tokens}-token generation across the versions — {r.gpu}")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _finish(fig, r, out / f"e2e_{tokens}_progression.png")


def kernel_versions(r: GpuResults, out: Path) -> Path | None:
    if r.kernels.empty:
        return None
    shapes = [s for s in (GEN_SHAPE, THROUGHPUT_SHAPE) if not r.kernel_rows(*s).empty]
    if not shapes:
        return None
    fig, axes = plt.subplots(2, len(shapes), figsize=(6.5 * len(shapes), 8), squeeze=False)
    for col, (B, H, T) in enumerate(shapes):
        rows = r.kernel_rows(B, H, T)
        colours = [style(b)["color"] for b in rows["backend"]]
        for row_i, (field, label) in enumerate((("us_median", "kernel time (µs, median)"), ("tflops", "TFLOP/s"))):
            ax = axes[row_i][col]
            ax.bar(rows["backend"], rows[field], color=colours)
            ax.set(ylabel=label, title=f"B={B}, H={H}, T={T}, d=64")
            if field == "us_median":
                ax.set_yscale("log")
            ax.tick_params(axis="x", rotation=60, labelsize=8)
            ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"Attention kernel across backends (causal, float32) — {r.gpu}")
    return _finish(fig, r, out / "kernel_versions.png")


def kernel_time_vs_t(r: GpuResults, out: Path) -> Path | None:
    if r.kernels.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    for ax, B in zip(axes, sorted(r.kernels["B"].unique())[:2]):
        for backend, rows in r.kernels[r.kernels["B"] == B].groupby("backend", sort=False):
            rows = rows.sort_values("T")
            ax.plot(rows["T"], rows["us_median"], label=backend, markersize=5, **style(backend))
        ax.set(xlabel="sequence length T", ylabel="kernel time (µs, median)", title=f"B={B}, H=12, d=64")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(ncol=2, fontsize=7)
    fig.suptitle(f"Attention kernel time against sequence length — {r.gpu}")
    return _finish(fig, r, out / "kernel_time_vs_T.png")


def peak_memory_vs_tokens(r: GpuResults, out: Path) -> Path | None:
    if r.e2e.empty or r.e2e["peak_memory_bytes"].isna().all():
        return None
    fig, ax = plt.subplots(figsize=(9, 6))
    for backend, rows in r.e2e.groupby("backend", sort=False):
        rows = rows.sort_values("tokens")
        ax.plot(rows["tokens"], rows["peak_memory_bytes"] / 2**20, label=backend, markersize=5, **style(backend))
    ax.set(xlabel="generated sequence length (tokens)", ylabel="peak GPU memory (MiB, weights included)",
           title=f"Peak GPU memory during generation — {r.gpu}")
    ax.set_xscale("log", base=2)
    ax.grid(alpha=0.3)
    ax.legend(ncol=2, fontsize=8)
    return _finish(fig, r, out / "peak_memory_vs_tokens.png")


FIGURES = (e2e_time_vs_tokens, e2e_progression, kernel_versions, kernel_time_vs_t, peak_memory_vs_tokens)


def plot_gpu(slug: str, results_root: Path = RESULTS_ROOT, plots_root: Path = PLOTS_ROOT) -> list[Path]:
    results = load(slug, results_root)
    return [p for figure in FIGURES if (p := figure(results, plots_root / slug)) is not None]


def plot_all(results_root: Path = RESULTS_ROOT, plots_root: Path = PLOTS_ROOT) -> list[Path]:
    written = []
    for slug in gpu_slugs(results_root):
        written += plot_gpu(slug, results_root, plots_root)
    return written

