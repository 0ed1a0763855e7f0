"""The generated parts of the study's pages, from the results (`python -m harness report`):

- README.md: the headline (each track's first and last step against PyTorch's fastest kernel),
  the tracks and their steps (from the registry), a summary of every GPU's results with
  links, and which commits each GPU's tables come from;
- results/README.md: the GPUs side by side;
- results/<gpu>/README.md: every table of one GPU (harness/gpu_page.py, a page of its own);
- versions/*/README.md: each version's "Measured" block (harness/version_notes.py).

Each block is one function, and BLOCKS says which file holds which (a new block is one
function and one entry). Every ratio is a time over that of the fastest of PyTorch's kernels
measured in the same run at the same shape, named beside it (reference_text.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from backends import precision, registry
from backends.registry import PROJECT_ROOT, CudaVersion
from harness.decode_page import DECODE_FIGURE, DECODE_TITLE, KV_FIGURE, KV_TITLE, NOT_YET, study_vs_fastest
from harness.files import write_atomically
from harness.gpu_page import (PAGE_NAME, Page, commits_sentence, full_sweep_sentence, gpu_page, quick_sweep_sentence,
                              shown_tracks)
from harness.grid_page import GRID_TITLE, grid_description, grid_line
from harness.markdown import DASH, Footnotes, and_list, link, milliseconds, num, replace_block, seconds, table, us
from harness.plots import GPU_COMPARISON, HEADLINE_FIGURE, PerDtypeFigure
from harness.reference_text import footnotes, reference_cell
from harness.results import E2ERow, KernelRow
from harness.study import HEADLINE_SHAPES, HEADLINE_TOKENS, KV_HEADLINE
from harness.tables import (GpuResults, Reference, Track, backend_rank, decode_track, dtype_rank, name_ranges,
                            prefill_backends, tracks)
from harness.version_notes import decode_version_section, version_section

README = PROJECT_ROOT / "README.md"
RESULTS_README = PROJECT_ROOT / "results" / "README.md"  # the GPUs' pages are results/<gpu>/README.md
NO_RESULTS = "_No results yet: run `./run_all.sh` on a GPU._"


@dataclass(frozen=True)
class Context:
    """What a block needs: every GPU's results, and where the page being written, the
    figures and the GPUs' pages are (for relative links)."""

    gpus: Sequence[GpuResults]
    page: Path
    plots_dir: Path
    pages_dir: Path  # results/: holds <gpu>/README.md

    def gpu_page(self, r: GpuResults) -> Path:
        return self.pages_dir / r.slug / PAGE_NAME


# -- a step's times against PyTorch's ------------------------------------------------------------
Measure = tuple[str, Callable[[GpuResults, str, str], "KernelRow | E2ERow | None"]]


def _measures() -> list[Measure]:
    """The headline's columns: the kernel at each headline shape, and the headline generation."""
    found: list[Measure] = [(f"kernel, {s.label()}", lambda r, b, d, s=s: r.kernel(b, s, d)) for s in HEADLINE_SHAPES]
    found.append((f"GPT-2, {HEADLINE_TOKENS} tokens", lambda r, b, d: r.end_to_end(b, HEADLINE_TOKENS, d)))
    return found


def _time(row: KernelRow | E2ERow | None) -> str:
    if isinstance(row, KernelRow):
        return DASH if not row.us_device_median else f"{us(row.us_device_median)} µs"
    return DASH if row is None or not row.seconds_gpu_median else f"{seconds(row.seconds_gpu_median)} s"


def _vs_fastest(r: GpuResults, row: KernelRow | E2ERow | None) -> tuple[float | None, Reference | None]:
    if isinstance(row, KernelRow):
        return r.kernel_vs_fastest(row)
    return r.end_to_end_vs_fastest(row)


def _time_and_ratio(r: GpuResults, row: KernelRow | E2ERow | None, notes: Footnotes) -> str:
    """'12.0 µs (0.20× `flex-attention`)': a time and its ratio to PyTorch's fastest kernel of its
    run, named; '(no PyTorch kernel in its run)' where that run timed none there."""
    time = _time(row)
    if time == DASH:
        return DASH
    ratio, reference = _vs_fastest(r, row)
    if reference is None:
        return f"{time} (no PyTorch kernel in its run)"
    return f"{time} ({num(ratio, '{:.2f}×')} {reference_cell(reference, notes)})"


def _reference_time(r: GpuResults, row: KernelRow | E2ERow | None, notes: Footnotes) -> str:
    """'`flex-attention` 58.8 µs': the reference of `row`'s run and its time."""
    _, reference = _vs_fastest(r, row)
    if reference is None:
        return DASH
    unit = "µs" if isinstance(row, KernelRow) else "s"
    value = us(reference.time) if isinstance(row, KernelRow) else seconds(reference.time)
    return f"{reference_cell(reference, notes)} {value} {unit}"


def last_step(r: GpuResults, track: Track, dtype: str) -> tuple[str | None, str]:
    """The track's last step measured on this GPU, and its role in words."""
    last = r.last_measured(track.versions, dtype)
    if last is None or last == track.versions[-1]:
        return last, f"the last step, {dtype}"
    later = name_ranges(track.versions[track.versions.index(last) + 1:])
    return last, f"the last step measured here, {dtype} ({later} not yet)"


def _spread(row: KernelRow | E2ERow) -> tuple[float | None, float | None]:
    """The fastest and the slowest of a row's timed replays (µs or s)."""
    if isinstance(row, KernelRow):
        return row.us_device_min, row.us_device_max
    return row.seconds_gpu_min, row.seconds_gpu_max


def beyond_spread(earlier: KernelRow | E2ERow, last: KernelRow | E2ERow) -> bool:
    """Whether `earlier` is faster than `last` by more than their replays' spread: its slowest
    replay under the last one's fastest. Two rows of one code path measured in different runs
    differ by a few percent (B=1 T=512: h23 and h24 run the same narrow kernel there), so a
    smaller difference names no faster step. Without a spread on record, the medians decide."""
    (_, earlier_max), (last_min, _) = _spread(earlier), _spread(last)
    if earlier_max is None or last_min is None:
        return True
    return earlier_max < last_min


def faster_than_last(r: GpuResults) -> str:
    """The sentence naming, per track and measure, an earlier step faster than the last one
    beyond their replays' spread (beyond_spread), or saying that none is."""
    found = []
    for track, present in shown_tracks(r):
        dtype = present[0]
        last, _ = last_step(r, track, dtype)
        if last is None:
            continue
        for label, get in _measures():
            mine = get(r, last, dtype)
            times = {v: t for v in track.versions if (t := _value(get(r, v, dtype))) is not None}
            if mine is None or _value(mine) is None or not times:
                continue
            fastest = min(times, key=lambda v: (times[v], backend_rank(v)))
            if (fastest != last and _time(get(r, fastest, dtype)) != _time(mine)
                    and beyond_spread(get(r, fastest, dtype), mine)):
                found.append(f"{label} in {dtype}, `{fastest}` ({_time(get(r, fastest, dtype))}, "
                             f"{100 * (1 - times[fastest] / times[last]):.1f}% less than `{last}`)")
    if not found:
        return ("At each of these measures no earlier step is faster than the last beyond the spread of their "
                "replays.")
    return ("Where an earlier step is faster than the last: " + "; ".join(found) + " (every step's times are on "
            "the GPU's page).")


def _value(row: KernelRow | E2ERow | None) -> float | None:
    if isinstance(row, KernelRow):
        return row.us_device_median
    return row.seconds_gpu_median if row else None


# -- the headline ----------------------------------------------------------------------------
def headline_block(ctx: Context) -> str:
    """The first GPU's headline figure and a small table: per track its first and its last
    step, each against the fastest of PyTorch's kernels in the same run, and those kernels."""
    r = next((g for g in ctx.gpus if not g.empty), None)
    if r is None:
        return NO_RESULTS
    notes = Footnotes()
    rows: list[list[str]] = []
    for track, present in shown_tracks(r):
        dtype = present[0]
        last, role = last_step(r, track, dtype)
        first = track.versions[0] if not track.half_precision else None
        for name, label in ((first, f"the first step, {dtype}"), (last, role)):
            if name is not None and (name != first or name != last or label == role):
                rows.append([f"`{name}`: {label}", *(_time_and_ratio(r, get(r, name, dtype), notes)
                                                      for _, get in _measures())])
        if last is not None:
            rows.append([f"PyTorch's fastest in `{last}`'s run, {dtype}",
                         *(_reference_time(r, get(r, last, dtype), notes) for _, get in _measures())])
    if not rows:
        return NO_RESULTS
    figure = ctx.plots_dir / r.slug / HEADLINE_FIGURE
    parts = [f"![{HEADLINE_FIGURE}]({link(figure, ctx.page)})"] if figure.exists() else []
    parts += [f"On the {r.gpu}, each track's first and last step: device time per kernel call "
              f"(H={HEADLINE_SHAPES[0].H}, d={HEADLINE_SHAPES[0].d}, causal) and GPU time of a {HEADLINE_TOKENS}-token "
              f"GPT-2 generation; in parentheses, the time over that of the fastest of PyTorch's kernels measured in "
              f"the same run at that shape, named: below 1× is faster.",
              table(["", *(label for label, _ in _measures())], rows)]
    parts += [footnotes(notes)] if footnotes(notes) else []
    parts.append(faster_than_last(r))
    parts.append(kv_headline(ctx))
    return "\n\n".join(parts)


def kv_headline(ctx: Context) -> str:
    """GPT-2 with a KV cache at the headline plan: per GPU and dtype, the study's pair against the
    fastest of PyTorch's kernels generating the same in the same run; a line for the GPUs
    without those rows."""
    notes = Footnotes()
    body, missing, model, new = [], [], None, None
    for r in (g for g in ctx.gpus if not g.empty):
        found = False
        for dtype in r.kv_dtypes():
            row, ratio, reference = study_vs_fastest(r, KV_HEADLINE, dtype)
            if row is None or not row.seconds_gpu_median:
                continue
            found, model, new = True, row.model_description(), row.tokens - row.prompt_tokens
            body.append([f"[{r.gpu}]({link(ctx.gpu_page(r), ctx.page)}#kv-cache-generation)", dtype,
                         f"`{row.backend}` ({row.parts or DASH})", milliseconds(row.seconds_gpu_median),
                         num(row.tokens_per_second, "{:,.0f}"),
                         f"{num(ratio, '{:.2f}×')} {reference_cell(reference, notes)}" if reference else DASH,
                         milliseconds(reference.time if reference else None)])
        if not found:
            missing.append(r.gpu)
    absent = f"{NOT_YET}: {and_list(missing)}." if missing else ""
    if not body:
        return f"With a KV cache ({KV_HEADLINE.label()}): {absent or NOT_YET + '.'}"
    parts = [f"With a KV cache: GPT-2 ({model}) generating {new} new tokens per sequence for "
             f"{KV_HEADLINE.batch} sequences after {KV_HEADLINE.prompt_tokens}-token prompts, GPU time of the whole "
             f"generation (one CUDA graph); the study's own pair (its last prefill and decode versions) against the "
             f"fastest of PyTorch's kernels generating the same in the same run:",
             table(["GPU", "dtype", "the study's pair", "GPU time", "new tokens/s", "time / fastest PyTorch",
                    "PyTorch's fastest"], body)]
    parts += [footnotes(notes)] if footnotes(notes) else []
    parts += [absent] if absent else []
    return "\n\n".join(parts)


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
    return table(header, body)


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
    decode = decode_track()
    if decode:
        parts.append(f"**decode** (`{decode[0]}`–`{decode[-1]}`, one query row per sequence against a KV cache, "
                     "float32, bfloat16 and float16)")
    counted = {1: "One track", 2: "Two tracks", 3: "Three tracks"}.get(len(parts), f"{len(parts)} tracks")
    return f"{counted}: " + ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1] + "."


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
    decode = decode_track()
    if decode:
        parts += [f"### Decode: {decode[0]}–{decode[-1]} (float32, bfloat16 and float16; one query row per sequence "
                  "against a KV cache)",
                  "Each decode version's kernel is one template for the three dtypes, with float32 accumulation, "
                  "and takes ragged lengths on the device and strided caches (`versions/common/decode_launch.h`). "
                  "The `study` row of the registry pairs the last decode version with the last prefill version of "
                  "the dtype's track for KV-cache generation.",
                  versions_table(Track(precision.EVERY, tuple(decode)))]
    return "\n\n".join(parts)


# -- the summary of every GPU ----------------------------------------------------------------
def results_block(ctx: Context) -> str:
    """Every GPU's page, linked, with which commits its tables come from, and each track's last
    step on each GPU against PyTorch's fastest kernel of its run."""
    gpus = [r for r in ctx.gpus if not r.empty]
    if not gpus:
        return NO_RESULTS
    notes = Footnotes()
    body = []
    for r in gpus:
        for track, present in shown_tracks(r):
            dtype = present[0]
            last, _ = last_step(r, track, dtype)
            if last is not None:
                body.append([f"[{r.gpu}]({link(ctx.gpu_page(r), ctx.page)})", dtype, f"`{last}`",
                             *(_time_and_ratio(r, get(r, last, dtype), notes) for _, get in _measures())])
    pages = ", ".join(f"[{r.gpu}]({link(ctx.gpu_page(r), ctx.page)}) ({commits_sentence(r)})" for r in gpus)
    index = link(ctx.pages_dir / "README.md", ctx.page)
    parts = [f"Each GPU's tables and figures are on a page of its own, generated from its CSVs: {pages}. "
             f"[{index}]({index}) has the GPUs side by side and says how the numbers are made.",
             f"Each track's last step on each GPU; in parentheses, the time over that of the fastest of PyTorch's "
             f"kernels measured in the same run at that shape, named: below 1× is faster.",
             table(["GPU", "dtype", "last step", *(label for label, _ in _measures())], body)]
    parts += [footnotes(notes)] if footnotes(notes) else []
    parts.append(grid_lines(ctx, gpus))
    parts.append(decode_links(ctx, gpus))
    if sweeps := sweep_lines(gpus):
        parts.append(sweeps)
    return "\n\n".join(parts)


def sweep_lines(gpus: Sequence[GpuResults]) -> str | None:
    """Per GPU that recorded one, what its latest whole sweep and its latest `./run_all.sh
    --quick` took (stages.csv)."""
    lines = []
    for r in gpus:
        parts = [f"{label} {sentence}" for label, sentence in
                 (("whole sweep", full_sweep_sentence(r)), ("`--quick`", quick_sweep_sentence(r))) if sentence]
        if parts:
            lines.append(f"- {r.gpu}: " + "; ".join(parts) + ".")
    if not lines:
        return None
    return ("What a sweep took on each GPU, from its `stages.csv`: the latest `./run_all.sh` of every backend in "
            "every dtype (a stopped run resumes, so its runs add up to about what the sweep costs from cold), and "
            "the latest `--quick` (a build from nothing compiles the quick sweep's versions, a rebuild finds them "
            "built). The plots and report stages need no GPU and are not timed there.\n\n" + "\n".join(lines))


def grid_lines(ctx: Context, gpus: Sequence[GpuResults]) -> str:
    """Per GPU, one line: each track's worst ratio on the prefill grid (with its shape) and the
    geometric mean of its ratios, or that it has not measured the grid yet."""
    lines = [f"- [{r.gpu}]({link(ctx.gpu_page(r), ctx.page)}#{_anchor(GRID_TITLE)}): {grid_line(r)}." for r in gpus]
    return (f"The prefill grid ({grid_description()}): each track's last version measured there, its time over that "
            f"of the fastest of PyTorch's kernels of the same run at each shape; the worst and the geometric mean:\n\n"
            + "\n".join(lines))


def _anchor(title: str) -> str:
    """'## KV-cache generation' -> 'kv-cache-generation' (GitHub's heading anchors)."""
    return title.lstrip("# ").lower().replace(" ", "-")


def _figure_links(ctx: Context, r: GpuResults, figure: PerDtypeFigure, dtypes: list[str]) -> str:
    found = [f"[{d}]({link(path, ctx.page)})" for d in dtypes
             if (path := ctx.plots_dir / r.slug / figure.name(d)).exists()]
    return f" (figures: {', '.join(found)})" if found else ""


def decode_links(ctx: Context, gpus: Sequence[GpuResults]) -> str:
    """Per GPU, its decode and KV-cache generation sections and figures, or that it has none yet."""
    lines = []
    for r in gpus:
        page = link(ctx.gpu_page(r), ctx.page)
        parts = [f"[{title.lstrip('# ')}]({page}#{_anchor(title)}){_figure_links(ctx, r, figure, dtypes)}"
                 for title, figure, dtypes in ((DECODE_TITLE, DECODE_FIGURE, r.decode_dtypes()),
                                               (KV_TITLE, KV_FIGURE, r.kv_dtypes())) if dtypes]
        lines.append(f"- {r.gpu}: " + ("; ".join(parts) if parts else f"{NOT_YET[0].lower()}{NOT_YET[1:]}") + ".")
    return (f"The decode track ({name_ranges(decode_track())}: one new query row per sequence against a KV cache, "
            f"against PyTorch's kernels and the rate of a copy) and GPT-2 generating with a KV cache, per GPU:\n\n"
            + "\n".join(lines))


def provenance_block(ctx: Context) -> str:
    """Per GPU, the commits its tables' rows were measured at (its page says which rows come
    from which)."""
    gpus = [r for r in ctx.gpus if not r.empty]
    if not gpus:
        return "_No results yet._"
    lines = []
    for r in gpus:
        commits = ", ".join(f"`{commit}`" for commit, _, _ in r.commits())
        lines.append(f"- {r.gpu}: {commits_sentence(r)}: {commits} ([which rows come from which]"
                     f"({link(ctx.gpu_page(r), ctx.page)}#provenance)).")
    return ("Which commits each GPU's tables come from, generated from the rows (each table shows the latest row "
            "of every measurement):\n\n" + "\n".join(lines))


# -- the GPUs side by side ---------------------------------------------------------------------
def _cross_dtypes(gpus: Sequence[GpuResults]) -> list[str]:
    """float32 and the half-precision track's first dtype (bfloat16), where any GPU has rows."""
    return sorted({t.dtype for t in tracks() if any(r.has(t.dtype) for r in gpus)}, key=dtype_rank)


def cross_gpu_table(gpus: Sequence[GpuResults]) -> str:
    """A row per backend and dtype (float32, then bfloat16); per GPU the headline generation's
    GPU time and the kernel device times at the headline shapes."""
    rows = [(b, d) for d in _cross_dtypes(gpus) for b in prefill_backends()
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
            cells.append(seconds(e2e.seconds_gpu_median if e2e else None))
            for shape in HEADLINE_SHAPES:
                k = r.kernel(b, shape, d)
                cells.append(us(k.us_device_median if k else None))
        body.append(cells)
    others = sorted({d for r in gpus for d in r.dtypes()} - set(_cross_dtypes(gpus)), key=dtype_rank)
    return ("Every GPU side by side: medians of GPU time (CUDA-graph replays), each GPU's own sweep; lower is faster."
            + (f" The {', '.join(others)} rows are on each GPU's page." if others else "") + "\n\n"
            + table(header, body))


def gpus_block(ctx: Context) -> str:
    """results/README.md: the GPUs' pages, the side-by-side table and figure."""
    gpus = [r for r in ctx.gpus if not r.empty]
    if not gpus:
        return NO_RESULTS
    parts = ["Each GPU's page: " + ", ".join(f"[{r.gpu}]({link(ctx.gpu_page(r), ctx.page)})" for r in gpus) + ".",
             cross_gpu_table(gpus)]
    if (ctx.plots_dir / GPU_COMPARISON).exists():
        parts.append(f"![{GPU_COMPARISON}]({link(ctx.plots_dir / GPU_COMPARISON, ctx.page)})")
    return "\n\n".join(parts)


# -- writing ---------------------------------------------------------------------------------
Block = Callable[[Context], str]
# The generated blocks of each page, by file: name -> function.
README_BLOCKS: dict[str, Block] = {"headline": headline_block, "tracks": lambda _: tracks_block(),
                                   "versions": lambda _: steps_block(), "results": results_block,
                                   "provenance": provenance_block}
RESULTS_BLOCKS: dict[str, Block] = {"gpus": gpus_block}


def fill_blocks(text: str, blocks: dict[str, Block], ctx: Context) -> str:
    for name, block in blocks.items():
        text = replace_block(text, name, block(ctx))
    return text


def readme_text(old: str, gpus: Sequence[GpuResults], plots_dir: Path, pages_dir: Path, readme: Path) -> str:
    return fill_blocks(old, README_BLOCKS, Context(gpus, readme, plots_dir, pages_dir))


def _write_if_changed(path: Path, text: str) -> bool:
    """Write `text` unless the file already holds it; True if it was written."""
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text.encode())
    return True


def update_readmes(gpus: Sequence[GpuResults], plots_dir: Path) -> list[Path]:
    """Rewrite the generated blocks of README.md, results/README.md and versions/*/README.md,
    and each GPU's page; the files whose content changed (the others are not touched)."""
    return update_pages(gpus, plots_dir) + update_version_notes(gpus)


def update_pages(gpus: Sequence[GpuResults], plots_dir: Path) -> list[Path]:
    """README.md's and results/README.md's generated blocks and each GPU's page; those changed."""
    pages_dir = RESULTS_README.parent
    written = []
    for path, blocks in ((README, README_BLOCKS), (RESULTS_README, RESULTS_BLOCKS)):
        text = fill_blocks(path.read_text(encoding="utf-8"), blocks, Context(gpus, path, plots_dir, pages_dir))
        if _write_if_changed(path, text):
            written.append(path)
    for r in gpus:
        path = pages_dir / r.slug / PAGE_NAME
        if _write_if_changed(path, gpu_page(Page(r, path, plots_dir, pages_dir))):
            written.append(path)
    return written


def update_version_notes(gpus: Sequence[GpuResults]) -> list[Path]:
    """Rewrite each version's "Measured" block (a decode version's at the end of its notes, with
    its heading); the files whose content changed."""
    written = []
    for version in [*registry.versions(), *registry.decode_versions()]:
        path = version.source_dir / "README.md"
        old = path.read_text(encoding="utf-8")
        if _write_if_changed(path, replace_block(old, "measured", _measured_block(gpus, version))):
            written.append(path)
    return written


def _measured_block(gpus: Sequence[GpuResults], version: registry.KernelVersion) -> str:
    if isinstance(version, registry.DecodeVersion):
        return decode_version_section(gpus, version)
    sections = [s for r in gpus if (s := version_section(r, version)) is not None]
    return "\n\n".join(sections) or "_Not measured yet._"


def write_report(gpus: Sequence[GpuResults], plots_dir: Path, results_dir: Path, path: Path) -> Path:
    """The same tables as the README's and the GPUs' pages, into one file of their own (a trial
    run's report)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ctx = Context(gpus, path, plots_dir, results_dir)
    pages = [re.sub(r"^(#+) ", r"#\1 ", gpu_page(Page(r, path, plots_dir, results_dir)), flags=re.M)
             for r in gpus if not r.empty]  # each page's headings one level down
    write_atomically(path, "\n\n".join(["# Results", headline_block(ctx), results_block(ctx), gpus_block(ctx),
                                         "## Provenance", provenance_block(ctx), *pages]).encode())
    return path
