"""Plots and README tables from a small synthetic CSV fixture (no GPU)."""
from pathlib import Path

import pytest

from harness.plots import plot_all
from harness.report import gpu_section, replace_block
from harness.tables import load

FIXTURES = Path(__file__).parent / "fixtures" / "results"


def test_every_figure_is_drawn(tmp_path):
    written = plot_all(FIXTURES, tmp_path)
    names = sorted(p.name for p in written)
    assert names == sorted(["e2e_time_vs_tokens.png", "e2e_512_progression.png", "kernel_versions.png",
                            "kernel_time_vs_T.png", "peak_memory_vs_tokens.png"])
    for path in written:
        assert path.parent == tmp_path / "fixture-gpu" and path.stat().st_size > 10_000


def test_tables_come_from_the_csv():
    section = gpu_section(load("fixture-gpu", FIXTURES))
    assert "| `naive` | 2.418 |" in section  # e2e.csv: naive, 512 tokens, seconds_median 2.41804
    assert "`sdpa-flash`: not available for float32" in section


def test_generated_block_replaces_only_its_markers():
    text = "intro\n<!-- BEGIN GENERATED: x -->\nold\n<!-- END GENERATED: x -->\noutro\n"
    new = replace_block(text, "x", "new")
    assert new == "intro\n<!-- BEGIN GENERATED: x -->\nnew\n<!-- END GENERATED: x -->\noutro\n"
    assert replace_block("plain", "y", "body").endswith("<!-- BEGIN GENERATED: y -->\nbody\n<!-- END GENERATED: y -->\n")


def test_mixed_gpus_are_refused(tmp_path):
    folder = tmp_path / "two-gpus"
    folder.mkdir()
    lines = (FIXTURES / "fixture-gpu" / "e2e.csv").read_text().splitlines()
    lines[2] = lines[2].replace("Fixture GPU (synthetic numbers)", "Another GPU")
    (folder / "e2e.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="never mix"):
        load("two-gpus", tmp_path)
