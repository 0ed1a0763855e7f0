"""README tables and each version's measured effect, generated from the committed CSVs.

Text between `<!-- BEGIN GENERATED: name -->` and `<!-- END GENERATED: name -->` is
replaced; nothing else in the files is touched.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from harness.plots import GEN_SHAPE, THROUGHPUT_SHAPE
from harness.registry import PROJECT_ROOT, versions
from harness.results import RESULTS_ROOT, gpu_slugs
from harness.tables import GpuResults, load

README = PROJECT_ROOT / "README.md"
PLOT_FILES = ["e2e_time_vs_tokens.png", "e2e_512_progression.png", "kernel_versions.png",
              "kernel_time_vs_T.png", "peak_memory_vs_tokens.png"]


def replace_block(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- BEGIN GENERATED: {name} -->", f"<!-- END GENERATED: {name} -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text)
    return text.rstrip() + "\n\n" + block + "\n"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def e2e_table(r: GpuResults, tokens: int = 512) -> str:
    rows = r.e2e[r.e2e["tokens"] == tokens] if not r.e2e.empty else r.e2e
    if rows.empty:
        return f"_No end-to-end results at {tokens} tokens yet._"
    naive = rows[rows["backend"] == "naive"]["seconds_median"]
    naive_s = float(naive.iloc[0]) if len(naive) else None
    body = []
    for _, x in rows.iterrows():
        share = x.get("attention_gpu_share")
        same = x.get("same_tokens_as_naive")
        body.append([f"`{x['backend']}`", f"{x['seconds_median']:.3f}", f"{x['seconds_min']:.3f}–{x['seconds_max']:.3f}",
                     f"{x['tokens_per_second']:.0f}", f"{naive_s / x['seconds_median']:.2f}×" if naive_s else "–",
                     f"{x['peak_memory_bytes'] / 2**20:.0f}",
                     "–" if pd.isna(same) else ("yes" if str(same) == "True" else "no"),
                     "–" if pd.isna(share) else f"{100 * float(share):.0f}%"])
    runs = int(rows["runs"].max())
    return (f"End-to-end: GPT-2 small, {tokens} tokens, batch 1, median of {runs} runs after a warm-up.\n\n"
            + _table(["backend", "median (s)", "min–max (s)", "tokens/s", "speedup vs naive", "peak MiB",
                      "same tokens as naive", "attention share of GPU time"], body))


def kernel_table(r: GpuResults, shape: tuple[int, int, int]) -> str:
    B, H, T = shape
    rows = r.kernel_rows(B, H, T)
    if rows.empty:
        return f"_No kernel results at B={B}, T={T} yet._"
    body = [[f"`{x['backend']}`", f"{x['us_median']:.1f}", f"{x['us_min']:.1f}–{x['us_max']:.1f}",
             f"{x['tflops']:.2f}", "–" if pd.isna(x["ratio_to_sdpa_efficient"]) else f"{x['ratio_to_sdpa_efficient']:.2f}",
             f"{100 * x['fraction_of_fp32_peak']:.1f}%"] for _, x in rows.iterrows()]
    peak = rows["fp32_peak_tflops"].iloc[0]
    return (f"Kernel: B={B}, H={H}, T={T}, d=64, causal; median of {int(rows['reps'].max())} repetitions, "
            f"L2 flushed before each; float32 peak measured in the same run: {peak:.1f} TFLOP/s.\n\n"
            + _table(["backend", "median (µs)", "min–max (µs)", "TFLOP/s", "time / sdpa-efficient",
                      "of fp32 peak"], body))


def gpu_section(r: GpuResults) -> str:
    parts = [f"### {r.gpu}", f"Provenance: {r.provenance_line()}. Raw rows: `results/{r.slug}/`.",
             e2e_table(r), kernel_table(r, GEN_SHAPE), kernel_table(r, THROUGHPUT_SHAPE)]
    if r.unavailable:
        parts.append("Not measured: " + "; ".join(f"`{b}`: {why}" for b, why in sorted(r.unavailable.items())) + ".")
    parts += [f"![{name}](plots/{r.slug}/{name})" for name in PLOT_FILES
              if (PROJECT_ROOT / "plots" / r.slug / name).exists()]
    return "\n\n".join(parts)


def _value(frame: pd.DataFrame, backend: str, field: str) -> float | None:
    rows = frame[frame["backend"] == backend] if not frame.empty else frame
    return float(rows[field].iloc[0]) if len(rows) else None


def _change(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "–"
    return f"{100 * (after - before) / before:+.1f}%"


def version_section(r: GpuResults, name: str, previous: str) -> str:
    e2e = r.e2e[r.e2e["tokens"] == 512] if not r.e2e.empty else r.e2e
    rows = []
    for label, frame, field, fmt in (
            ("512-token generation (s)", e2e, "seconds_median", "{:.3f}"),
            (f"kernel µs, B={GEN_SHAPE[0]} T={GEN_SHAPE[2]}", r.kernel_rows(*GEN_SHAPE), "us_median", "{:.1f}"),
            (f"kernel µs, B={THROUGHPUT_SHAPE[0]} T={THROUGHPUT_SHAPE[2]}", r.kernel_rows(*THROUGHPUT_SHAPE),
             "us_median", "{:.1f}")):
        before, after = _value(frame, previous, field), _value(frame, name, field)
        rows.append([label, "–" if before is None else fmt.format(before), "–" if after is None else fmt.format(after),
                     _change(before, after)])
    return (f"On {r.gpu} (`results/{r.slug}/`, {r.provenance_line()}):\n\n"
            + _table(["measure", f"`{previous}`", f"`{name}`", "change"], rows))


def versions_table() -> str:
    """The study's steps, straight from the registry."""
    rows = [[f"[`{v.name}`](versions/{v.folder}/)", v.description, " ".join(f"`{f}`" for f in v.build_flags) or "–",
             "any row/batch strides" if v.strided_inputs else "contiguous"] for v in versions()]
    return _table(["version", "step", "extra nvcc flags", "q, k, v layout"], rows)


def update_files(results_root: Path = RESULTS_ROOT) -> list[Path]:
    """Rewrite the generated blocks of README.md and versions/*/README.md."""
    gpus = [load(slug, results_root) for slug in gpu_slugs(results_root)]
    written = []
    README.write_text(replace_block(README.read_text(), "versions", versions_table()))
    body = "\n\n".join(gpu_section(r) for r in gpus) or "_No results committed yet: run `./run_all.sh`._"
    README.write_text(replace_block(README.read_text(), "results", body))
    written.append(README)
    rows = versions()
    for i, version in enumerate(rows):
        previous = rows[i - 1].name if i else "naive"
        path = version.source_dir / "README.md"
        text = "\n\n".join(version_section(r, version.name, previous) for r in gpus) or "_Not measured yet._"
        path.write_text(replace_block(path.read_text(), "measured", text))
        written.append(path)
    return written

