"""Results files: one schema for writer and readers, typed values, damaged rows reported
with file and line and skipped, files of another schema refused with their name."""
from __future__ import annotations

import csv
import dataclasses

import pytest

from backends.environment import Provenance
from harness.results import CORRECTNESS, KERNELS, CorrectnessRow, ResultsFileError, done

PROVENANCE = Provenance(gpu="Fixture GPU", driver="1.0", cuda="13.0", torch="2.13.0", commit="abc123",
                        date="2026-01-01T00:00:00Z")


def row(T: int, passed: bool = True, **changes) -> CorrectnessRow:
    base = CorrectnessRow(backend="v01", dtype="float32", B=1, H=12, T=T, rel_err=1.5e-7, max_abs_err=8.25e-7,
                          rel_tol=1e-5, abs_tol=1e-4, passed=passed, provenance=PROVENANCE)
    return dataclasses.replace(base, **changes)


def test_rows_round_trip_with_their_types(tmp_path):
    path = tmp_path / "gpu" / CORRECTNESS.file_name
    written = [row(1), row(33, passed=False), row(65, provenance=dataclasses.replace(PROVENANCE, commit="other"))]
    for r in written:
        CORRECTNESS.append(path, r)
    result = CORRECTNESS.read(path)
    assert result.problems == []
    assert result.rows == written
    assert isinstance(result.rows[0].T, int) and result.rows[1].passed is False
    assert set(done(CORRECTNESS, path, PROVENANCE)) == {("v01", "float32", 1, 12, 1), ("v01", "float32", 1, 12, 33)}


def test_a_damaged_row_is_reported_with_file_and_line_and_skipped(tmp_path, capsys):
    path = tmp_path / CORRECTNESS.file_name
    for T in (1, 33, 65):
        CORRECTNESS.append(path, row(T))
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace("1.5e-07", "one")  # a value that does not parse (line 3)
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])  # and the last row cut short
    result = CORRECTNESS.read(path)
    assert [r.T for r in result.rows] == [1]
    cut = len(lines[-1][:20].split(","))
    assert result.problems == [f"{path}:3: skipped a damaged row (rel_err='one' is not a float)",
                               f"{path}:4: skipped a damaged row ({cut} of 16 fields)"]
    done(CORRECTNESS, path, PROVENANCE)
    assert f"warning: {path}:4: skipped a damaged row" in capsys.readouterr().err
    CORRECTNESS.append(path, row(129))  # after a row cut short: starts on a new line
    assert [r.T for r in CORRECTNESS.read(path).rows] == [1, 129]


def test_a_file_of_another_schema_is_refused_by_name(tmp_path):
    path = tmp_path / KERNELS.file_name
    path.write_text("backend,B,H,T,d,status,reps,us_median,us_min,us_max\nnaive,1,12,64,64,ok,50,1,1,1\n")
    with pytest.raises(ResultsFileError, match=f"{path} does not have the columns.*missing .*us_device_median"):
        KERNELS.read(path)
    with pytest.raises(ResultsFileError, match=str(path)):
        KERNELS.append(path, None)  # refused before anything is written
    assert path.read_text().count("\n") == 2


def test_a_reader_that_cannot_go_on_reports_the_rest_of_the_file(tmp_path, monkeypatch):
    """Where csv's reader raises csv.Error without reading a line, reading on would fail the
    same way forever: the rows before are kept and the rest of the file is reported."""
    path = tmp_path / CORRECTNESS.file_name
    for T in (1, 33, 65):
        CORRECTNESS.append(path, row(T))
    real = csv.reader

    class Stuck:
        """csv's reader, stuck after line 2."""

        def __init__(self, f) -> None:
            self.inner = real(f)
            self.asked = 0

        @property
        def line_num(self) -> int:
            return self.inner.line_num

        def __iter__(self):
            return self

        def __next__(self) -> list[str]:
            if self.inner.line_num == 2:
                self.asked += 1
                assert self.asked < 3, "read on after it was stuck: it would never end"
                raise csv.Error("stuck")
            return next(self.inner)

    monkeypatch.setattr(csv, "reader", Stuck)
    result = CORRECTNESS.read(path)
    assert [r.T for r in result.rows] == [1]
    assert result.problems == [f"{path}:3: skipped the rest of the file (stuck)"]


def test_study_commit_names_the_commit_in_git_s_short_form(monkeypatch):
    """A full hash in STUDY_COMMIT is written as the 12 digits the rows of a checkout with
    .git carry, so that one commit is never named two ways in the CSVs; anything else
    (a short hash, a tag) is written as given."""
    from backends import environment

    monkeypatch.setenv("STUDY_COMMIT", "A871D7D0F3A57ACCB78D5A0D32E130089FEA384C")
    assert environment.git_commit() == "a871d7d0f3a5"
    monkeypatch.setenv("STUDY_COMMIT", "a871d7d")
    assert environment.git_commit() == "a871d7d"
    monkeypatch.setenv("STUDY_COMMIT", "release-candidate-of-the-study")
    assert environment.git_commit() == "release-candidate-of-the-study"
