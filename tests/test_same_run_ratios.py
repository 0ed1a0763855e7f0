"""Every ratio divides by the fastest of PyTorch's kernels measured in the same run at the same
shape, whichever it is, and names it; after partial sweeps measured some backends again. The
fixtures of one GPU (every backend in one run; flex-attention faster than sdpa-efficient in
float32 at B=8) plus a later run that measured sdpa-efficient and naive again (twice as slow,
so a ratio across runs is off by 2x) and a last run that measured one version again without
any of PyTorch's kernels (so its ratios have no reference: a dash)."""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from backends import precision, registry
from harness.gpu_page import e2e_table, kernel_table
from harness.markdown import DASH
from harness.plots import NOT_IN_ONE_RUN, PYTORCH_IN_BOTH, headline as headline_figure, precision_cost, same_run_ratios
from harness.report import Context, headline_block
from harness.results import E2E, KERNELS, E2ERow, KernelRow
from harness.study import HEADLINE_SHAPES, HEADLINE_TOKENS, VERSION_NOTE_SHAPES
from harness.tables import GpuResults, baselines, load
from harness.version_notes import version_section

RESULTS = Path(__file__).parent / "fixtures" / "results"
GPU_A = "fixture-gpu-a-synthetic-numbers"
FLOAT32, BFLOAT16 = precision.FLOAT32, precision.BFLOAT16
EFFICIENT = registry.kernel_reference(FLOAT32)  # the fastest in float32 at B=1 in the fixtures
FLEX = "flex-attention"  # the fastest in float32 at B=8 in the fixtures
NAIVE = registry.TOKENS_REFERENCE
SHOWN = "v10"  # measured in the fixtures' run only
ALONE = "v11"  # measured again in the last run, without any of PyTorch's kernels
# Two later sweeps, each at a commit of its own (a run is a setup and a commit; Provenance.setup).
LATER, LAST = ("later0000000", "2026-01-02T00:00:00Z"), ("last00000000", "2026-01-03T00:00:00Z")
B1, B8 = (next(s for s in HEADLINE_SHAPES if s.B == b) for b in (1, 8))


def _again(row: KernelRow | E2ERow, factor: float, run: tuple[str, str]) -> KernelRow | E2ERow:
    """`row` as a later run (commit, date) measured it: every GPU time `factor` times the fixtures'."""
    commit, date = run
    provenance = dataclasses.replace(row.provenance, commit=commit, date=date)
    if isinstance(row, KernelRow):
        return dataclasses.replace(row, us_device_median=row.us_device_median * factor,
                                   us_device_min=row.us_device_min * factor, us_device_max=row.us_device_max * factor,
                                   provenance=provenance)
    return dataclasses.replace(row, seconds_gpu_median=row.seconds_gpu_median * factor,
                               seconds_gpu_min=row.seconds_gpu_min * factor,
                               seconds_gpu_max=row.seconds_gpu_max * factor, provenance=provenance)


@pytest.fixture(scope="module")
def remeasured(tmp_path_factory, original) -> GpuResults:
    out = tmp_path_factory.mktemp("remeasured")
    shutil.copytree(RESULTS / GPU_A, out / GPU_A)
    before = original  # what the copy holds before the rows below are appended
    kernels, e2e = KERNELS.path(out, GPU_A), E2E.path(out, GPU_A)
    for row in before.kernels:
        if row.backend == EFFICIENT and row.dtype == FLOAT32:
            KERNELS.append(kernels, _again(row, 2.0, LATER))
        elif row.backend == ALONE:  # the benchmark stores no ratio without the reference in the run
            KERNELS.append(kernels, dataclasses.replace(_again(row, 0.9, LAST), ratio_to_reference=None))
    for row in before.e2e:
        if row.dtype == FLOAT32 and row.backend in (EFFICIENT, NAIVE):
            E2E.append(e2e, _again(row, 2.0, LATER))
        elif row.backend == ALONE and row.dtype == FLOAT32:
            E2E.append(e2e, _again(row, 0.9, LAST))
    return load(GPU_A, out)


@pytest.fixture(scope="module")
def original(fixture_results) -> GpuResults:
    """GPU A of the fixtures, as read once for the session (tests/conftest.py)."""
    assert fixture_results[0].slug == GPU_A
    return fixture_results[0]


def _fastest(r: GpuResults, shape, dtype: str) -> KernelRow:
    """The fastest of PyTorch's kernels in the fixtures' own run, found by hand."""
    rows = [x for b in baselines() if (x := r.kernel(b, shape, dtype)) and x.us_device_median]
    return min(rows, key=lambda x: x.us_device_median)


def _cells(text: str, first: str) -> list[str]:
    """The cells of the table row of `text` whose first cell is `first`."""
    line = next(line for line in text.splitlines() if line.startswith(f"| {first} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_reference_is_the_fastest_of_pytorchs_kernels_whichever_it_is(original):
    """In the fixtures sdpa-efficient is the fastest in float32 at B=1 and flex-attention at B=8;
    in bfloat16 sdpa-cudnn."""
    for shape, dtype, expected in ((B1, FLOAT32, EFFICIENT), (B8, FLOAT32, FLEX),
                                   (B8, BFLOAT16, registry.kernel_reference(BFLOAT16))):
        row = original.kernel(SHOWN if dtype == FLOAT32 else "h01", shape, dtype)
        ratio, reference = original.kernel_vs_fastest(row)
        assert reference.backend == expected == _fastest(original, shape, dtype).backend, (shape, dtype, reference)
        assert reference.missing == (), "every kernel of the dtype was timed in the fixtures' run"
        assert ratio == pytest.approx(row.us_device_median / reference.time)
    flex = original.kernel(FLEX, B8, FLOAT32)
    assert flex.ratio_to_reference < 1, "the benchmark's stored ratio is to sdpa-efficient, which flex beats here"
    table = kernel_table(original, B8, FLOAT32)
    shown = original.kernel_vs_fastest(original.kernel(SHOWN, B8, FLOAT32))[0]
    assert _cells(table, f"`{SHOWN}`")[5:7] == [f"{shown:.2f}", f"`{FLEX}`"]
    assert _cells(table, f"`{FLEX}`")[5:7] == ["1.00", f"`{FLEX}`"]


def test_the_shown_rows_are_the_latest_and_the_earlier_ones_stay_reachable(remeasured, original):
    assert remeasured.kernel(EFFICIENT, B1, FLOAT32).provenance.date == LATER[1]
    shown = remeasured.end_to_end(SHOWN, HEADLINE_TOKENS, FLOAT32)
    assert shown == original.end_to_end(SHOWN, HEADLINE_TOKENS, FLOAT32)
    earlier = remeasured.end_to_end_in_run(NAIVE, HEADLINE_TOKENS, FLOAT32, shown.provenance)
    assert earlier == original.end_to_end(NAIVE, HEADLINE_TOKENS, FLOAT32)
    assert remeasured.end_to_end(NAIVE, HEADLINE_TOKENS, FLOAT32).provenance.date == LATER[1]
    alone = remeasured.end_to_end(ALONE, HEADLINE_TOKENS, FLOAT32)
    assert alone.provenance.date == LAST[1]
    assert remeasured.end_to_end_reference(alone) is None


def test_a_run_that_timed_some_of_pytorchs_kernels_divides_by_the_fastest_of_those_and_says_so(remeasured):
    """The later run timed sdpa-efficient (and naive end to end) alone: its rows' reference is
    the fastest of those, with a footnote naming the kernels it did not time."""
    row = remeasured.kernel(EFFICIENT, B8, FLOAT32)
    ratio, reference = remeasured.kernel_vs_fastest(row)
    assert (reference.backend, ratio) == (EFFICIENT, 1.0), "its own run's, not flex-attention's of another run"
    assert FLEX in reference.missing and "sdpa-flash" not in reference.missing  # sdpa-flash takes no float32
    table = kernel_table(remeasured, B8, FLOAT32)
    assert _cells(table, f"`{EFFICIENT}`")[6] == f"`{EFFICIENT}`¹"
    assert f"which were not all of them: ¹ not `naive`, `sdpa-math` or `{FLEX}`." in table


def test_version_notes_divide_by_the_fastest_of_the_same_run(remeasured, original):
    text = version_section(remeasured, registry.get(SHOWN))
    for shape in VERSION_NOTE_SHAPES:
        row = remeasured.kernel(SHOWN, shape, FLOAT32)
        fastest = _fastest(original, shape, FLOAT32)
        cells = _cells(text, f"kernel device µs, {shape.label()}")
        assert cells[4:7] == [f"{row.us_device_median / fastest.us_device_median:.2f}", f"`{fastest.backend}`",
                              f"{row.ratio_to_reference:.2f}"], shape
    mine = remeasured.end_to_end(SHOWN, HEADLINE_TOKENS, FLOAT32)
    same_run = original.end_to_end(EFFICIENT, HEADLINE_TOKENS, FLOAT32)
    latest = remeasured.end_to_end(EFFICIENT, HEADLINE_TOKENS, FLOAT32)
    expected = f"{mine.seconds_gpu_median / same_run.seconds_gpu_median:.2f}"
    assert expected != f"{mine.seconds_gpu_median / latest.seconds_gpu_median:.2f}"  # the case tested
    assert _cells(text, f"{HEADLINE_TOKENS}-token generation, GPU s")[4:7] == [expected, f"`{EFFICIENT}`", expected]
    assert f"is {DASH}" not in text


def test_version_notes_show_a_dash_where_the_run_timed_no_pytorch_kernel(remeasured):
    text = version_section(remeasured, registry.get(ALONE))
    assert _cells(text, f"{HEADLINE_TOKENS}-token generation, GPU s")[4:7] == [DASH, DASH, DASH]
    for shape in VERSION_NOTE_SHAPES:
        cells = _cells(text, f"kernel device µs, {shape.label()}")
        assert cells[2] != DASH and cells[4] == DASH  # the time is shown, its ratio is not
    assert (f"`{ALONE}` / fastest PyTorch is {DASH} for the {VERSION_NOTE_SHAPES[0].label()} kernel" in text
            and f"and the {HEADLINE_TOKENS}-token generation: the run that measured `{ALONE}`'s timed none" in text)


def test_the_end_to_end_table_divides_by_the_fastest_of_the_same_run(remeasured, original):
    table = e2e_table(remeasured, FLOAT32)
    header = _cells(table, "backend")
    ratio, named = header.index("time / fastest PyTorch"), header.index("fastest PyTorch, same run")
    mine = remeasured.end_to_end(SHOWN, HEADLINE_TOKENS, FLOAT32)
    efficient = original.end_to_end(EFFICIENT, HEADLINE_TOKENS, FLOAT32)
    assert _cells(table, f"`{SHOWN}`")[ratio] == f"{mine.seconds_gpu_median / efficient.seconds_gpu_median:.2f}"
    assert _cells(table, f"`{SHOWN}`")[named] == f"`{EFFICIENT}`"
    later = remeasured.end_to_end(EFFICIENT, HEADLINE_TOKENS, FLOAT32)  # both measured again: that run's
    assert _cells(table, f"`{EFFICIENT}`")[ratio] == "1.00"
    assert _cells(table, f"`{NAIVE}`")[ratio] == \
        f"{remeasured.end_to_end(NAIVE, HEADLINE_TOKENS, FLOAT32).seconds_gpu_median / later.seconds_gpu_median:.2f}"
    assert _cells(table, f"`{ALONE}`")[ratio] == DASH and _cells(table, f"`{ALONE}`")[named] == DASH
    assert (f"time / fastest PyTorch is {DASH} for {ALONE}: the run that measured it timed none of PyTorch's "
            "kernels there.") in table


def test_the_headline_shows_same_run_ratios_and_names_the_reference(remeasured, original):
    text = headline_block(Context([remeasured], Path("README.md"), Path("plots"), Path("results")))
    first = registry.versions()[0].name
    cells = _cells(text, f"`{first}`: the first step, {FLOAT32}")
    for cell, shape in zip(cells[1:], HEADLINE_SHAPES):
        fastest = _fastest(original, shape, FLOAT32)
        row = remeasured.kernel(first, shape, FLOAT32)
        assert cell.endswith(f"({row.us_device_median / fastest.us_device_median:.2f}× `{fastest.backend}`)"), cell
    mine = remeasured.end_to_end(first, HEADLINE_TOKENS, FLOAT32)
    same_run = original.end_to_end(EFFICIENT, HEADLINE_TOKENS, FLOAT32)
    ratio = mine.seconds_gpu_median / same_run.seconds_gpu_median
    assert cells[-1] == f"{mine.seconds_gpu_median:.3f} s ({ratio:.2f}× `{EFFICIENT}`)"
    last = registry.versions()[-1].name
    assert f"`{last}`: the last step, bfloat16" in text


def test_the_headline_figure_divides_by_the_fastest_of_each_run_and_names_it(original):
    notes = " ".join(t.get_text() for t in headline_figure(original).texts)
    assert f"{FLOAT32} {B8.label()}: {FLEX} (" in notes and f"{FLOAT32} {B1.label()}: {EFFICIENT} (" in notes


def test_a_plot_divides_a_drawn_row_by_the_other_rows_of_its_run(remeasured, original):
    """precision_cost: float32 over bfloat16. sdpa-efficient's float32 rows drawn are the later
    run's, which measured no bfloat16: no ratio, and the panel says so."""
    B = B1.B
    assert not same_run_ratios(remeasured, (PYTORCH_IN_BOTH, FLOAT32), (PYTORCH_IN_BOTH, BFLOAT16), B)
    half = registry.kernel_reference(BFLOAT16)
    ratios = same_run_ratios(remeasured, (SHOWN, FLOAT32), (half, BFLOAT16), B)
    rows = remeasured.kernel_series(SHOWN, FLOAT32, B)
    assert rows and set(ratios) == {row.T for row in rows}
    for row in rows:
        assert ratios[row.T] == pytest.approx(row.us_device_median
                                              / original.kernel(half, row.shape, BFLOAT16).us_device_median)
    fig = precision_cost(remeasured)
    notes = [t.get_text() for ax in fig.axes for t in ax.texts if NOT_IN_ONE_RUN in t.get_text()]
    assert notes and all(note.startswith(f"{PYTORCH_IN_BOTH}: ") for note in notes)


def test_a_resumed_sweep_is_one_run(remeasured):
    """A sweep stopped by a time limit and resumed at the same commit stamps its second part
    with a later date: its rows still pair with the first part's (Provenance.setup)."""
    alone = remeasured.end_to_end(ALONE, HEADLINE_TOKENS, FLOAT32)
    reference = remeasured.end_to_end(NAIVE, HEADLINE_TOKENS, FLOAT32)  # the LATER run's
    resumed = dataclasses.replace(alone.provenance, commit=reference.provenance.commit,
                                  date="2026-01-04T00:00:00Z")
    assert resumed != reference.provenance
    assert remeasured.end_to_end_in_run(NAIVE, HEADLINE_TOKENS, FLOAT32, resumed) == reference
    assert remeasured.end_to_end_in_run(NAIVE, HEADLINE_TOKENS, FLOAT32, alone.provenance) is None
    assert remeasured.end_to_end_reference(dataclasses.replace(alone, provenance=resumed)).backend == EFFICIENT


def test_a_version_note_compares_with_its_parent_only_within_one_run(remeasured, original):
    """SHOWN and its parent were measured in the fixtures' run: a change. ALONE was measured
    again in the last run, which did not measure its parent SHOWN: the parent's column shows
    its latest time, and the change is a dash (it was ALONE's last time over SHOWN's, two runs)."""
    parent = registry.get(SHOWN).parent
    text = version_section(remeasured, registry.get(SHOWN))
    for shape in VERSION_NOTE_SHAPES:
        before = original.kernel(parent, shape, FLOAT32).us_device_median
        after = original.kernel(SHOWN, shape, FLOAT32).us_device_median
        assert _cells(text, f"kernel device µs, {shape.label()}")[3] == f"{100 * (after - before) / before:+.1f}%"
    assert "The change is" not in text
    text = version_section(remeasured, registry.get(ALONE))
    assert registry.get(ALONE).parent == SHOWN
    for shape in VERSION_NOTE_SHAPES:
        cells = _cells(text, f"kernel device µs, {shape.label()}")
        assert cells[1] == f"{remeasured.kernel(SHOWN, shape, FLOAT32).us_device_median:.1f}" and cells[3] == DASH
    assert (f"The change is {DASH} for the {VERSION_NOTE_SHAPES[0].label()} kernel" in text
            and f"the run that measured `{ALONE}`'s did not measure `{SHOWN}`" in text)
