"""Plots and tables from synthetic results of two GPUs (tests/fixtures, no GPU)."""
from __future__ import annotations

import filecmp
import importlib.util
from pathlib import Path

import pytest

from backends import registry
from harness import cli as harness_cli
from harness.plots import FIGURES, GPU_COMPARISON, plot_all
from harness.report import README, cross_gpu_table, gpu_section, replace_block, version_section
from harness.results import ResultsFileError
from harness.study import HEADLINE_SHAPES, HEADLINE_TOKENS, VERSION_NOTE_SHAPES
from harness.tables import load, load_all

FIXTURES = Path(__file__).parent / "fixtures"
RESULTS = FIXTURES / "results"
GPU_A = "fixture-gpu-a-synthetic-numbers"


def test_fixtures_have_the_current_schema(tmp_path):
    """The committed fixtures are what make_fixtures.py writes today."""
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for path in module.write(tmp_path):
        committed = RESULTS / path.relative_to(tmp_path)
        assert filecmp.cmp(path, committed, shallow=False), f"{committed} is stale: run {FIXTURES}/make_fixtures.py"


def test_every_figure_is_drawn(tmp_path):
    gpus = load_all(RESULTS)
    written = plot_all(gpus, tmp_path)
    expected = {tmp_path / r.slug / name for r in gpus for name in FIGURES} | {tmp_path / GPU_COMPARISON}
    assert set(written) == expected
    for path in written:
        assert path.stat().st_size > 10_000, path


def test_tables_come_from_the_csv():
    r = load(GPU_A, RESULTS)
    section = gpu_section(r, Path("plots"), README, RESULTS)
    naive = r.end_to_end("naive", HEADLINE_TOKENS)
    assert f"| `naive` | {naive.seconds_gpu_median:.3f} | {naive.seconds_gpu_min:.3f}–{naive.seconds_gpu_max:.3f} | " \
           f"{naive.seconds_eager_median:.3f} |" in section
    reference = r.kernel(registry.KERNEL_REFERENCE, HEADLINE_SHAPES[1])
    assert f"| `{registry.KERNEL_REFERENCE}` | {reference.us_device_median:.1f} |" in section
    assert "`sdpa-flash`: not available for float32" in section
    assert "`v02`: not capturable" in section  # a note, never silent
    assert "GPT-2 (12 layers, 12 heads, width 768)" in section


def test_sweep_wall_time_comes_from_stages_csv():
    """Each run at the results' commit is a row, stage by stage; a run at another commit is
    not shown, and a GPU without stages.csv has no such table."""
    section = gpu_section(load(GPU_A, RESULTS), Path("plots"), README, RESULTS)
    assert "| run (UTC) | mode | backends | build | correctness gate | kernel benchmark | end-to-end | total | " \
           "stages that failed |" in section
    assert "| 2026-01-01 00:00:00 | full | `all` | 41 | 65 | – | – | 106 | – |" in section
    assert "| 2026-01-01 01:00:00 | full | `all` | 1 | 2 | 62 | 401 | 466 | end-to-end |" in section
    assert "2026-01-02" not in section and "| 99 |" not in section
    other = gpu_section(load("fixture-gpu-b-synthetic-numbers", RESULTS), Path("plots"), README, RESULTS)
    assert "Sweep wall time" not in other


def test_cross_gpu_table_has_a_column_per_gpu_and_measure():
    gpus = load_all(RESULTS)
    table = cross_gpu_table(gpus)
    header = table.splitlines()[2]
    for r in gpus:
        assert f"{r.gpu}: {HEADLINE_TOKENS} tokens, GPU (s)" in header
        for shape in HEADLINE_SHAPES:
            assert f"{r.gpu}: kernel {shape.label()} (µs)" in header
    v11 = [line for line in table.splitlines() if line.startswith("| `v11` |")][0]
    assert f"{gpus[1].kernel('v11', HEADLINE_SHAPES[0]).us_device_median:.1f}" in v11


def test_version_notes_show_every_note_shape_and_the_ratio():
    r = load(GPU_A, RESULTS)
    text = version_section(r, "v11", "v10")
    for shape in VERSION_NOTE_SHAPES:
        assert f"kernel device µs, {shape.label()}" in text
    assert f"{HEADLINE_TOKENS}-token generation, GPU s" in text
    ratio = r.kernel("v11", VERSION_NOTE_SHAPES[0]).ratio_to_reference
    assert f"{ratio:.2f} |" in text


def test_report_of_another_results_folder_leaves_the_readme_alone(tmp_path, capsys):
    before = README.read_text()
    out = tmp_path / "report.md"
    assert harness_cli.main(["report", "--results-dir", str(RESULTS), "--plots-dir", str(tmp_path),
                             "--output", str(out)]) == 0
    assert README.read_text() == before
    assert "### All GPUs" in out.read_text() and "Fixture GPU B" in out.read_text()


def test_generated_block_replaces_only_its_markers():
    text = "intro\n<!-- BEGIN GENERATED: x -->\nold\n<!-- END GENERATED: x -->\noutro\n"
    new = replace_block(text, "x", "new")
    assert new == "intro\n<!-- BEGIN GENERATED: x -->\nnew\n<!-- END GENERATED: x -->\noutro\n"
    assert replace_block("plain", "y", "body").endswith("<!-- BEGIN GENERATED: y -->\nbody\n<!-- END GENERATED: y -->\n")


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
    for name in ("kernels.csv", "e2e.csv"):
        (folder / name).write_text((RESULTS / GPU_A / name).read_text())
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
