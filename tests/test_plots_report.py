"""Plots and tables from synthetic results of two GPUs (tests/fixtures, no GPU), with the
half-precision rows (as after a sweep of every dtype) and without them (float32 only)."""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import filecmp
import io
import os
import struct
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text

from backends import precision, registry
from harness import cli as harness_cli
from harness import decode_plots, grid_plots
from harness.grid import grid_dtypes
from harness.plots import (FIGURES, GPU_COMPARISON, HEADLINE_FIGURE, gpu_comparison, look, per_dtype_figures,
                           plot_all, save)
from harness.decode_page import kv_section
from harness.gpu_page import SECTIONS, Page, e2e_table, full_sweep_sentence, gpu_page, quick_sweep_sentence
from harness.markdown import replace_block, us
from harness.report import (README, RESULTS_README, Context, cross_gpu_table, headline_block, readme_text, sweep_lines,
                            results_block)
from harness.version_notes import decode_version_section, version_section
from backends.registry import PROJECT_ROOT
from harness.results import DECODE_TIMES, E2E, ResultsFileError, gpu_slugs
from harness.study import (DECODE_NOTE_SHAPES, HEADLINE_SHAPES, HEADLINE_TOKENS, KV_HEADLINE, QUICK_KERNEL_SHAPES,
                           QUICK_TOKEN_COUNTS, VERSION_NOTE_SHAPES)
from harness.tables import baselines, load, load_all, name_ranges, original_setup, prefill_backends, tracks
from tests.ahead import Ahead, takes
from tests.conftest import read_once
from tests.scripts import load_script

FIXTURES = Path(__file__).parent / "fixtures"
RESULTS = FIXTURES / "results"
GPU_A = "fixture-gpu-a-synthetic-numbers"
FLOAT32, BFLOAT16, FLOAT16 = precision.FLOAT32, precision.BFLOAT16, precision.FLOAT16
HALF_TRACK = next(t for t in tracks() if t.half_precision)
FULL_TRACK = next(t for t in tracks() if not t.half_precision)


def subset(out: Path, keep: Callable[[str, dict[str, str]], bool]) -> Path:
    """The fixtures' rows that `keep(file name, row)` keeps, as a results folder under `out`."""
    for path in RESULTS.glob("*/*.csv"):
        target = out / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
        kept = [rows[0]] + [r for r in rows[1:] if keep(path.name, dict(zip(rows[0], r)))]
        with target.open("w", newline="") as f:
            csv.writer(f).writerows(kept)
    return out


def page(r, results: Path = RESULTS) -> str:
    """The GPU's page, as `report` writes it into its results folder."""
    return gpu_page(Page(r, results / r.slug / "README.md", Path("plots"), results))


def page_without_kv(r, results: Path = RESULTS) -> str:
    return gpu_page(Page(r, results / r.slug / "README.md", Path("plots"), results),
                    [s for s in SECTIONS if s is not kv_section])


def headline(gpus, results: Path = RESULTS) -> str:
    return headline_block(Context(gpus, README, Path("plots"), results))


def float32_only(out: Path) -> Path:
    """The fixtures without their half-precision rows: what a float32-only sweep leaves."""
    return subset(out, lambda _, row: row.get("dtype", FLOAT32) == FLOAT32)


def quick_sweep(out: Path) -> Path:
    """The fixtures' rows at the shapes and lengths of ./run_all.sh --quick."""
    shapes = {(s.B, s.H, s.T) for s in QUICK_KERNEL_SHAPES}
    def keep(name: str, row: dict[str, str]) -> bool:
        if name == "kernels.csv":
            return (int(row["B"]), int(row["H"]), int(row["T"])) in shapes
        return name != "e2e.csv" or int(row["tokens"]) in QUICK_TOKEN_COUNTS

    return subset(out, keep)


@pytest.fixture(scope="module")
def gpus(fixture_results) -> list:
    """Both fixture GPUs' results, loaded once for the session (GPU A first)."""
    assert [r.slug for r in fixture_results] == [GPU_A, "fixture-gpu-b-synthetic-numbers"]
    return fixture_results


@pytest.fixture(scope="module")
def f32_results(tmp_path_factory) -> Path:
    return float32_only(tmp_path_factory.mktemp("float32-only"))


@pytest.fixture(scope="module")
def f32_gpus(f32_results) -> list:
    """Both GPUs' results in `f32_results`, loaded once (GPU A first)."""
    found = load_all(f32_results)
    assert found[0].slug == GPU_A
    return found


def fixtures_written_afresh(ahead: Ahead) -> list[Path]:
    """make_fixtures.py run into a new folder, in a child process (a job started ahead: seconds
    of writing rows on another core); the files it wrote."""
    out = ahead.tmp("fixtures-afresh")
    # Thousands of rows, each appended with an fsync: durability is not tested here.
    script = ("import os, runpy, sys; os.fsync = lambda fd: None; sys.argv = sys.argv[1:]; "
              "runpy.run_path(sys.argv[0], run_name='__main__')")
    subprocess.run([sys.executable, "-c", script, str(FIXTURES / "make_fixtures.py"), str(out)], check=True,
                   capture_output=True, text=True, cwd=PROJECT_ROOT)
    return sorted(out.rglob("*.csv"))


@takes(fixtures_written_afresh)
def test_fixtures_have_the_current_schema(ahead):
    """The committed fixtures are what make_fixtures.py writes today, file for file."""
    written = ahead(fixtures_written_afresh)
    out = written[0].parent.parent
    assert {p.relative_to(out) for p in written} == {p.relative_to(RESULTS) for p in RESULTS.rglob("*.csv")}
    for path in written:
        committed = RESULTS / path.relative_to(out)
        assert filecmp.cmp(path, committed, shallow=False), f"{committed} is stale: run {FIXTURES}/make_fixtures.py"


def test_fixtures_have_every_dtype_of_every_backend(gpus):
    """Every row the prefill benchmarks measure, in every dtype: measured where it accepts the
    dtype, refused elsewhere."""
    r = gpus[0]
    for backend in map(registry.get, prefill_backends()):
        for dtype in precision.EVERY:
            measured = r.kernel(backend.name, HEADLINE_SHAPES[0], dtype) is not None
            assert measured == backend.accepts(dtype), (backend.name, dtype)
            if not measured:
                assert r.not_measured[(backend.name, dtype)].startswith(f"not available for {dtype}")


# -- figures ---------------------------------------------------------------------------------
def _outside(fig) -> list[str]:
    """Every visible, non-empty text whose box leaves the canvas (after the figure was drawn)."""
    renderer = fig.canvas.get_renderer()
    width, height = fig.canvas.get_width_height()
    problems = []
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip():
            continue
        box = text.get_window_extent(renderer)
        if box.x0 < -0.5 or box.y0 < -0.5 or box.x1 > width + 0.5 or box.y1 > height + 0.5:
            problems.append(f"{text.get_text()[:40]!r} at ({box.x0:.0f}, {box.y0:.0f})–({box.x1:.0f}, {box.y1:.0f}) "
                            f"on a {width}x{height} canvas")
    return problems


@pytest.fixture(scope="module")
def drawn(gpus) -> dict[str, object]:
    """GPU A's figures and the comparison, from the full fixtures, laid out as when saved."""
    figures = {name: fig for name, draw in FIGURES.items() if (fig := draw(gpus[0])) is not None}
    figures[GPU_COMPARISON] = gpu_comparison(gpus)
    for fig in figures.values():
        fig.draw_without_rendering()
    return figures


def test_every_figure_is_drawn_and_every_text_lies_inside_the_canvas(drawn):
    assert set(drawn) == {*FIGURES, GPU_COMPARISON}
    for name, fig in drawn.items():
        assert not _outside(fig), (name, _outside(fig))


def test_float32_only_results_draw_no_half_precision_panels(f32_gpus):
    """Without half-precision rows: no precision-cost figure, one row of panels per figure,
    and still nothing outside the canvas."""
    gpus = f32_gpus
    figures = {name: draw(gpus[0]) for name, draw in FIGURES.items()}
    assert figures.pop("precision_cost.png") is None
    figures[GPU_COMPARISON] = gpu_comparison(gpus)
    for name, fig in figures.items():
        assert fig is not None, name
        fig.draw_without_rendering()
        assert not _outside(fig), (name, _outside(fig))
        titles = " ".join(ax.get_title(loc="left") for ax in fig.axes)
        assert BFLOAT16 not in titles and "half precision" not in titles, (name, titles)


def test_a_quick_sweep_draws_every_figure_inside_the_canvas(tmp_path):
    """--quick: one length at B=8, no 512-token generation (its panels are left out)."""
    gpus = load_all(quick_sweep(tmp_path))
    figures = {name: FIGURES[name](gpus[0]) for name in ("progression.png", "precision_cost.png",
                                                         "kernel_time_vs_T.png", "e2e_time_vs_tokens.png")}
    figures[GPU_COMPARISON] = gpu_comparison(gpus)
    for name, fig in figures.items():
        assert fig is not None, name
        fig.draw_without_rendering()
        assert not _outside(fig), (name, _outside(fig))
    titles = " ".join(ax.get_title(loc="left") for ax in figures[GPU_COMPARISON].axes)
    assert f"{HEADLINE_TOKENS}-token" not in titles


def test_figures_are_deterministic(drawn, tmp_path):
    """The same results give the same bytes (and the PNG is the figure's own size)."""
    one, two = (save(drawn[HEADLINE_FIGURE], tmp_path / name) for name in ("one.png", "two.png"))
    assert one.read_bytes() == two.read_bytes()
    assert one.read_bytes()[16:24] == struct.pack(">II", *drawn[HEADLINE_FIGURE].canvas.get_width_height())


def test_the_half_precision_panels_hold_the_half_track_against_its_dtype(drawn):
    """Small multiples per track: the second row of kernel_time_vs_T labels the half-precision
    versions and PyTorch's bfloat16 kernels, none of the float32 versions."""
    fig = drawn["kernel_time_vs_T.png"]
    half_row = [ax for ax in fig.axes if ax.get_title(loc="left").startswith("half precision (bfloat16)")]
    assert half_row
    labels = {t.get_text() for ax in half_row for t in ax.texts}
    assert registry.kernel_reference(BFLOAT16) in labels
    assert set(HALF_TRACK.emphasised(3)) <= labels
    assert not labels & set(FULL_TRACK.versions)


def test_progression_kernel_panels_span_the_versions_and_name_far_baselines_at_the_edge(drawn, gpus):
    """A progression kernel panel spans its versions and PyTorch's fastest kernel: in the
    fixtures half-precision naive at B=8 T=4096 is 20x cuDNN, so it gets no line, but a label
    at the panel's top edge with its time, and the scale stops well below it."""
    fig = drawn["progression.png"]
    shape = max(HEADLINE_SHAPES, key=lambda s: s.B * s.T)
    title = f"half precision ({BFLOAT16}): kernel, {shape.label()}"
    ax = next(ax for ax in fig.axes if ax.get_title(loc="left") == title)
    naive = gpus[0].kernel("naive", shape, BFLOAT16).us_device_median
    reference = registry.kernel_reference(BFLOAT16)
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith("naive ↑ ") and t.endswith(" µs") for t in texts), texts
    assert reference in texts, texts  # inside the span: drawn and labelled as before
    assert ax.get_ylim()[1] < naive / 2, (ax.get_ylim(), naive)


def test_looks_set_the_last_steps_apart_and_give_each_baseline_a_colour():
    """No baseline is drawn as 'the' reference (the fastest differs by shape and run)."""
    last = FULL_TRACK.versions[-1]
    assert look(last, FLOAT32).strong and not look(FULL_TRACK.versions[0], FLOAT32).strong
    assert look(registry.kernel_reference(FLOAT32), FLOAT32) == look(registry.kernel_reference(FLOAT32), BFLOAT16)
    colours = {look(b, BFLOAT16).color for b in baselines()}
    assert len(colours) == len(baselines())  # every baseline its own colour


def test_name_ranges_join_consecutive_versions_of_a_track():
    assert name_ranges([*FULL_TRACK.versions, "naive"]) == f"naive, {FULL_TRACK.span()}"
    assert name_ranges([FULL_TRACK.versions[-1], HALF_TRACK.versions[0]]) == \
        f"{FULL_TRACK.versions[-1]}, {HALF_TRACK.versions[0]}"


# -- tables ----------------------------------------------------------------------------------
def test_tables_come_from_the_csv(gpus):
    r = gpus[0]
    section = page(r)
    naive = r.end_to_end("naive", HEADLINE_TOKENS, FLOAT32)
    assert f"| `naive` | {naive.seconds_gpu_median:.3f} | {naive.seconds_gpu_min:.3f}–" \
           f"{naive.seconds_gpu_max:.3f} | {naive.seconds_eager_median:.3f} |" in section
    efficient = r.kernel(registry.KERNEL_REFERENCE, HEADLINE_SHAPES[1], FLOAT32)
    assert f"| `{registry.KERNEL_REFERENCE}` | {efficient.us_device_median:,.0f} |" in section
    assert "`sdpa-flash`: not available for float32" in section
    for backend in registry.BACKENDS:
        if backend.end_to_end:  # a reason on its registry row, shown with the row
            assert f"`{backend.name}`: {backend.end_to_end}" in section
    assert "`v02`: not capturable" in section  # a note, never silent
    assert "GPT-2 (12 layers, 12 heads, width 768)" in section


@pytest.mark.parametrize("count, measure, column, said", [
    ("eager_runs", "eager", "eager min–max", ("eager: 2 runs from Python", "eager: 1 run from Python")),
    ("replays", "gpu", "GPU min–max", ("GPU time: median of 2 replays", "GPU time: 1 replay of")),
])
def test_one_run_has_no_spread_column(tmp_path, count, measure, column, said, gpus):
    """The fixtures have two eager runs and two timed replays per row (a spread to show); a
    sweep with one of either has no min–max column for it."""
    results = subset(tmp_path, lambda *_: True)
    path = results / GPU_A / "e2e.csv"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        if row[count]:
            row[count] = "1"
            row[f"seconds_{measure}_min"] = row[f"seconds_{measure}_max"] = row[f"seconds_{measure}_median"]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    two = e2e_table(gpus[0], FLOAT32)
    one = e2e_table(load(GPU_A, results), FLOAT32)
    assert f"| {column} |" in two and said[0] in two
    assert column not in one and said[1] in one
    header, rule, first = one.splitlines()[2:5]
    assert header.count("|") == rule.count("|") == first.count("|"), "every row has the header's columns"


def test_each_precision_has_its_own_section_reference_and_peak(gpus):
    section = page(gpus[0])
    float32, half = section.split("## Half precision: bfloat16")
    half = half.split("\n## ")[0]  # the sections after the tracks' (the prefill grid's, ...) show both
    assert "## float32" in float32 and "| `v11` |" in float32 and "of float32 FMA peak" in float32
    assert "`sdpa-cudnn` |" in half and "of bfloat16 tensor peak" in half
    assert "logits error, mean / max" in half and "tokens as bfloat16 `naive`" in half
    assert "| `sdpa-math` |" in half and "| **no** |" in half  # the fixtures' one failing half-precision row
    assert f"{FLOAT16}, the same measurements" in half  # float16 in one table beside bfloat16
    for version in FULL_TRACK.versions:
        assert f"`{version}`" not in half  # a float32 version is not 'missing' from the half tables
    for version in HALF_TRACK.versions:
        assert f"| `{version}` |" not in float32


def test_float32_only_results_have_no_half_precision_section(f32_results, f32_gpus):
    section = page(f32_gpus[0], f32_results)
    assert "## float32" in section and "Half precision" not in section and "sdpa-cudnn`: not avail" in section


def test_sweep_wall_time_comes_from_stages_csv(gpus):
    """Each run at the results' commit is a row, stage by stage; a run at another commit is
    not shown, and a GPU without stages.csv has no such table."""
    section = page(gpus[0])
    assert "| run (UTC) | mode | backends | dtypes | build | correctness gate | kernel benchmark | end-to-end | " \
           "total | stages that failed |" in section
    assert "| 2026-01-01 00:00:00 | full | `all` | `all` | 41 | 65 | – | – | 106 | – |" in section
    assert "| 2026-01-01 01:00:00 | full | `all` | `all` | 1 | 2 | 62 | 401 | 466 | end-to-end |" in section
    assert "2026-01-02" not in section and "| 99 |" not in section
    commit = gpus[0].stages[0].provenance.commit
    assert f"full sweep of `all` in `all` at `{commit}`: 572 s (9.5 minutes) in 2 runs." in section
    other = page(gpus[1])
    assert "Sweep wall time" not in other


def test_quick_sweep_line_names_the_latest_quick_run(gpus):
    """The front page's line on --quick adds up the latest quick run's stages (not an older
    quick run, not a full one), names its build and commit, and says which stage failed; a
    GPU with no quick run has no line."""
    r = gpus[0]
    assert quick_sweep_sentence(r) is None  # the fixtures' runs are full sweeps
    first, second = sorted({row.run for row in r.stages})
    quick = [dataclasses.replace(row, mode="quick") for row in r.stages]
    sentence = quick_sweep_sentence(dataclasses.replace(r, stages=quick))
    latest = [row for row in quick if row.run == second]
    total = sum(row.seconds for row in latest)
    build = next(row.seconds for row in latest if row.stage == "build")
    assert sentence.startswith(f"{total:,.0f} s ({total / 60:.1f} minutes) of GPU stages, its build {build:,.0f} s")
    assert f"`{latest[0].provenance.commit}` on {second[:10]}" in sentence
    assert "(failed: end-to-end)" in sentence
    only_first = [row for row in quick if row.run == first]
    assert "failed" not in quick_sweep_sentence(dataclasses.replace(r, stages=only_first))
    assert sweep_lines([dataclasses.replace(r, stages=quick)]).endswith(f"- {r.gpu}: `--quick` {sentence}.")


def test_whole_sweep_line_adds_up_its_runs_and_says_whether_it_finished(gpus):
    """The fixtures' two runs of every backend and dtype at one commit (572 s): the second's
    end-to-end failed, so the sweep is not finished; with that stage passing, it is."""
    r = gpus[0]
    commit = r.stages[0].provenance.commit
    assert full_sweep_sentence(r) == (f"at `{commit}` not finished: its runs so far, 572 s (9.5 minutes) in 2 runs, "
                                      "stopped before the end")
    passed = [dataclasses.replace(row, exit_status=0) for row in r.stages]
    assert full_sweep_sentence(dataclasses.replace(r, stages=passed)) == f"at `{commit}`, 572 s (9.5 minutes) in 2 runs"
    assert f"- {r.gpu}: whole sweep at `{commit}` not finished" in sweep_lines(gpus)
    subset = [dataclasses.replace(row, backends="v01,v02") for row in r.stages]
    assert full_sweep_sentence(dataclasses.replace(r, stages=subset)) is None  # not every backend


def test_cross_gpu_table_has_a_column_per_gpu_and_measure_and_a_row_per_dtype(gpus):
    table = cross_gpu_table(gpus)
    header = table.splitlines()[2]
    for r in gpus:
        assert f"{r.gpu}: {HEADLINE_TOKENS} tokens, GPU (s)" in header
        for shape in HEADLINE_SHAPES:
            assert f"{r.gpu}: kernel {shape.label()} (µs)" in header
    v11 = [line for line in table.splitlines() if line.startswith("| `v11` | float32 |")][0]
    assert f"{gpus[1].kernel('v11', HEADLINE_SHAPES[0], FLOAT32).us_device_median:.1f}" in v11
    cudnn = [line for line in table.splitlines() if line.startswith("| `sdpa-cudnn` |")]
    assert len(cudnn) == 1 and "| bfloat16 |" in cudnn[0]  # float16: each GPU's section
    assert "The float16 rows are on each GPU's page." in table


def test_version_notes_show_every_note_shape_and_the_ratio(gpus):
    r = gpus[0]
    text = version_section(r, registry.get("v11"))
    for shape in VERSION_NOTE_SHAPES:
        assert f"kernel device µs, {shape.label()}" in text
    assert f"{HEADLINE_TOKENS}-token generation, GPU s" in text
    assert ("| measure | `v10` | `v11` | change | `v11` / fastest PyTorch | fastest PyTorch, same run | "
            "`v11` / `sdpa-efficient` |") in text
    row = r.kernel("v11", VERSION_NOTE_SHAPES[0], FLOAT32)
    assert f"| {r.kernel_vs_fastest(row)[0]:.2f} | `{registry.KERNEL_REFERENCE}` | {row.ratio_to_reference:.2f} |" \
        in text


def test_a_half_version_is_read_against_its_parent_in_its_own_dtype(gpus):
    """h06's parent is h04 (not h05), compared in bfloat16 against sdpa-cudnn; h01's parent is
    the float32 v17, and its block says so."""
    r = gpus[0]
    later = next(v for v in HALF_TRACK.versions if registry.get(v).parent not in (None, *FULL_TRACK.versions)
                 and registry.names().index(registry.get(v).parent) != registry.names().index(v) - 1)
    parent = registry.get(later).parent
    text = version_section(r, registry.get(later))
    assert f"| measure | `{parent}` | `{later}` ({BFLOAT16}) | change | `{later}` / fastest PyTorch | fastest " \
           f"PyTorch, same run | `{later}` / `sdpa-cudnn` | `{later}` ({FLOAT16}) |" in text
    before = r.kernel(parent, VERSION_NOTE_SHAPES[0], BFLOAT16).us_device_median
    assert f"| kernel device µs, {VERSION_NOTE_SHAPES[0].label()} | {before:.1f} |" in text
    first = registry.get(HALF_TRACK.versions[0])
    text = version_section(r, first)
    assert f"`{first.parent}` ({FLOAT32})" in text and "includes the change of precision" in text
    v17 = r.kernel(first.parent, VERSION_NOTE_SHAPES[0], FLOAT32).us_device_median
    assert f"| {v17:.1f} |" in text


def test_a_version_without_rows_is_not_measured(f32_gpus):
    assert version_section(f32_gpus[0], registry.get(HALF_TRACK.versions[0])) is None


# -- the README ------------------------------------------------------------------------------
def test_headline_has_both_tracks_when_half_rows_exist_and_float32_alone_otherwise(f32_results, f32_gpus, gpus):
    full = headline(gpus)
    last_full, last_half = FULL_TRACK.versions[-1], HALF_TRACK.versions[-1]
    assert f"PyTorch's fastest in `{last_half}`'s run, bfloat16" in full
    assert f"PyTorch's fastest in `{last_full}`'s run, float32" in full
    assert f"`{FULL_TRACK.versions[0]}`: the first step, float32" in full
    assert f"`{last_full}`: the last step, float32" in full and f"`{last_half}`: the last step, bfloat16" in full
    only = headline(f32_gpus, f32_results)
    assert f"PyTorch's fastest in `{last_full}`'s run, float32" in only and "bfloat16" not in only
    for version in HALF_TRACK.versions:
        assert f"`{version}`" not in only


@pytest.mark.parametrize("with_half", [True, False])
def test_the_readme_reads_right_with_and_without_half_precision_rows(with_half, f32_results, f32_gpus, gpus):
    results, loaded = (RESULTS, gpus) if with_half else (f32_results, f32_gpus)
    stale = replace_block(README.read_text(), "tracks", "stale")  # what a new version leaves behind
    text = readme_text(stale, loaded, Path("plots"), results, README)
    for name in ("tracks", "headline", "versions", "results", "provenance"):
        assert text.count(f"<!-- BEGIN GENERATED: {name} -->") == 1
    for track in tracks():  # the introduction names each track's newest step
        assert f"`{track.versions[-1]}`, " in text.split("<!-- END GENERATED: tracks -->")[0]
    for version in registry.kernel_versions():  # every track listed, each step linked
        assert f"[`{version.name}`](versions/{version.folder}/)" in text
    decode = registry.decode_versions()
    intro = text.split("<!-- END GENERATED: tracks -->")[0]
    assert f"**decode** (`{decode[0].name}`–`{decode[-1].name}`" in intro, "the introduction names the decode track"
    assert "CUDA >= " not in text  # a compute capability, not a toolkit version
    assert (f"| bfloat16 | `{HALF_TRACK.versions[-1]}` |" in text) == with_half
    assert (f"| float32 | `{FULL_TRACK.versions[-1]}` |" in text)
    assert len(text.splitlines()) < 450, "the front page stays short: the tables are on the GPUs' pages"


def test_the_committed_pages_link_only_to_files_that_exist():
    pages = [README, RESULTS_README, *RESULTS_README.parent.glob("*/README.md")]
    assert len(pages) > 2, "each GPU of results/ has its page"
    for path in pages:
        for target in re.findall(r"\]\(([^)#\s]+)\)", path.read_text()):
            if not re.match(r"[a-z]+://", target):
                assert (path.parent / target).exists(), f"{path}: {target}"


# -- writing and reading ---------------------------------------------------------------------
def test_other_generation_modes_and_batches_leave_the_tables_and_figures_as_they_were(tmp_path):
    """The end-to-end tables and figures show the original setup (recompute, batch 1); KV-cache
    rows, other batches and their status rows, in the same e2e.csv, are kept apart (the
    KV-cache section of the page shows its own)."""
    results = subset(tmp_path / "results", lambda *_: True)
    before = load(GPU_A, results)
    text = page(before, results)
    path = E2E.path(results, GPU_A)
    originals = [r for r in E2E.read(path).rows if r.dtype == FLOAT32 and r.tokens == HEADLINE_TOKENS]
    others = [dataclasses.replace(r, mode=mode, batch=batch, seconds_gpu_median=r.seconds_gpu_median and 1e-3,
                                  status=status)
              for r in originals for mode, batch, status in (("kv-cache", 8, r.status), ("recompute", 2, r.status),
                                                             ("kv-cache", 1, "not measured: a test's reason"))]
    for row in others:
        E2E.append(path, row)
    after = load(GPU_A, results)
    assert len(after.e2e_every_mode) == len(before.e2e_every_mode) + sum(r.measured for r in others)
    assert {(r.mode, r.batch) for r in after.e2e} == {("recompute", 1)}
    assert after.e2e == before.e2e and after.not_measured == before.not_measured
    assert page_without_kv(after, results) == page_without_kv(before, results)
    assert page(after, results) != text  # the KV-cache section shows the new plan


def test_the_committed_results_read_with_the_current_schema(committed_results):
    """results/*/e2e.csv were written before the mode and batch columns (migrated as recompute,
    batch 1): every row parses, and the tables hold the original setup's rows. The one damaged
    value on record (an H100 row whose device minimum came out negative, -2.1 us, the L2 flush
    subtracted from a 10 us call; results/README.md lists it) is a measurement, not a schema.
    (committed_results: every GPU folder of results/ read by load_all, once for the session.)"""
    assert [r.slug for r in committed_results] == gpu_slugs(PROJECT_ROOT / "results")
    for r in committed_results:
        unparsed = [p for p in r.problems if "is negative" not in p]
        assert unparsed == [], (r.slug, unparsed[:3])
        assert r.e2e and all(original_setup(x) for x in r.e2e), r.slug


def test_report_of_another_results_folder_leaves_the_readme_alone(tmp_path, capsys, monkeypatch, gpus):
    read_once(monkeypatch, RESULTS, gpus)  # the fixtures as `gpus` read them, not read again
    before = README.read_text()
    out = tmp_path / "report.md"
    assert harness_cli.main(["report", "--results-dir", str(RESULTS), "--plots-dir", str(tmp_path),
                             "--output", str(out)]) == 0
    assert README.read_text() == before
    assert "Every GPU side by side" in out.read_text() and "# Results: Fixture GPU B" in out.read_text()


def test_generated_block_replaces_only_its_markers():
    text = "intro\n<!-- BEGIN GENERATED: x -->\nold\n<!-- END GENERATED: x -->\noutro\n"
    new = replace_block(text, "x", "new")
    assert new == "intro\n<!-- BEGIN GENERATED: x -->\nnew\n<!-- END GENERATED: x -->\noutro\n"
    assert replace_block("plain", "y", "body").endswith(
        "<!-- BEGIN GENERATED: y -->\nbody\n<!-- END GENERATED: y -->\n")


def test_mixed_gpus_are_refused(tmp_path):
    folder = tmp_path / "two-gpus"
    folder.mkdir()
    lines = (RESULTS / GPU_A / "e2e.csv").read_text().splitlines()
    lines[2] = lines[2].replace("Fixture GPU A", "Another GPU")
    (folder / "e2e.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(ResultsFileError, match="never mix"):
        load("two-gpus", tmp_path)


def test_plot_and_report_skip_a_damaged_row_and_say_where(tmp_path, capsys):
    folder = tmp_path / "results" / GPU_A
    folder.mkdir(parents=True)
    for name in ("kernels.csv", "e2e.csv"):  # a few rows of each: enough to draw, quick to draw
        (folder / name).write_text("\n".join((RESULTS / GPU_A / name).read_text().splitlines()[:60]) + "\n")
    text = (folder / "e2e.csv").read_text()
    (folder / "e2e.csv").write_text(text[: len(text) - 40])  # the last row cut short
    for command in ("plot", "report"):
        assert harness_cli.main([command, "--results-dir", str(tmp_path / "results"),
                                 "--plots-dir", str(tmp_path / "plots")]) == 0
        err = capsys.readouterr().err
        assert f"{folder / 'e2e.csv'}:" in err and "skipped a damaged row" in err, err


def test_old_schema_gives_a_message_naming_the_file(tmp_path, capsys):
    folder = tmp_path / "nvidia-h200"
    folder.mkdir()
    (folder / "kernels.csv").write_text("backend,B,H,T,d,status,reps,us_median\nnaive,1,12,64,64,ok,50,1.0\n")
    assert harness_cli.main(["plot", "--results-dir", str(tmp_path), "--plots-dir", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert str(folder / "kernels.csv") in err and "Traceback" not in err


def test_plot_all_writes_every_figure_of_every_gpu(tmp_path, monkeypatch, gpus):
    """The file names (the figures themselves are drawn by the tests above)."""
    from harness import plots

    monkeypatch.setattr(plots, "save", lambda fig, path: path)
    monkeypatch.setattr(plots, "FIGURES", {name: lambda r: object() for name in FIGURES})
    monkeypatch.setattr(plots, "gpu_comparison", lambda gpus: object())
    for module in (decode_plots, grid_plots):
        monkeypatch.setattr(module, "PER_DTYPE", tuple(dataclasses.replace(f, draw=lambda r, d: object())
                                                       for f in module.PER_DTYPE))
    written = plot_all(gpus, tmp_path)
    per_dtype = {tmp_path / r.slug / f.name(d) for r in gpus for f in per_dtype_figures() for d in f.dtypes(r)}
    assert {f.stem for f in per_dtype_figures()} == {"decode", "kv_cache", "prefill_grid"}
    assert per_dtype and all(path.parent.name == GPU_A for path in per_dtype)  # GPU B: no decode, KV or grid rows
    assert set(written) == ({tmp_path / r.slug / name for r in gpus for name in FIGURES} | per_dtype
                            | {tmp_path / GPU_COMPARISON})


def test_figures_name_the_versions_a_gpu_has_not_measured(tmp_path, drawn):
    """A version added after a GPU's last sweep leaves an empty column in the headline and
    progression figures: their footers say which versions, and say nothing when all were measured."""
    last = FULL_TRACK.versions[-1]
    unmeasured = load_all(subset(tmp_path, lambda _, row: row.get("backend") != last))[0]
    for name in (HEADLINE_FIGURE, "progression.png"):
        footer = " ".join(t.get_text() for t in FIGURES[name](unmeasured).texts)
        assert f"Not measured on this GPU: {last}." in footer, (name, footer)
        assert "Not measured on this GPU" not in " ".join(t.get_text() for t in drawn[name].texts), name


# -- decode and KV-cache generation (fixture GPU A has them, GPU B not yet) ---------------------
GPU_B = "fixture-gpu-b-synthetic-numbers"
FIXTURE_SCRIPT = load_script("tests/fixtures/make_fixtures.py")


@pytest.fixture(scope="module")
def plotted_per_dtype(tmp_path_factory, gpus) -> tuple[Path, str, dict[str, object]]:
    """`harness plot` of the fixtures with the per-dtype figures alone (the other figures left
    out, and the prefill grid's drawn small: they have tests of their own, the grid's in
    test_prefill_grid.py): the plots folder, what it printed, and each figure it saved, by file
    name (drawn, into its PNG)."""
    from harness import plots

    plots_dir = tmp_path_factory.mktemp("plotted-per-dtype")
    saved = {}
    real_save = plots.save

    def save(fig, path: Path) -> Path:
        saved[path.name] = fig
        return real_save(fig, path)

    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patched, contextlib.redirect_stdout(printed):
        read_once(patched, RESULTS, gpus)  # the fixtures as `gpus` read them, not read again
        patched.setattr(plots, "FIGURES", {})
        patched.setattr(plots, "gpu_comparison", lambda gpus: None)
        patched.setattr(plots, "save", save)
        patched.setattr(grid_plots, "PER_DTYPE", tuple(dataclasses.replace(f, draw=lambda r, d: Figure(figsize=(1, 1)))
                                                       for f in grid_plots.PER_DTYPE))
        assert harness_cli.main(["plot", "--results-dir", str(RESULTS), "--plots-dir", str(plots_dir)]) == 0
    return plots_dir, printed.getvalue(), saved


def test_per_dtype_figures_are_written_for_gpu_a_and_skipped_with_a_message_for_gpu_b(plotted_per_dtype, gpus):
    """`harness plot` draws decode_<dtype>.png, kv_cache_<dtype>.png and prefill_grid_<dtype>.png
    for each dtype GPU A has their rows in, none for GPU B, and says why for GPU B."""
    plots_dir, out, _ = plotted_per_dtype
    a = gpus[0]
    expected = ({f"decode_{d}.png" for d in a.decode_dtypes()} | {f"kv_cache_{d}.png" for d in a.kv_dtypes()}
                | {f"prefill_grid_{d}.png" for d in grid_dtypes(a)})
    assert {p.name for p in (plots_dir / GPU_A).iterdir()} == expected
    assert a.decode_dtypes() == list(precision.EVERY) and a.kv_dtypes() == list(FIXTURE_SCRIPT.KV_DTYPES)
    assert grid_dtypes(a) == list(precision.EVERY)
    assert not (plots_dir / GPU_B).exists()
    for stem in ("decode", "kv_cache", "prefill_grid"):
        assert f"Fixture GPU B (synthetic numbers): no {stem}_<dtype>.png: not measured on this GPU yet" in out, out
        assert f"Fixture GPU A (synthetic numbers): no {stem}" not in out


@pytest.fixture(scope="module")
def drawn_per_dtype(plotted_per_dtype) -> dict[str, object]:
    """GPU A's decode and KV-cache figures, as `harness plot` drew them into their PNGs."""
    return {name: fig for name, fig in plotted_per_dtype[2].items() if not name.startswith("prefill_grid_")}


def test_runs_of_nearly_the_same_copy_rate_share_one_roof_and_one_label():
    """Three runs at 3,020-3,021 GB/s: one roof, one label with the range and the count, not
    three labels stacked into the panel's title; a run 5% apart keeps a roof of its own,
    named by its commit."""
    groups = decode_plots.roof_groups([(3021.2, "a"), (3020.4, "b"), (3021.0, "c")])
    assert groups == [(3021.0, "HBM, 2 GiB copy: 3,020-3,021 GB/s (3 runs)")]
    apart = decode_plots.roof_groups([(3021.0, "a"), (3020.6, "b"), (3180.0, "c")])
    assert [label for _, label in apart] == ["HBM, 2 GiB copy: 3,021 GB/s (2 runs)",
                                             decode_plots.copy_label(3180.0, "c")]
    assert decode_plots.roof_groups([(3021.0, "a")]) == [(3021.0, decode_plots.copy_label(3021.0))]


def test_decode_and_kv_figures_lie_inside_the_canvas_and_show_the_roof(drawn_per_dtype, gpus):
    assert drawn_per_dtype
    for name, fig in drawn_per_dtype.items():
        assert not _outside(fig), (name, _outside(fig))
    texts = [t.get_text() for ax in drawn_per_dtype[f"decode_{BFLOAT16}.png"].axes for t in ax.texts]
    assert decode_plots.copy_label(FIXTURE_SCRIPT.HBM_GBPS) in texts  # the roof, labelled with the run's rate
    kv = [t.get_text() for ax in drawn_per_dtype[f"kv_cache_{BFLOAT16}.png"].axes for t in ax.texts]
    assert "transformers (eager)" in kv and any("without a cache" in t for t in kv)


def _decode_line(section: str, B: int, S: int) -> str:
    return next(line for line in section.splitlines() if line.startswith(f"| {B} | {S:,} |"))


def test_the_decode_table_divides_by_the_fastest_baseline_of_the_same_run(tmp_path):
    """At the shape where the fixtures make sdpa-flash faster than sdpa-cudnn, the decode table
    names sdpa-flash and divides by its time; a faster sdpa-cudnn row from another run, which the
    tables show as its latest, changes neither."""
    backend, dtype, shape, _ = FIXTURE_SCRIPT.FASTER_DECODE_BASELINE
    results = subset(tmp_path / "results", lambda *_: True)
    path = DECODE_TIMES.path(results, GPU_A)
    cudnn = next(x for x in DECODE_TIMES.read(path).rows if (x.backend, x.dtype, x.B, x.S) ==
                 ("sdpa-cudnn", dtype, shape.B, shape.S))
    DECODE_TIMES.append(path, dataclasses.replace(cudnn, us_device_median=1.0, provenance=dataclasses.replace(
        cudnn.provenance, commit="another-run", date="2026-02-01T00:00:00Z")))
    r = load(GPU_A, results)
    assert r.decode_row("sdpa-cudnn", shape, dtype).us_device_median == 1.0  # the latest row, of another run
    section = page(r, results).split(f"### Decode, {dtype}")[1].split("###")[0]
    last = r.last_decode(dtype)
    mine = r.decode_row(last, shape, dtype).us_device_median
    flash = r.decode_in_run(backend, shape, dtype, r.decode_row(last, shape, dtype).provenance).us_device_median
    assert _decode_line(section, shape.B, shape.S).split(" | ")[2:5] == [f"`{backend}`", us(flash), us(mine)]
    assert _decode_line(section, shape.B, shape.S).endswith(f"| {mine / flash:.2f} |")
    other = next(s for s in r.decode_shapes(dtype) if s != shape and s.lengths == shape.lengths)
    assert f"| `{registry.kernel_reference(dtype)}` |" in _decode_line(section, other.B, other.S)


def test_the_decode_section_lists_the_ragged_shapes_the_copy_and_the_gate(gpus):
    section = page(gpus[0]).split("\n## Decode\n")[1].split("\n## KV-cache generation\n")[0]
    assert "B=8 L=16384 ragged: µs" in section and decode_plots.copy_label(FIXTURE_SCRIPT.HBM_GBPS) in section
    naive, dtype, case = FIXTURE_SCRIPT.DECODE_GATE_MISS
    gate = section.split("The decode gate")[1]
    assert f"| `{naive}` | 5/5 | **1 of 5 failed**" in gate
    refused, refused_case = FIXTURE_SCRIPT.DECODE_GATE_REFUSED
    assert f"no row of 1 ('{refused_case}': refused)" in next(line for line in gate.splitlines()
                                                              if line.startswith(f"| `{refused}` |"))


def test_the_kv_table_marks_transformers_eager_time_and_names_the_studys_reference(gpus):
    r = gpus[0]
    section = page(r).split("### KV-cache generation, bfloat16")[1]
    plans = r.kv_plans(BFLOAT16)
    hf = next(line for line in section.splitlines() if line.startswith("| `transformers-generate` |"))
    cells = hf.strip("| ").split(" | ")[1:]
    assert len(cells) == len(plans) and all(c.startswith("*") and "eager" in c and c.endswith("*") for c in cells)
    row = r.kv_row("transformers-generate", plans[0], BFLOAT16)
    assert f"*{row.seconds_eager_median * 1e3:,.1f} ms eager" in cells[0]
    study = next(line for line in section.splitlines() if line.startswith("| `study` / fastest PyTorch"))
    ratio, reference = r.kv_vs_fastest(r.kv_row("study", plans[0], BFLOAT16))
    assert reference.backend == registry.kernel_reference(BFLOAT16)
    assert study.split(" | ")[1] == f"{ratio:.2f}× `{reference.backend}`"
    backend, _, batch, prompt = FIXTURE_SCRIPT.KV_GRAPH_MISMATCH
    assert f"`{backend}` B={batch} P={prompt}: the graph's tokens differ from the eager run's" in section


def test_a_gpu_without_decode_or_kv_rows_says_so(gpus):
    text = page(gpus[1])
    assert "## Decode\n\nNot measured on this GPU yet" in text
    assert "## KV-cache generation\n\nNot measured on this GPU yet" in text


def test_the_headline_has_a_kv_row_per_gpu_and_dtype_that_has_it(gpus):
    text = headline(gpus)
    r = gpus[0]
    for dtype in r.kv_dtypes():
        row = r.kv_row("study", KV_HEADLINE, dtype)
        ratio, reference = r.kv_vs_fastest(row)
        parts = row.parts  # what the row's run ran, recorded in the row
        assert parts == registry.get("study").describe_parts(dtype)  # the fixtures' runs: today's pair
        assert (f"| {dtype} | `study` ({parts}) | {row.seconds_gpu_median * 1e3:,.1f} ms | "
                f"{row.tokens_per_second:,.0f} | {ratio:.2f}× `{reference.backend}` | "
                f"{reference.time * 1e3:,.1f} ms |") in text
    assert "Not measured on this GPU yet: Fixture GPU B (synthetic numbers)." in text


def test_the_study_pair_named_is_the_one_its_rows_recorded(gpus):
    """A study row measured when the registry's last decode version was another one keeps that
    pair's name: the tables name what ran, not today's registry."""
    r = gpus[0]
    dtype = r.kv_dtypes()[0]
    today = registry.get("study").describe_parts(dtype)
    older = dataclasses.replace(r, e2e_every_mode=[dataclasses.replace(x, parts="v01 + d01") if x.backend == "study"
                                                   else x for x in r.e2e_every_mode])
    assert r.study_parts(dtype) == today
    assert older.study_parts(dtype) == "v01 + d01"
    assert "(v01 + d01)" in headline([older, *gpus[1:]])
    unrecorded = dataclasses.replace(r, e2e_every_mode=[dataclasses.replace(x, parts=None) for x in r.e2e_every_mode])
    assert unrecorded.study_parts(dtype) == "–"


def test_the_results_summary_links_the_decode_figures(tmp_path, gpus):
    plots_dir = tmp_path / "plots"
    for name, _ in ((f.name(d), f) for f in decode_plots.PER_DTYPE for d in f.dtypes(gpus[0])):
        (plots_dir / GPU_A).mkdir(parents=True, exist_ok=True)
        (plots_dir / GPU_A / name).write_bytes(b"")
    text = results_block(Context(gpus, README, plots_dir, RESULTS))
    assert f"({os.path.relpath(plots_dir / GPU_A / f'decode_{BFLOAT16}.png', README.parent)})" in text
    assert "- Fixture GPU B (synthetic numbers): not measured on this GPU yet." in text


def test_a_decode_version_has_a_measured_block_against_its_parent_of_the_same_run(gpus):
    r = gpus[0]
    last = registry.decode_versions()[-1]
    text = decode_version_section(gpus, last)
    assert text.startswith("## Measured")
    assert f"| dtype | shape | `{last.parent}` µs | of the copy | `{last.name}` µs | of the copy | change |" in text
    for dtype, shape in DECODE_NOTE_SHAPES:
        mine, parent = r.decode_row(last.name, shape, dtype), r.decode_row(last.parent, shape, dtype)
        change = 100 * (mine.us_device_median / parent.us_device_median - 1)
        assert (f"| {dtype} | {shape.label()} | {us(parent.us_device_median)} | {parent.fraction_of_hbm:.2f} | "
                f"{us(mine.us_device_median)} | {mine.fraction_of_hbm:.2f} | {change:+.1f}% |") in text
    assert "Fixture GPU B (synthetic numbers): not measured on this GPU yet." in text
    first = decode_version_section(gpus, registry.decode_versions()[0])
    assert "change" not in first.split("\n\n")[2]  # no parent, no change column


def test_a_decode_block_goes_at_the_end_of_the_notes_and_replaces_itself(gpus):
    version = registry.decode_versions()[-1]
    notes = "# d07\n\nProse.\n\n## Where the track stands\n\nMore prose.\n"
    once = replace_block(notes, "measured", decode_version_section(gpus, version))
    assert once.startswith(notes.rstrip()) and once.rstrip().endswith("<!-- END GENERATED: measured -->")
    assert replace_block(once, "measured", decode_version_section(gpus, version)) == once


def test_an_earlier_step_is_named_faster_only_beyond_the_spread_of_the_replays(gpus):
    """The headline's 'Where an earlier step is faster than the last' sentence: h23 and h24 run
    the same narrow kernel at B=1 T=512, and rows of different runs differ by a few percent, so
    a median 2% lower inside the other row's spread names no faster step; one whose slowest
    replay is under the last's fastest does."""
    from harness.report import beyond_spread
    r = gpus[0]
    last = next(row for row in r.measured_kernels if row.us_device_min and row.us_device_max)
    lo, hi = last.us_device_min, last.us_device_max
    inside = dataclasses.replace(last, us_device_median=0.98 * last.us_device_median, us_device_max=hi)
    below = dataclasses.replace(last, us_device_median=0.5 * lo, us_device_min=0.4 * lo, us_device_max=0.9 * lo)
    assert not beyond_spread(inside, last), (inside, last)
    assert beyond_spread(below, last), (below, last)
    assert beyond_spread(dataclasses.replace(inside, us_device_max=None), last)  # no spread: the medians decide
