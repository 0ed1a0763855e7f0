"""README tables and each version's measured effect, generated from the results.

Text between `<!-- BEGIN GENERATED: name -->` and `<!-- END GENERATED: name -->` is
replaced; nothing else in the files is touched. Tables lead with GPU times (device time
per kernel call, graph-replay time end to end) and show eager/call times beside them.
Every ratio in a table is a time over a reference's time measured in the same run (below 1:
faster): a kernel row's ratio as the benchmark stored it, an end-to-end row's over the
reference's row of its run (a later, partial sweep may have measured either again); where that
run has no time of the reference, the table shows a dash and says so. Every table is of one
dtype: float32, or the half-precision track's dtypes (bfloat16 in full, float16 below it in one
table).
"""
from __future__ import annotations

import os
import re
import statistics
from pathlib import Path
from typing import Callable, Iterable, Sequence

from backends import precision, registry
from backends.registry import PROJECT_ROOT, CudaVersion
from harness.bench_e2e import LOGITS_FACTOR
from harness.files import write_atomically
from harness.plots import FIGURES, GPU_COMPARISON, HEADLINE_FIGURE
from harness.results import E2ERow, KernelRow, Provenance
from harness.study import HEADLINE_SHAPES, HEADLINE_TOKENS, VERSION_NOTE_SHAPES, Shape
from harness.tables import (GpuResults, Track, backend_rank, dtype_rank, kernel_ratio, name_ranges, registry_row,
                            tracks)

README = PROJECT_ROOT / "README.md"
DASH = "–"
RATIO_RULE = "time over the reference's time measured in the same run: below 1 is faster"


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


def _unpaired(column: str, reference: str, names: Iterable[str]) -> str:
    """The sentence for ratios shown as a dash because the run that measured `names` has no time
    of `reference` ('' where there are none), so no table's text claims a ratio it lacks."""
    found = list(names)
    if not found:
        return ""
    return f" {column} is {DASH} for {name_ranges(found)}: `{reference}` has no time measured in the same run."


def _us(value: float | None) -> str:
    """Microseconds: one decimal below 1,000, thousands separated above."""
    if value is None:
        return DASH
    return f"{value:,.0f}" if value >= 1000 else f"{value:.1f}"


def _percent(value: float | None, digits: int = 0) -> str:
    return _num(100 * value if value is not None else None, f"{{:.{digits}f}}%")


def _link(target: Path, readme: Path) -> str:
    return os.path.relpath(target, readme.parent).replace(os.sep, "/")


def _shown_tracks(r: GpuResults) -> list[tuple[Track, list[str]]]:
    """Each track with the dtypes r has rows in, in the study's order (the first is the one
    its tables show in full)."""
    return [(t, present) for t in tracks() if (present := [d for d in t.dtypes if r.has(d)])]


# -- end to end ------------------------------------------------------------------------------
def _e2e_common(x: E2ERow, ratio: float | None, gpu_spread: bool, eager_spread: bool) -> list[str]:
    gpu = [_num(x.seconds_gpu_median, "{:.3f}")]
    if gpu_spread:
        gpu.append(_span(x.seconds_gpu_min, x.seconds_gpu_max, "{:.3f}"))
    eager = [_num(x.seconds_eager_median, "{:.3f}")]
    if eager_spread:
        eager.append(_span(x.seconds_eager_min, x.seconds_eager_max, "{:.3f}"))
    return [f"`{x.backend}`", *gpu, *eager,
            _num(x.tokens_per_second, "{:.0f}"), _num(ratio, "{:.2f}"),
            _num(x.peak_memory_bytes / 2**20 if x.peak_memory_bytes else None, "{:.0f}")]


def _runs(values: Sequence[int | None], what: str) -> str:
    """'2 replays', '1 run', '1 to 3 runs'."""
    counts = _range(values)
    return f"{counts} {what}" if counts != "1" else f"1 {what.removesuffix('s')}"


def _logits(x: E2ERow) -> str:
    return DASH if x.logits_mean_abs_err is None else \
        f"{x.logits_mean_abs_err:.1e} / {_num(x.logits_max_abs_err, '{:.1e}')}"


def e2e_table(r: GpuResults, dtype: str, tokens: int = HEADLINE_TOKENS) -> str:
    rows = r.e2e_rows(tokens, dtype)
    if not rows:
        return f"_No {dtype} end-to-end results at {tokens} tokens yet._"
    ratios = {x.backend: r.end_to_end_ratio(x, registry.TOKENS_REFERENCE) for x in rows}
    reference = f"`{registry.TOKENS_REFERENCE}`"
    # One run (or one timed replay) has no spread: its min-max column is left out.
    gpu_spread = any((x.replays or 0) > 1 for x in rows)
    eager_spread = any((x.eager_runs or 0) > 1 for x in rows)
    header = ["backend", "GPU (s)", *(["GPU min–max"] if gpu_spread else []), "eager (s)",
              *(["eager min–max"] if eager_spread else []),
              "tokens/s", f"time / {reference}", "peak MiB"]
    if precision.is_half(dtype):
        header += [f"tokens as {dtype} {reference}", "logits error, mean / max",
                   f"mean within {LOGITS_FACTOR}× {reference}'s"]
        extra: Callable[[E2ERow], list[str]] = lambda x: [  # noqa: E731
            _percent(x.token_agreement), _logits(x), _yes_no(x.accuracy_check)]
        rule = (f"Accuracy: greedy tokens of different half-precision kernels may part after a near-tie, so the rule "
                f"is the teacher-forced logits error on float32 {reference}'s {tokens}-token sequence against its "
                f"float32 logits: a backend passes when its mean error is at most {LOGITS_FACTOR}× {dtype} "
                f"{reference}'s. Token agreement: the share of generated tokens equal to {dtype} {reference}'s, "
                f"position by position.")
    else:
        header += [f"same tokens as {reference}"]
        extra = lambda x: [_yes_no(x.same_tokens_as_naive)]  # noqa: E731
        rule = f"Accuracy: every backend's tokens must equal {reference}'s exactly."
    header += ["graph tokens = eager", "attention share"]
    body = [_e2e_common(x, ratios[x.backend], gpu_spread, eager_spread) + extra(x)
            + [_yes_no(x.graph_tokens_match_eager), _percent(x.attention_gpu_share)] for x in rows]
    unpaired = _unpaired(f"time / {reference}", registry.TOKENS_REFERENCE,
                         (x.backend for x in rows if x.seconds_gpu_median and ratios[x.backend] is None))
    first = rows[0]
    intro = (f"End to end, {dtype}: GPT-2 ({first.model_description()}) with weights and activations in {dtype}, "
             f"{tokens} tokens ({first.prompt_tokens}-token prompt, {tokens - first.prompt_tokens} generated), batch "
             f"1, greedy. GPU time: {'median of ' if gpu_spread else ''}{_runs([x.replays for x in rows], 'replays')} "
             f"of the whole generation "
             f"captured as one CUDA graph, after a warm-up replay; eager: {_runs([x.eager_runs for x in rows], 'runs')} "
             f"from Python, host included. tokens/s: generated tokens over the GPU time; time / {reference}: GPU "
             f"{RATIO_RULE} ({dtype} {reference}).{unpaired} Attention share: 1 − (the same graph with a no-op "
             f"attention) / GPU time. {rule}")
    return intro + "\n\n" + _table(header, body)


# -- kernels ---------------------------------------------------------------------------------
def _peak_text(dtype: str, rows: Sequence[KernelRow]) -> str:
    peaks = [x.peak_tflops for x in rows if x.peak_tflops]
    name = next((x.peak for x in rows if x.peak), f"{dtype} peak")
    how = (f"an 8192³ {dtype} matmul: the dense tensor-core rate" if precision.is_half(dtype) else
           "an 8192³ float32 matmul with TF32 off: the CUDA cores' rate; a backend that runs on the tensor cores "
           "can exceed it")
    return f"{name} peak measured in the same run: {_num(statistics.median(peaks) if peaks else None, '{:.1f}')} " \
           f"TFLOP/s ({how})"


def kernel_table(r: GpuResults, shape: Shape, dtype: str) -> str:
    rows = r.kernel_rows(shape, dtype)
    if not rows:
        return f"_No {dtype} kernel results at {shape.describe()} yet._"
    reference = f"`{registry.kernel_reference(dtype)}`"
    peak = next((x.peak for x in rows if x.peak), dtype)
    body = [[f"`{x.backend}`", _us(x.us_device_median),
             f"{_us(x.us_device_min)}–{_us(x.us_device_max)}" if x.us_device_min is not None else DASH,
             _us(x.us_call_median), _num(x.tflops, "{:.2f}"), _num(kernel_ratio(x), "{:.2f}"),
             _percent(x.fraction_of_peak, 1)] for x in rows]
    intro = (f"Kernel, {dtype}: {shape.describe()}, causal. Device time per call: median of "
             f"{_range([x.replays for x in rows])} replays {_rounds_text(rows)}of a CUDA graph of R × [L2 flush, call] "
             f"minus the flushes alone, divided by R ({_range([x.reps for x in rows])}); call time: CUDA events around "
             f"one eager call. "
             f"time / {reference}: device {RATIO_RULE} (same dtype)."
             f"{_unpaired(f'time / {reference}', registry.kernel_reference(dtype), _unpaired_kernels(rows))} "
             f"{_peak_text(dtype, rows)}.")
    return intro + "\n\n" + _table(["backend", "device (µs)", "device min–max", "call (µs)", "TFLOP/s",
                                    f"time / {reference}", f"of {peak} peak"], body)


def _rounds_text(rows: Sequence[KernelRow]) -> str:
    """'in each of 3 rounds (...) ' where the rows pooled rounds, '' where each is one measurement."""
    rounds = [x.rounds for x in rows if x.rounds]
    if not rounds or max(rounds) == 1:
        return ""
    return (f"in each of {_range(rounds)} rounds (the backends' order reversed every other round, so that none is "
            "always measured last, on a GPU warmed by the others) ")


def _unpaired_kernels(rows: Iterable[KernelRow | None]) -> list[str]:
    """The backends of `rows` with a device time but no ratio: their run has no time of the reference."""
    return [x.backend for x in rows if x is not None and x.us_device_median and kernel_ratio(x) is None]


def summary_table(r: GpuResults, dtype: str) -> str:
    """One row per backend of a second dtype of a track (float16 beside bfloat16): device time
    and ratio at the headline shapes, the headline generation's GPU time and accuracy."""
    names = r.backends([x for x in [*r.kernels, *r.e2e] if x.dtype == dtype])
    reference = f"`{registry.kernel_reference(dtype)}`"
    naive = f"`{registry.TOKENS_REFERENCE}`"
    header = ["backend"]
    for shape in HEADLINE_SHAPES:
        header += [f"kernel {shape.label()} (µs)", f"time / {reference}"]
    header += [f"{HEADLINE_TOKENS} tokens, GPU (s)", f"tokens as {dtype} {naive}", "logits error, mean / max",
               f"mean within {LOGITS_FACTOR}× {naive}'s"]
    body = []
    for name in names:
        cells = [f"`{name}`"]
        for shape in HEADLINE_SHAPES:
            k = r.kernel(name, shape, dtype)
            cells += [_us(k.us_device_median if k else None), _num(kernel_ratio(k) if k else None, "{:.2f}")]
        e = r.end_to_end(name, HEADLINE_TOKENS, dtype)
        cells += [_num(e.seconds_gpu_median if e else None, "{:.3f}"), _percent(e.token_agreement if e else None),
                  _logits(e) if e else DASH, _yes_no(e.accuracy_check if e else None)]
        body.append(cells)
    unpaired = _unpaired(f"time / {reference}", registry.kernel_reference(dtype),
                         _unpaired_kernels(r.kernel(name, s, dtype) for name in names for s in HEADLINE_SHAPES))
    return (f"{dtype}, the same measurements (device times and GPU times as above; ratios: {RATIO_RULE})"
            + (f".{unpaired}" if unpaired else ":") + "\n\n" + _table(header, body))


def _listing(label: str, reasons: dict[str, str]) -> str | None:
    return f"{label}: " + "; ".join(f"`{b}`: {why}" for b, why in reasons.items()) + "." if reasons else None


def track_section(r: GpuResults, track: Track, present: Sequence[str]) -> str:
    main, others = present[0], present[1:]
    title = f"#### {main}" if not track.half_precision else \
        f"#### Half precision: {main}" + (f" ({', '.join(others)} in one table below)" if others else "")
    measured = any(x.backend in track.versions for x in [*r.kernels, *r.e2e] if x.dtype == main)
    lead = (f"The {'half-precision' if track.half_precision else track.dtype} track ({track.span()}) against "
            f"PyTorch's kernels in {main}" + ("." if measured else f"; the track's versions have no {main} rows here "
                                                                    "yet."))
    parts = [title, lead, e2e_table(r, main), *(kernel_table(r, s, main) for s in HEADLINE_SHAPES)]
    parts += [summary_table(r, d) for d in others]
    for dtype in present:
        parts.append(_listing(f"Not measured in {dtype}", r.not_measured_in(dtype)))
        parts.append(_listing(f"Notes ({dtype})", r.notes(dtype)))
    return "\n\n".join(p for p in parts if p)


# -- sweep wall time -------------------------------------------------------------------------
def _stage_name(stage: str) -> tuple[str, str]:
    """'end-to-end (stopped)' -> ('end-to-end', ' (stopped)'): one column per stage."""
    base, _, rest = stage.partition(" (")
    return base, f" ({rest}" if rest else ""


def stages_table(r: GpuResults) -> str | None:
    """Wall time of each ./run_all.sh run at the results' commits, stage by stage (None if
    none was recorded). A sweep that was interrupted and resumed shows as several runs."""
    if not r.stages:
        return None
    runs: dict[str, list] = {}
    for row in r.stages:
        runs.setdefault(row.run, []).append(row)
    names = list(dict.fromkeys(_stage_name(row.stage)[0] for row in r.stages))  # in the order they ran
    body = []
    for run, rows in runs.items():
        by_stage = {_stage_name(row.stage)[0]: row for row in rows}
        cells = [f"{by_stage[n].seconds:.0f}{_stage_name(by_stage[n].stage)[1]}" if n in by_stage else DASH
                 for n in names]
        failed = [row.stage for row in rows if row.exit_status != 0]
        body.append([run.replace("T", " ").removesuffix("Z"), rows[0].mode, f"`{rows[0].backends}`",
                     f"`{rows[0].dtypes}`", *cells, f"{sum(row.seconds for row in rows):.0f}",
                     ", ".join(failed) or DASH])
    intro = ("Sweep wall time, `./run_all.sh` (`stages.csv`): seconds per GPU stage of each run at the commits above "
             "(the plots and report stages need no GPU and take seconds). A sweep that was stopped and resumed shows "
             "as several runs.")
    table = _table(["run (UTC)", "mode", "backends", "dtypes", *names, "total", "stages that failed"], body)
    return intro + "\n\n" + table + "\n\n" + _sweep_totals(r)


def _sweep_totals(r: GpuResults) -> str:
    """One sentence: the runs of each sweep (same commit, mode, backends and dtypes; each run
    resumes the one before) added up, which is what the sweep cost from cold."""
    sweeps: dict[tuple[str, str, str, str], dict[str, float]] = {}
    for row in r.stages:
        key = (row.provenance.commit, row.mode, row.backends, row.dtypes)
        runs = sweeps.setdefault(key, {})
        runs[row.run] = runs.get(row.run, 0.0) + row.seconds
    parts = []
    for (commit, mode, backends, dtypes), runs in sweeps.items():
        total = sum(runs.values())
        parts.append(f"{mode} sweep of `{backends}` in `{dtypes}` at `{commit}`: {total:,.0f} s "
                     f"({total / 60:.1f} minutes) in {_runs([len(runs)], 'runs')}")
    return ("Each sweep's runs added up (a resumed run measures only what is missing, so the sum is about what "
            "the sweep costs from cold): " + "; ".join(parts) + ".")


# -- per GPU, all GPUs -----------------------------------------------------------------------
def _figure_links(r: GpuResults, plots_dir: Path, readme: Path) -> list[str]:
    return [f"![{name}]({_link(plots_dir / r.slug / name, readme)})" for name in FIGURES
            if name != HEADLINE_FIGURE and (plots_dir / r.slug / name).exists()]


def gpu_section(r: GpuResults, plots_dir: Path, readme: Path, results_dir: Path) -> str:
    parts = [f"### {r.gpu}", f"Provenance: {r.provenance_line()}. Raw rows: `{_link(results_dir / r.slug, readme)}/`."]
    parts += [track_section(r, track, present) for track, present in _shown_tracks(r)]
    parts.append(stages_table(r))
    if r.problems:
        parts.append(f"Skipped {len(r.problems)} damaged rows: " + "; ".join(f"`{p}`" for p in r.problems) + ".")
    figures = _figure_links(r, plots_dir, readme)
    if figures:
        parts += [f"#### Figures, {r.gpu}", *figures]
    return "\n\n".join(p for p in parts if p)


def _cross_dtypes(gpus: Sequence[GpuResults]) -> list[str]:
    """float32 and the half-precision track's first dtype (bfloat16), where any GPU has rows."""
    return sorted({t.dtype for t in tracks() if any(r.has(t.dtype) for r in gpus)}, key=dtype_rank)


def cross_gpu_table(gpus: Sequence[GpuResults]) -> str:
    """A row per backend and dtype (float32, then bfloat16); per GPU the headline generation's
    GPU time and the kernel device times at the headline shapes."""
    rows = [(b, d) for d in _cross_dtypes(gpus) for b in registry.names()
            if any(r.end_to_end(b, HEADLINE_TOKENS, d) or any(r.kernel(b, s, d) for s in HEADLINE_SHAPES)
                   for r in gpus)]
    if not rows:
        return "_No results yet._"
    header = ["backend", "dtype"]
    for r in gpus:
        header += [f"{r.gpu}: {HEADLINE_TOKENS} tokens, GPU (s)",
                   *(f"{r.gpu}: kernel {s.label()} (µs)" for s in HEADLINE_SHAPES)]
    body = []
    for b, d in rows:
        cells = [f"`{b}`", d]
        for r in gpus:
            e2e = r.end_to_end(b, HEADLINE_TOKENS, d)
            cells.append(_num(e2e.seconds_gpu_median if e2e else None, "{:.3f}"))
            for shape in HEADLINE_SHAPES:
                k = r.kernel(b, shape, d)
                cells.append(_us(k.us_device_median if k else None))
        body.append(cells)
    others = sorted({d for r in gpus for d in r.dtypes()} - set(_cross_dtypes(gpus)), key=dtype_rank)
    return ("Every GPU side by side: medians of GPU time (CUDA-graph replays), each GPU's own sweep; lower is faster."
            + (f" The {', '.join(others)} rows are in each GPU's section." if others else "") + "\n\n"
            + _table(header, body))


def results_block(gpus: Sequence[GpuResults], plots_dir: Path, readme: Path, results_dir: Path) -> str:
    if not gpus:
        return "_No results yet: run `./run_all.sh` on a GPU._"
    parts = ["### All GPUs", cross_gpu_table(gpus)]
    if (plots_dir / GPU_COMPARISON).exists():
        parts.append(f"![{GPU_COMPARISON}]({_link(plots_dir / GPU_COMPARISON, readme)})")
    parts += [gpu_section(r, plots_dir, readme, results_dir) for r in gpus]
    return "\n\n".join(parts)


# -- the headline ----------------------------------------------------------------------------
def headline_block(gpus: Sequence[GpuResults], plots_dir: Path, readme: Path) -> str:
    """The first GPU's headline figure and a small table: per track its first step, its
    fastest step and PyTorch's fastest kernel of that precision."""
    r = next((g for g in gpus if not g.empty), None)
    if r is None:
        return "_No results yet: run `./run_all.sh` on a GPU._"
    rows: list[list[str]] = []
    unpaired: dict[str, list[str]] = {}  # reference -> the picks shown with a dash for a ratio to it
    for track, present in _shown_tracks(r):
        dtype = present[0]
        reference = registry.kernel_reference(dtype)
        best = r.best(track.versions, dtype)
        first = track.versions[0] if not track.half_precision else None
        picks = [(first, f"the first step, {dtype}"), (best, f"the fastest step, {dtype}"),
                 (reference, f"PyTorch's fastest, {dtype}")]
        for name, role in picks:
            if name is None or (name == first and name == best):
                continue
            times: list[tuple[float | None, float | None, Callable[[float | None], str], str]] = []
            for shape in HEADLINE_SHAPES:
                row = r.kernel(name, shape, dtype)
                times.append((row.us_device_median if row else None, kernel_ratio(row) if row else None, _us, "µs"))
            e = r.end_to_end(name, HEADLINE_TOKENS, dtype)
            times.append((e.seconds_gpu_median if e else None, r.end_to_end_ratio(e, reference) if e else None,
                          lambda v: _num(v, "{:.3f}"), "s"))
            rows.append([f"`{name}`: {role}", *(_with_ratio(value, ratio, fmt, unit, name == reference)
                                                for value, ratio, fmt, unit in times)])
            if name != reference and any(value is not None and ratio is None for value, ratio, _, _ in times):
                unpaired.setdefault(reference, []).append(name)
    if not rows:
        return "_No results yet: run `./run_all.sh` on a GPU._"
    references = ", ".join(f"`{registry.kernel_reference(p[0])}` in {p[0]}" for _, p in _shown_tracks(r))
    header = ["", *(f"kernel, {s.label()}" for s in HEADLINE_SHAPES), f"GPT-2, {HEADLINE_TOKENS} tokens"]
    figure = plots_dir / r.slug / HEADLINE_FIGURE
    parts = [f"![{HEADLINE_FIGURE}]({_link(figure, readme)})"] if figure.exists() else []
    missing = "".join(_unpaired("The ratio", reference, names) for reference, names in unpaired.items())
    parts += [f"On the {r.gpu}: device time per kernel call (H={HEADLINE_SHAPES[0].H}, d={HEADLINE_SHAPES[0].d}, "
              f"causal) and GPU time of a {HEADLINE_TOKENS}-token GPT-2 generation; in parentheses, the time over "
              f"PyTorch's fastest kernel of the same precision ({references}) measured in the same run: below 1× is "
              f"faster.{missing} A track's fastest step has the lowest geometric mean of the two kernel times.",
              _table(header, rows)]
    return "\n\n".join(parts)


def _with_ratio(value: float | None, ratio: float | None, fmt: Callable[[float | None], str], unit: str,
                is_reference: bool) -> str:
    """'15.1 µs (0.25×)'; the reference's own time without one, a dash where its run has no
    time of the reference."""
    if value is None:
        return DASH
    return f"{fmt(value)} {unit}" + ("" if is_reference else f" ({_num(ratio, '{:.2f}×')})")


# -- the steps -------------------------------------------------------------------------------
def _capability(v: CudaVersion) -> str:
    """'≥ 7.5', or '9.0 only (sm_90a)' for an arch-specific version: a GPU's compute
    capability, not a CUDA toolkit version."""
    if v.arch_specific is not None:
        return f"{registry.capability_text(v.arch_specific)} only (sm_{registry.arch_digits(v.arch_specific, True)})"
    return f"≥ {registry.capability_text(v.min_compute_capability)}"


def versions_table(track: Track) -> str:
    """A track's steps, straight from the registry; the half-precision track's with each
    step's parent (the version its diff is read against)."""
    rows = [registry.get(name) for name in track.versions]
    parent = track.half_precision
    header = ["version", "step", *(["parent"] if parent else []), "extra nvcc flags", "q, k, v layout",
              "GPU compute capability"]
    body = [[f"[`{v.name}`](versions/{v.folder}/)", v.description, *([f"`{v.parent}`" if v.parent else DASH]
                                                                     if parent else []),
             " ".join(f"`{f}`" for f in v.build_flags) or DASH, v.input_layout, _capability(v)] for v in rows]
    return _table(header, body)


def tracks_block() -> str:
    """The introduction's sentence naming the tracks and their versions (from the registry,
    so that it names the newest step)."""
    parts = []
    for track in tracks():
        versions = "–".join(f"`{name}`" for name in track.span().split("–"))
        if track.half_precision:
            parts.append(f"**half precision** ({versions}, {'/'.join(track.dtypes)} against FlashAttention-2 "
                         "and cuDNN)")
        else:
            parts.append(f"**float32** ({versions}, float32-exact)")
    counted = {1: "One track", 2: "Two tracks"}.get(len(parts), f"{len(parts)} tracks")
    return f"{counted}: " + " and ".join(parts) + "."


def steps_block() -> str:
    """Both tracks' tables, each under its own heading."""
    parts = []
    for track in tracks():
        dtypes = " and ".join(track.dtypes)
        if track.half_precision:
            first = registry.get(track.versions[0])
            heading = (f"### Half precision: {track.span()} ({dtypes} in and out, float32 accumulation)\n\n"
                       f"Each step names its parent, the version its diff is read against; the first one's parent "
                       f"is `{first.parent}`, a float32 version.")
        else:
            heading = f"### float32: {track.span()} (float32-exact)"
        parts += [heading, versions_table(track)]
    return "\n\n".join(parts)


# -- the versions' Measured blocks -------------------------------------------------------------
def _primary_dtype(v: registry.Backend) -> str:
    return sorted(v.dtypes, key=dtype_rank)[0]


def version_section(r: GpuResults, version: CudaVersion) -> str | None:
    """The version against its parent and its dtype's kernel reference on one GPU, in its
    first dtype (bfloat16 for the half-precision track; a second dtype in a last column), or
    None when the GPU has no row of it."""
    dtype = _primary_dtype(version)
    parent = version.parent or registry.TOKENS_REFERENCE
    parent_row = registry_row(parent)
    parent_dtype = dtype if parent_row is None or parent_row.accepts(dtype) else _primary_dtype(parent_row)
    others = [d for d in sorted(version.dtypes, key=dtype_rank)[1:] if r.has(d)]
    if not any(x.backend == version.name for x in [*r.kernels, *r.e2e]):
        return None
    reference = registry.kernel_reference(dtype)

    def value(row: KernelRow | E2ERow | None) -> float | None:
        if isinstance(row, KernelRow):
            return row.us_device_median
        return row.seconds_gpu_median if row else None

    def ratio(row: KernelRow | E2ERow | None) -> float | None:
        """To the reference measured in the same run: a kernel row's stored ratio, an end-to-end
        row's over the reference's row of its run."""
        if isinstance(row, KernelRow):
            return kernel_ratio(row)
        return r.end_to_end_ratio(row, reference) if row else None

    # (label, what it is in a sentence, the latest row of a backend in a dtype, its row in the
    # run of a provenance, format)
    measures: list[tuple[str, str, Callable[[str, str], KernelRow | E2ERow | None],
                         Callable[[str, str, Provenance], KernelRow | E2ERow | None], str]] = [
        (f"kernel device µs, {s.label()}", f"the {s.label()} kernel", lambda b, d, s=s: r.kernel(b, s, d),
         lambda b, d, p, s=s: r.kernel_in_run(b, s, d, p), "{:.1f}") for s in VERSION_NOTE_SHAPES]
    measures.append((f"{HEADLINE_TOKENS}-token generation, GPU s", f"the {HEADLINE_TOKENS}-token generation",
                     lambda b, d: r.end_to_end(b, HEADLINE_TOKENS, d),
                     lambda b, d, p: r.end_to_end_in_run(b, HEADLINE_TOKENS, d, p), "{:.3f}"))
    rows, unpaired, unchanged = [], [], []
    for label, what, get, get_in_run, fmt in measures:
        after = get(version.name, dtype)
        # The parent as the version's run measured it, so that the change compares one run;
        # where that run did not measure the parent, its latest row, and no change.
        same_run_parent = get_in_run(parent, parent_dtype, after.provenance) if after else None
        before = value(same_run_parent or get(parent, parent_dtype))
        change = _change(value(same_run_parent), value(after)) if same_run_parent else DASH
        rows.append([label, _num(before, fmt), _num(value(after), fmt), change,
                     _num(ratio(after), "{:.2f}"), *(_num(value(get(version.name, d)), fmt) for d in others)])
        if value(after) is not None and ratio(after) is None:
            unpaired.append(what)
        if value(after) is not None and before is not None and same_run_parent is None:
            unchanged.append(what)
    mixed = parent_dtype != dtype
    header = ["measure", f"`{parent}`" + (f" ({parent_dtype})" if mixed else ""),
              f"`{version.name}`" + (f" ({dtype})" if mixed or others else ""), "change",
              f"`{version.name}` / `{reference}`", *(f"`{version.name}` ({d})" for d in others)]
    same_run = f"the ratio is to `{reference}`{f' in {dtype}' if mixed or precision.is_half(dtype) else ''} " \
               f"measured in the same run"
    intro = f"On {r.gpu} ({r.provenance_line(None if mixed else dtype)})"
    if mixed:
        intro += (f", `{version.name}` in {dtype} against its parent `{parent}`, a {parent_dtype} version, in "
                  f"{parent_dtype}: the change includes the change of precision; {same_run}")
    elif precision.is_half(dtype):
        intro += f", in {dtype}; {same_run}"
    else:
        intro += f"; {same_run}"
    missing = (f"\n\n`{version.name}` / `{reference}` is {DASH} for {_and(unpaired)}: `{reference}` has no time "
               f"measured in the run that measured `{version.name}`'s." if unpaired else "")
    if unchanged:
        missing += (f"\n\nThe change is {DASH} for {_and(unchanged)}: the run that measured `{version.name}`'s "
                    f"did not measure `{parent}`, whose column shows its latest row.")
    return intro + ":\n\n" + _table(header, rows) + missing


def _and(items: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _change(before: float | None, after: float | None) -> str:
    return DASH if before is None or after is None else f"{100 * (after - before) / before:+.1f}%"


# -- provenance ------------------------------------------------------------------------------
def provenance_block(gpus: Sequence[GpuResults]) -> str:
    """Per GPU, the commits its shown rows were measured at, and which rows come from each."""
    if not gpus:
        return "_No results yet._"
    body = []
    for r in gpus:
        for commit, dates, rows in r.commits():
            parts = []
            for dtype in sorted({x.dtype for x in rows}, key=dtype_rank):
                kinds = [kind for kind, cls in (("kernels", KernelRow), ("end to end", E2ERow))
                         if any(isinstance(x, cls) and x.dtype == dtype for x in rows)]
                names = name_ranges(x.backend for x in rows if x.dtype == dtype)
                parts.append(f"{dtype}: {names} ({', '.join(kinds)})")
            body.append([r.gpu, f"`{commit}`", dates, "; ".join(parts)])
    return ("Where each number in the tables comes from: the latest row of each measurement, by the commit it was "
            "measured at (generated from the rows).\n\n" + _table(["GPU", "commit", "measured", "rows shown"], body))


# -- writing ---------------------------------------------------------------------------------
def _write_if_changed(path: Path, text: str, old: str) -> bool:
    """Write `text` unless the file already holds it (`old`); True if it was written."""
    if text == old:
        return False
    write_atomically(path, text.encode())
    return True


def readme_text(old: str, gpus: Sequence[GpuResults], plots_dir: Path, results_dir: Path, readme: Path) -> str:
    text = replace_block(old, "headline", headline_block(gpus, plots_dir, readme))
    text = replace_block(text, "tracks", tracks_block())
    text = replace_block(text, "versions", steps_block())
    text = replace_block(text, "results", results_block(gpus, plots_dir, readme, results_dir))
    return replace_block(text, "provenance", provenance_block(gpus))


def update_readmes(gpus: Sequence[GpuResults], plots_dir: Path, results_dir: Path) -> list[Path]:
    """Rewrite the generated blocks of README.md and versions/*/README.md; the files whose
    content changed (the others are not touched)."""
    old = README.read_text(encoding="utf-8")
    text = readme_text(old, gpus, plots_dir, results_dir, README)
    written = [README] if _write_if_changed(README, text, old) else []
    for version in registry.versions():
        path = version.source_dir / "README.md"
        sections = [s for r in gpus if (s := version_section(r, version)) is not None]
        body = "\n\n".join(sections) or "_Not measured yet._"
        old = path.read_text(encoding="utf-8")
        if _write_if_changed(path, replace_block(old, "measured", body), old):
            written.append(path)
    return written


def write_report(gpus: Sequence[GpuResults], plots_dir: Path, results_dir: Path, path: Path) -> Path:
    """The same tables as the README's, into a file of their own (a trial run's report)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, ("# Results\n\n" + headline_block(gpus, plots_dir, path) + "\n\n"
                            + results_block(gpus, plots_dir, path, results_dir) + "\n\n## Provenance\n\n"
                            + provenance_block(gpus) + "\n").encode())
    return path

