"""README tables and each version's measured effect, generated from the results.

Text between `<!-- BEGIN GENERATED: name -->` and `<!-- END GENERATED: name -->` is
replaced; nothing else in the files is touched. Tables lead with GPU times (device time
per kernel call, graph-replay time end to end) and show eager/call times beside them.
"""
from __future__ import annotations

import os
import re
import statistics
from pathlib import Path
from typing import Sequence

from backends import registry
from backends.registry import PROJECT_ROOT
from harness.plots import FIGURES, GPU_COMPARISON
from harness.results import E2ERow, KernelRow
from harness.study import HEADLINE_SHAPES, HEADLINE_TOKENS, VERSION_NOTE_SHAPES, Shape
from harness.tables import GpuResults

README = PROJECT_ROOT / "README.md"
DASH = "–"


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


def _num(value: float | None, fmt: str) -> str:
    return DASH if value is None else fmt.format(value)


def _span(low: float | None, high: float | None, fmt: str) -> str:
    return DASH if low is None or high is None else f"{fmt.format(low)}–{fmt.format(high)}"


def _yes_no(value: bool | None) -> str:
    return DASH if value is None else ("yes" if value else "**no**")


def _range(values: Sequence[int | None]) -> str:
    known = sorted({v for v in values if v is not None})
    return DASH if not known else (str(known[0]) if len(known) == 1 else f"{known[0]} to {known[-1]}")


def e2e_table(r: GpuResults, tokens: int = HEADLINE_TOKENS) -> str:
    rows = r.e2e_rows(tokens)
    if not rows:
        return f"_No end-to-end results at {tokens} tokens yet._"
    reference = r.end_to_end(registry.TOKENS_REFERENCE, tokens)
    reference_s = reference.seconds_gpu_median if reference else None
    body = [[f"`{x.backend}`", _num(x.seconds_gpu_median, "{:.3f}"), _span(x.seconds_gpu_min, x.seconds_gpu_max, "{:.3f}"),
             _num(x.seconds_eager_median, "{:.3f}"), _span(x.seconds_eager_min, x.seconds_eager_max, "{:.3f}"),
             _num(x.tokens_per_second, "{:.0f}"),
             _num(reference_s / x.seconds_gpu_median if reference_s and x.seconds_gpu_median else None, "{:.2f}×"),
             _num(x.peak_memory_bytes / 2**20 if x.peak_memory_bytes else None, "{:.0f}"),
             _yes_no(x.same_tokens_as_naive), _yes_no(x.graph_tokens_match_eager),
             _num(100 * x.attention_gpu_share if x.attention_gpu_share is not None else None, "{:.0f}%")]
            for x in rows]
    first = rows[0]
    intro = (f"End to end: GPT-2 ({first.model_description()}), {tokens} tokens ({first.prompt_tokens}-token prompt, "
             f"{tokens - first.prompt_tokens} generated), batch 1, greedy. GPU time: median of "
             f"{_range([x.replays for x in rows])} replays of the whole generation captured as one CUDA graph, after a "
             f"warm-up replay; eager: {_range([x.eager_runs for x in rows])} runs from Python, host included. "
             f"tokens/s: generated tokens over the GPU time. Attention share: 1 − (the same graph with a no-op "
             f"attention) / GPU time.")
    return intro + "\n\n" + _table(
        ["backend", "GPU (s)", "GPU min–max", "eager (s)", "eager min–max", "tokens/s", f"speedup vs "
         f"{registry.TOKENS_REFERENCE}", "peak MiB", f"same tokens as {registry.TOKENS_REFERENCE}",
         "graph tokens = eager", "attention share"], body)


def kernel_table(r: GpuResults, shape: Shape) -> str:
    rows = r.kernel_rows(shape)
    if not rows:
        return f"_No kernel results at {shape.describe()} yet._"
    body = [[f"`{x.backend}`", _num(x.us_device_median, "{:.1f}"), _span(x.us_device_min, x.us_device_max, "{:.1f}"),
             _num(x.us_call_median, "{:.1f}"), _num(x.tflops, "{:.2f}"), _num(x.ratio_to_reference, "{:.2f}"),
             _num(100 * x.fraction_of_peak if x.fraction_of_peak is not None else None, "{:.1f}%")]
            for x in rows]
    peaks = [x.peak_tflops for x in rows if x.peak_tflops]
    intro = (f"Kernel: {shape.describe()}, causal. Device time per call: median of {_range([x.replays for x in rows])} "
             f"replays of a CUDA graph of R × [L2 flush, call] minus the flushes alone, divided by R "
             f"({_range([x.reps for x in rows])}); call time: CUDA events around one eager call. float32 FMA peak "
             f"measured in the same run: {_num(statistics.median(peaks) if peaks else None, '{:.1f}')} TFLOP/s "
             f"(an 8192³ float32 matmul with TF32 off: the CUDA cores' rate; a backend that runs on the tensor "
             f"cores can exceed it).")
    return intro + "\n\n" + _table(["backend", "device (µs)", "device min–max", "call (µs)", "TFLOP/s",
                                    f"× {registry.KERNEL_REFERENCE}", "of fp32 peak"], body)


def stages_table(r: GpuResults) -> str | None:
    """Wall time of each ./run_all.sh run at the results' commit, stage by stage (None if
    none was recorded). A sweep that was interrupted and resumed shows as several runs."""
    if not r.stages:
        return None
    runs: dict[str, list] = {}
    for row in r.stages:
        runs.setdefault(row.run, []).append(row)
    names = list(dict.fromkeys(row.stage for row in r.stages))  # in the order they ran
    body = []
    for run, rows in runs.items():
        by_stage = {row.stage: row for row in rows}
        failed = [row.stage for row in rows if row.exit_status != 0]
        body.append([run.replace("T", " ").removesuffix("Z"), rows[0].mode, f"`{rows[0].backends}`",
                     *(_num(by_stage[n].seconds if n in by_stage else None, "{:.0f}") for n in names),
                     f"{sum(row.seconds for row in rows):.0f}", ", ".join(failed) or "–"])
    intro = ("Sweep wall time, `./run_all.sh` (`stages.csv`): seconds per stage of each run at this commit, before "
             "its plots and report (seconds, no GPU). A sweep that was interrupted and resumed shows as several runs.")
    return intro + "\n\n" + _table(["run (UTC)", "mode", "backends", *names, "total", "stages that failed"], body)


def _link(target: Path, readme: Path) -> str:
    return os.path.relpath(target, readme.parent).replace(os.sep, "/")


def gpu_section(r: GpuResults, plots_dir: Path, readme: Path, results_dir: Path) -> str:
    parts = [f"### {r.gpu}", f"Provenance: {r.provenance_line()}. Raw rows: `{_link(results_dir / r.slug, readme)}/`.",
             e2e_table(r), *(kernel_table(r, shape) for shape in HEADLINE_SHAPES)]
    if r.not_measured:
        parts.append("Not measured: " + "; ".join(f"`{b}`: {why}" for b, why in sorted(r.not_measured.items())) + ".")
    notes = r.notes()
    if notes:
        parts.append("Notes: " + "; ".join(f"`{b}`: {why}" for b, why in sorted(notes.items())) + ".")
    stages = stages_table(r)
    if stages:
        parts.append(stages)
    if r.problems:
        parts.append(f"Skipped {len(r.problems)} damaged rows: " + "; ".join(f"`{p}`" for p in r.problems) + ".")
    parts += [f"![{name}]({_link(plots_dir / r.slug / name, readme)})" for name in FIGURES
              if (plots_dir / r.slug / name).exists()]
    return "\n\n".join(parts)


def cross_gpu_table(gpus: Sequence[GpuResults]) -> str:
    """A row per backend; per GPU the headline GPU time and kernel device times."""
    backends = [b for b in registry.names() if any(r.end_to_end(b, HEADLINE_TOKENS) or any(
        r.kernel(b, s) for s in HEADLINE_SHAPES) for r in gpus)]
    if not backends:
        return "_No results yet._"
    header = ["backend"]
    for r in gpus:
        header += [f"{r.gpu}: {HEADLINE_TOKENS} tokens, GPU (s)",
                   *(f"{r.gpu}: kernel {s.label()} (µs)" for s in HEADLINE_SHAPES)]
    body = []
    for b in backends:
        cells = [f"`{b}`"]
        for r in gpus:
            e2e = r.end_to_end(b, HEADLINE_TOKENS)
            cells.append(_num(e2e.seconds_gpu_median if e2e else None, "{:.3f}"))
            for shape in HEADLINE_SHAPES:
                k = r.kernel(b, shape)
                cells.append(_num(k.us_device_median if k else None, "{:.1f}"))
        body.append(cells)
    return ("Every GPU side by side (medians of GPU time: CUDA-graph replays; each GPU's own sweep).\n\n"
            + _table(header, body))


def results_block(gpus: Sequence[GpuResults], plots_dir: Path, readme: Path, results_dir: Path) -> str:
    if not gpus:
        return "_No results yet: run `./run_all.sh` on a GPU._"
    parts = ["### All GPUs", cross_gpu_table(gpus)]
    if (plots_dir / GPU_COMPARISON).exists():
        parts.append(f"![{GPU_COMPARISON}]({_link(plots_dir / GPU_COMPARISON, readme)})")
    parts += [gpu_section(r, plots_dir, readme, results_dir) for r in gpus]
    return "\n\n".join(parts)


def _change(before: float | None, after: float | None) -> str:
    return DASH if before is None or after is None else f"{100 * (after - before) / before:+.1f}%"


def _measure_row(label: str, before: float | None, after: float | None, reference: float | None,
                 fmt: str) -> list[str]:
    return [label, _num(before, fmt), _num(after, fmt), _change(before, after),
            _num(after / reference if after and reference else None, "{:.2f}")]


def version_section(r: GpuResults, name: str, previous: str) -> str:
    def kernel_us(backend: str, shape: Shape) -> float | None:
        row: KernelRow | None = r.kernel(backend, shape)
        return row.us_device_median if row else None

    def e2e_s(backend: str) -> float | None:
        row: E2ERow | None = r.end_to_end(backend, HEADLINE_TOKENS)
        return row.seconds_gpu_median if row else None

    reference = registry.KERNEL_REFERENCE
    rows = [_measure_row(f"kernel device µs, {s.label()}", kernel_us(previous, s), kernel_us(name, s),
                         kernel_us(reference, s), "{:.1f}") for s in VERSION_NOTE_SHAPES]
    rows.append(_measure_row(f"{HEADLINE_TOKENS}-token generation, GPU s", e2e_s(previous), e2e_s(name),
                             e2e_s(reference), "{:.3f}"))
    return (f"On {r.gpu} ({r.provenance_line()}):\n\n"
            + _table(["measure", f"`{previous}`", f"`{name}`", "change", f"`{name}` / `{reference}`"], rows))


def versions_table() -> str:
    """The study's steps, straight from the registry."""
    rows = [[f"[`{v.name}`](versions/{v.folder}/)", v.description, " ".join(f"`{f}`" for f in v.build_flags) or DASH,
             v.input_layout, v.runs_on()] for v in registry.versions()]
    return _table(["version", "step", "extra nvcc flags", "q, k, v layout", "runs on"], rows)


def _write_if_changed(path: Path, text: str, old: str) -> bool:
    """Write `text` unless the file already holds it (`old`); True if it was written."""
    if text == old:
        return False
    path.write_text(text)
    return True


def update_readmes(gpus: Sequence[GpuResults], plots_dir: Path, results_dir: Path) -> list[Path]:
    """Rewrite the generated blocks of README.md and versions/*/README.md; the files whose
    content changed (the others are not touched)."""
    old = README.read_text()
    text = replace_block(old, "versions", versions_table())
    text = replace_block(text, "results", results_block(gpus, plots_dir, README, results_dir))
    written = [README] if _write_if_changed(README, text, old) else []
    rows = registry.versions()
    for i, version in enumerate(rows):
        previous = rows[i - 1].name if i else registry.TOKENS_REFERENCE
        path = version.source_dir / "README.md"
        body = "\n\n".join(version_section(r, version.name, previous) for r in gpus) or "_Not measured yet._"
        old = path.read_text()
        if _write_if_changed(path, replace_block(old, "measured", body), old):
            written.append(path)
    return written


def write_report(gpus: Sequence[GpuResults], plots_dir: Path, results_dir: Path, path: Path) -> Path:
    """The same tables as the README's, into a file of their own (a trial run's report)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Results\n\n" + results_block(gpus, plots_dir, path, results_dir) + "\n")
    return path
