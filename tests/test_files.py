"""Generated files (README tables, version notes, reports, figures) are written whole or not
at all (harness/files.py): a report stopped midway leaves the old files and no temporary
file behind."""
from __future__ import annotations

import dataclasses
import errno
import os
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from backends import registry
from harness import cli as harness_cli
from harness import plots, report


def disk_full(fd: int) -> None:
    """os.fsync as the disk fills up while the new text goes to it."""
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def interrupted(fd: int) -> None:
    """os.fsync as Ctrl-C arrives while the new text goes to disk."""
    raise KeyboardInterrupt


TITLES = {"study": "# study\n", "v01": "# v01\n", "d01": "# d01\n"}


@pytest.fixture
def readmes(tmp_path, monkeypatch, committed_results_read_once) -> dict[str, Path]:
    """README.md, one prefill version's notes and one decode version's, in folders of their own,
    for `report` to update (and results/README.md, beside which the GPUs' pages go): nothing of
    the project's own files is written. The committed results are read once (conftest.py)."""
    paths = {name: tmp_path / name / "README.md" for name in TITLES}
    for name, path in paths.items():
        path.parent.mkdir()
        path.write_text(TITLES[name])
    monkeypatch.setattr(report, "README", paths["study"])
    monkeypatch.setattr(report, "RESULTS_README", tmp_path / "results" / "README.md")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "README.md").write_text("# results\n")
    v01 = dataclasses.replace(registry.get("v01"), folder=str(paths["v01"].parent))
    d01 = dataclasses.replace(registry.decode_versions()[0], folder=str(paths["d01"].parent))
    monkeypatch.setattr(registry, "versions", lambda: [v01])
    monkeypatch.setattr(registry, "decode_versions", lambda: [d01])
    return paths


@pytest.mark.parametrize("failing,status,message", [(disk_full, 2, "No space left on device"),
                                                     (interrupted, 130, "interrupted")])
def test_a_report_stopped_midway_leaves_the_readmes_as_they_were(readmes, monkeypatch, capsys, failing, status,
                                                                 message):
    readme = readmes["study"]
    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", failing)
        assert harness_cli.main(["report"]) == status  # the committed results
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    if failing is disk_full:
        assert f"cannot write {readme}:" in err, "the file the user knows, not the temporary one"
    for name, path in readmes.items():
        assert path.read_text() == TITLES[name]
        assert os.listdir(path.parent) == ["README.md"], "no temporary file left"
    assert harness_cli.main(["report"]) == 0
    assert "<!-- BEGIN GENERATED: headline -->" in readme.read_text()
    assert "<!-- BEGIN GENERATED: measured -->" in readmes["d01"].read_text()
    assert all(os.listdir(path.parent) == ["README.md"] for path in readmes.values())


def test_a_figure_is_replaced_whole_keeping_the_file_mode(tmp_path, monkeypatch):
    fig = Figure(figsize=(1, 1))
    FigureCanvasAgg(fig)
    path = tmp_path / "a.png"
    path.write_bytes(b"the old figure")
    path.chmod(0o640)
    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", disk_full)
        with pytest.raises(OSError, match="No space left on device") as raised:
            plots.save(fig, path)
    assert raised.value.filename == str(path)
    assert path.read_bytes() == b"the old figure" and os.listdir(tmp_path) == ["a.png"]
    plots.save(fig, path)
    assert path.read_bytes().startswith(b"\x89PNG") and os.listdir(tmp_path) == ["a.png"]
    assert path.stat().st_mode & 0o777 == 0o640
