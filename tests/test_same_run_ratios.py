"""Every ratio of two backends' times divides rows of the same run, after partial sweeps
measured some backends again: the fixtures of one GPU plus a later run that measured the
float32 references again (twice as slow, so a ratio across runs is off by 2x) and a last run
that measured one version again without them (so its ratios have no reference: a dash)."""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from backends import precision, registry
from harness.plots import NOT_IN_ONE_RUN, precision_cost, same_run_ratios
from harness.report import DASH, e2e_table, headline_block, version_section
from harness.results import E2E, KERNELS, E2ERow, KernelRow
from harness.study import HEADLINE_SHAPES, HEADLINE_TOKENS, VERSION_NOTE_SHAPES
from harness.tables import GpuResults, load

RESULTS = Path(__file__).parent / "fixtures" / "results"
GPU_A = "fixture-gpu-a-synthetic-numbers"
FLOAT32, BFLOAT16 = precision.FLOAT32, precision.BFLOAT16
REFERENCE = registry.kernel_reference(FLOAT32)  # of the kernels, and of the headline's and notes' GPT-2 ratio
NAIVE = registry.TOKENS_REFERENCE  # of the end-to-end tables
SHOWN = "v10"  # measured in the fixtures' run only
ALONE = "v11"  # measured again in the last run, without any reference
# Two later sweeps, each at a commit of its own (a run is a setup and a commit; Provenance.setup).
LATER, LAST = ("later0000000", "2026-01-02T00:00:00Z"), ("last00000000", "2026-01-03T00:00:00Z")


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
def remeasured(tmp_path_factory) -> GpuResults:
    out = tmp_path_factory.mktemp("remeasured")
    shutil.copytree(RESULTS / GPU_A, out / GPU_A)
    before = load(GPU_A, out)
    kernels, e2e = KERNELS.path(out, GPU_A), E2E.path(out, GPU_A)
    for row in before.kernels:
        if row.backend == REFERENCE and row.dtype == FLOAT32:  # its stored ratio to itself stays 1
            KERNELS.append(kernels, _again(row, 2.0, LATER))
        elif row.backend == ALONE:  # the benchmark stores no ratio without the reference in the run
            KERNELS.append(kernels, dataclasses.replace(_again(row, 0.9, LAST), ratio_to_reference=None))
    for row in before.e2e:
        if row.dtype == FLOAT32 and row.backend in (REFERENCE, NAIVE):
            E2E.append(e2e, _again(row, 2.0, LATER))
        elif row.backend == ALONE and row.dtype == FLOAT32:
            E2E.append(e2e, _again(row, 0.9, LAST))
    return load(GPU_A, out)


@pytest.fixture(scope="module")
def original() -> GpuResults:
    return load(GPU_A, RESULTS)


def _cells(text: str, first: str) -> list[str]:
    """The cells of the table row of `text` whose first cell is `first`."""
    line = next(line for line in text.splitlines() if line.startswith(f"| {first} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_shown_rows_are_the_latest_and_the_earlier_ones_stay_reachable(remeasured, original):
    shape = HEADLINE_SHAPES[0]
    assert remeasured.kernel(REFERENCE, shape, FLOAT32).provenance.date == LATER[1]
    shown = remeasured.end_to_end(SHOWN, HEADLINE_TOKENS, FLOAT32)
    assert shown == original.end_to_end(SHOWN, HEADLINE_TOKENS, FLOAT32)
    earlier = remeasured.end_to_end_in_run(NAIVE, HEADLINE_TOKENS, FLOAT32, shown.provenance)
    assert earlier == original.end_to_end(NAIVE, HEADLINE_TOKENS, FLOAT32)
    assert remeasured.end_to_end(NAIVE, HEADLINE_TOKENS, FLOAT32).provenance.date == LATER[1]
    alone = remeasured.end_to_end(ALONE, HEADLINE_TOKENS, FLOAT32)
    assert alone.provenance.date == LAST[1]
    assert remeasured.end_to_end_in_run(NAIVE, HEADLINE_TOKENS, FLOAT32, alone.provenance) is None
    assert remeasured.end_to_end_ratio(alone, NAIVE) is None


def test_version_notes_divide_by_the_reference_of_the_same_run(remeasured, original):
    text = version_section(remeasured, registry.get(SHOWN))
    for shape in VERSION_NOTE_SHAPES:
        row = remeasured.kernel(SHOWN, shape, FLOAT32)
        assert _cells(text, f"kernel device µs, {shape.label()}")[4] == f"{row.ratio_to_reference:.2f}"
    mine = remeasured.end_to_end(SHOWN, HEADLINE_TOKENS, FLOAT32)
    same_run = original.end_to_end(REFERENCE, HEADLINE_TOKENS, FLOAT32)
    latest = remeasured.end_to_end(REFERENCE, HEADLINE_TOKENS, FLOAT32)
    expected = f"{mine.seconds_gpu_median / same_run.seconds_gpu_median:.2f}"
    assert expected != f"{mine.seconds_gpu_median / latest.seconds_gpu_median:.2f}"  # the case tested
    assert _cells(text, f"{HEADLINE_TOKENS}-token generation, GPU s")[4] == expected
    assert f"`{REFERENCE}` measured in the same run" in text and f"is {DASH}" not in text


def test_version_notes_show_a_dash_where_the_run_has_no_reference(remeasured):
    text = version_section(remeasured, registry.get(ALONE))
    assert _cells(text, f"{HEADLINE_TOKENS}-token generation, GPU s")[4] == DASH
    for shape in VERSION_NOTE_SHAPES:
        cells = _cells(text, f"kernel device µs, {shape.label()}")
        assert cells[2] != DASH and cells[4] == DASH  # the time is shown, its ratio is not
    assert (f"`{ALONE}` / `{REFERENCE}` is {DASH} for the {VERSION_NOTE_SHAPES[0].label()} kernel" in text
            and f"and the {HEADLINE_TOKENS}-token generation: `{REFERENCE}` has no time measured in the run" in text)


def test_the_end_to_end_table_divides_by_naive_of_the_same_run(remeasured, original):
    table = e2e_table(remeasured, FLOAT32)
    column = _cells(table, "backend").index(f"time / `{NAIVE}`")
    mine = remeasured.end_to_end(SHOWN, HEADLINE_TOKENS, FLOAT32)
    naive = original.end_to_end(NAIVE, HEADLINE_TOKENS, FLOAT32)
    assert _cells(table, f"`{SHOWN}`")[column] == f"{mine.seconds_gpu_median / naive.seconds_gpu_median:.2f}"
    assert _cells(table, f"`{NAIVE}`")[column] == "1.00"  # its own row of the later run
    reference = remeasured.end_to_end(REFERENCE, HEADLINE_TOKENS, FLOAT32)  # both measured again: that run's
    later = remeasured.end_to_end(NAIVE, HEADLINE_TOKENS, FLOAT32)
    assert _cells(table, f"`{REFERENCE}`")[column] == \
        f"{reference.seconds_gpu_median / later.seconds_gpu_median:.2f}"
    assert _cells(table, f"`{ALONE}`")[column] == DASH
    assert f"time / `{NAIVE}` is {DASH} for {ALONE}: `{NAIVE}` has no time measured in the same run." in table


def test_the_headline_shows_same_run_ratios(remeasured, original):
    text = headline_block([remeasured], Path("plots"), Path("README.md"))
    first = registry.versions()[0].name
    cells = _cells(text, f"`{first}`: the first step, {FLOAT32}")
    for cell, shape in zip(cells[1:], HEADLINE_SHAPES):
        assert cell.endswith(f"({remeasured.kernel(first, shape, FLOAT32).ratio_to_reference:.2f}×)"), cell
    mine = remeasured.end_to_end(first, HEADLINE_TOKENS, FLOAT32)
    same_run = original.end_to_end(REFERENCE, HEADLINE_TOKENS, FLOAT32)
    assert cells[-1] == f"{mine.seconds_gpu_median:.3f} s ({mine.seconds_gpu_median / same_run.seconds_gpu_median:.2f}×)"
    assert "measured in the same run" in text and f"is {DASH}" not in text


def test_a_plot_divides_a_drawn_row_by_the_other_rows_of_its_run(remeasured, original):
    """precision_cost: float32 over bfloat16. The float32 reference's rows drawn are the later
    run's, which measured no bfloat16: no ratio, and the panel says so."""
    B = HEADLINE_SHAPES[0].B
    assert not same_run_ratios(remeasured, (REFERENCE, FLOAT32), (REFERENCE, BFLOAT16), B)
    half = registry.kernel_reference(BFLOAT16)
    ratios = same_run_ratios(remeasured, (SHOWN, FLOAT32), (half, BFLOAT16), B)
    rows = remeasured.kernel_series(SHOWN, FLOAT32, B)
    assert rows and set(ratios) == {row.T for row in rows}
    for row in rows:
        assert ratios[row.T] == pytest.approx(row.us_device_median
                                              / original.kernel(half, row.shape, BFLOAT16).us_device_median)
    fig = precision_cost(remeasured)
    notes = [t.get_text() for ax in fig.axes for t in ax.texts if NOT_IN_ONE_RUN in t.get_text()]
    assert notes and all(note.startswith(f"{REFERENCE}: ") for note in notes)


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
