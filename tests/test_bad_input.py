"""Issue 44 item 6: bad input that ended in a traceback or was silently taken for something
else now gets one line on stderr and a non-zero exit (or, for a damaged row of a results
file, one warning line naming the file and the line, and the row left out of every table and
figure). No GPU needed."""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from backends import precision, registry
from backends.registry import PROJECT_ROOT
from gpt2 import cli as gpt2_cli
from harness import cli as harness_cli
from harness.results import KERNELS, TABLES, ResultsFileError
from tests.ahead import Ahead, takes

FIXTURES = PROJECT_ROOT / "tests" / "fixtures" / "results"
GPU = "fixture-gpu-a-synthetic-numbers"
FILES = [table.file_name for table in TABLES if (FIXTURES / GPU / table.file_name).exists()]  # its results files
PATCH = "a=v16+experiments/v16/v16_1_k_float2.patch"


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    """As on a machine without a GPU, whatever this one has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def refused(main, argv: list[str], capsys, *fragments: str) -> str:
    """`main(argv)` ends with status 2 (returned, or argparse's SystemExit) and one line on
    stderr holding every fragment."""
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def harness(argv: list[str], capsys, *fragments: str) -> str:
    return refused(harness_cli.main, argv, capsys, *fragments)


# -- numbers that are not times -------------------------------------------------------------
DAMAGED = {"inf": "is not a finite number", "nan": "is not a finite number", "-inf": "is not a finite number",
           "-3.5": "is negative"}


@pytest.fixture(scope="module")
def damaged_results(tmp_path_factory) -> tuple[Path, dict[int, str]]:
    """GPU A's kernel rows at the headline shapes, one device time per damaged value of DAMAGED
    replaced; line number -> the value written there."""
    results = tmp_path_factory.mktemp("damaged")
    folder = results / GPU
    folder.mkdir()
    with (FIXTURES / GPU / "kernels.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    kept = [r for r in rows if (r["B"], r["T"]) in {("1", "512"), ("8", "4096")}]
    lines = {}
    targets = [r for r in kept if r["backend"] in ("v29", "h23", "sdpa-efficient", "naive") and r["status"] == "ok"]
    for row, value in zip(targets, DAMAGED):
        row["us_device_median"] = value
        lines[kept.index(row) + 2] = value  # the header is line 1
    with (folder / "kernels.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(kept)
    return results, lines


def test_non_finite_and_negative_times_are_damaged_rows(damaged_results, tmp_path, capsys):
    """They crashed `plot` (ValueError, StopIteration after 4 of 7 figures) and `report` (math
    domain error), or were tabled as inf / nan."""
    results, lines = damaged_results
    path = results / GPU / "kernels.csv"
    read = KERNELS.read(path)
    assert len(read.problems) == len(DAMAGED)
    for line, value in lines.items():
        assert f"{path}:{line}: skipped a damaged row (us_device_median={value!r} {DAMAGED[value]})" in read.problems
    report = tmp_path / "report.md"
    for command in (["plot", "--plots-dir", str(tmp_path / "plots")], ["report", "--output", str(report)]):
        assert harness_cli.main([*command, "--results-dir", str(results)]) == 0
        err = capsys.readouterr().err
        assert "Traceback" not in err
        for line in lines:
            assert f"warning: {path}:{line}: skipped a damaged row" in err, err
    assert len(list((tmp_path / "plots" / GPU).glob("*.png"))) >= 4
    text = report.read_text()
    for word in ("inf", "nan", "-3.5"):
        assert f"| {word} |" not in text and f" {word} µs" not in text


def test_a_signed_number_may_be_negative_and_counts_may_not(tmp_path):
    """The attention share (1 - floor / GPU time) may fall below zero; a count may not."""
    from harness.results import E2E

    with (FIXTURES / GPU / "e2e.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    ok = [r for r in rows if r["status"] == "ok"][:2]
    ok[0]["attention_gpu_share"] = "-0.01"
    ok[1]["replays"] = "-2"
    path = tmp_path / "e2e.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(ok)
    read = E2E.read(path)
    assert [r.attention_gpu_share for r in read.rows] == [-0.01]
    assert read.problems == [f"{path}:3: skipped a damaged row (replays='-2' is negative)"]


# -- files and folders that are not what they should be ---------------------------------------
def test_a_results_file_that_is_a_folder(tmp_path, capsys):
    (tmp_path / GPU / "kernels.csv").mkdir(parents=True)
    for command in (["plot", "--plots-dir", str(tmp_path / "plots")], ["report", "--output", str(tmp_path / "r.md")]):
        harness([*command, "--results-dir", str(tmp_path)], capsys,
                f"{tmp_path / GPU / 'kernels.csv'} is a folder, not a kernels.csv file")
    with pytest.raises(ResultsFileError, match="is a folder"):
        KERNELS.append(tmp_path / GPU / "kernels.csv", None)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", [["plot"], ["report"], ["bench-kernels"], ["check"], ["precompile"]])
def test_a_gpu_folder_as_results_dir_says_to_pass_its_parent(command, capsys):
    """It read nothing (plot, report: 'no results') or would write <gpu>/<gpu>/ (a sweep)."""
    folder = FIXTURES / GPU
    shown = folder.relative_to(PROJECT_ROOT)  # paths inside the project are said relative to it
    harness([*command, "--results-dir", str(folder)], capsys,
            f"--results-dir {shown} holds one GPU's results itself (", f"pass the folder above it, {shown.parent}")


def test_try_log_must_be_a_file_it_can_write(tmp_path, capsys, monkeypatch):
    """A folder, a missing folder or an unwritable path: said before anything is built."""
    monkeypatch.chdir(PROJECT_ROOT)  # the patch's path is relative to the project
    try_ = ["try", "--compile-only", PATCH, "--log"]
    harness([*try_, str(tmp_path)], capsys, f"--log {tmp_path} is a folder: name a file")
    harness([*try_, str(tmp_path / "missing" / "try.log")], capsys,
            f"--log {tmp_path / 'missing' / 'try.log'}: the folder {tmp_path / 'missing'} does not exist")
    unwritable = Path("/sys/try.log")  # sysfs: no file can be created there, not even by root
    if not unwritable.parent.is_dir() or os.access(unwritable.parent, os.W_OK) and os.geteuid() != 0:
        pytest.skip("no folder here that refuses a new file")
    harness([*try_, str(unwritable)], capsys, f"--log {unwritable}: cannot write it (")
    assert not (tmp_path / "missing").exists()


# -- empty values -------------------------------------------------------------------------------
@pytest.mark.parametrize("argv,option", [
    (["plot", "--plots-dir", ""], "--plots-dir"),
    (["plot", "--results-dir", ""], "--results-dir"),
    (["report", "--output", ""], "--output"),
    (["build", "--backends", ""], "--backends"),
    (["bench-kernels", "--dtypes", " "], "--dtypes"),
    (["try", "--compile-only", PATCH, "--log", ""], "--log"),
    (["try", "--against", ""], "--against"),
], ids=lambda value: value if isinstance(value, str) else " ".join(value[:1]))
def test_an_empty_value_is_refused_not_taken_for_the_default_or_the_current_folder(argv, option, capsys, tmp_path,
                                                                                  monkeypatch):
    """--plots-dir '' wrote into the current folder (the repo root), --backends '' meant all."""
    monkeypatch.chdir(tmp_path)  # where a command that took '' for '.' would write
    harness(argv, capsys, f"argument {option}: an empty")


@pytest.mark.parametrize("spec", ["", ",", " , "])
def test_a_list_that_names_nothing_is_refused(spec):
    with pytest.raises(registry.UnknownBackendError, match="names no backend"):
        registry.select(spec)
    with pytest.raises(precision.UnknownDtypeError, match="names no dtype"):
        precision.select(spec)
    assert registry.select(None) == registry.select("all") == list(registry.BACKENDS)


def test_gpt2_refuses_an_empty_model_dir(capsys):
    refused(gpt2_cli.main, ["--model-dir", "", "--device", "cpu"], capsys, "argument --model-dir: an empty")


# -- absurd numbers ---------------------------------------------------------------------------
def test_absurd_repeats_and_rounds_are_refused_at_once(capsys, monkeypatch):
    monkeypatch.chdir(PROJECT_ROOT)
    refused(gpt2_cli.main, ["--repeats", str(10**9), "--device", "cpu", "--weights", "random"], capsys,
            f"--repeats must be at most {gpt2_cli.MAX_REPEATS} (got 1000000000)")
    harness(["bench-kernels", "--rounds", str(10**9)], capsys,
            f"--rounds must be at most {harness_cli.MAX_ROUNDS} (got 1000000000)")
    harness(["try", "--rounds", str(10**9), PATCH], capsys, f"--rounds must be at most {harness_cli.MAX_ROUNDS}")
    harness(["build", "--jobs", str(10**9)], capsys, f"--jobs must be at most {harness_cli.MAX_JOBS}")
    harness(["call", "v16", "--repeat", str(10**9)], capsys, f"--repeat must be at most {harness_cli.MAX_CALLS}")
    harness(["call", "v16", "--B", "64", "--T", str(10**6)], capsys, "--B × --T must be at most")


# -- run_all.sh -----------------------------------------------------------------------------------
def run_all(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHON": sys.executable}
    return subprocess.run(["bash", "run_all.sh", *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def trial(tmp_path_factory) -> tuple[Path, Path]:
    """A copy of GPU A's results and a folder for figures: where a run_all.sh that failed to
    refuse would write (never the project's own results/ and plots/)."""
    out = tmp_path_factory.mktemp("trial")
    shutil.copytree(FIXTURES / GPU, out / "results" / GPU)
    return out / "results", out / "plots"


@pytest.mark.parametrize("args,message", [
    (("--backends=",), "run_all.sh: --backends needs a value"),
    (("--model-dir=",), "run_all.sh: --model-dir needs a value"),
], ids=["empty backends", "empty model dir"])
def test_run_all_refuses_an_empty_value(trial, args, message):
    """--backends= meant all."""
    results, plots = trial
    proc = run_all("--plots-only", "--results-dir", str(results), "--plots-dir", str(plots), *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == message
    assert "==" not in proc.stdout, "no stage may run"


def run_all_with_two_bad_arguments(ahead: Ahead) -> tuple[Path, subprocess.CompletedProcess]:
    """A job (tests/ahead.py): run_all.sh's check of its arguments imports torch, seconds spent in
    the background while the other tests run. Into a copy of GPU A's results, as `trial`."""
    results = ahead.tmp("trial") / "results"
    shutil.copytree(FIXTURES / GPU, results / GPU)
    return results, run_all("--plots-only", "--dtypes", "float33", "--results-dir", str(results / GPU),
                            "--plots-dir", str(results.parent / "plots"))


@takes(run_all_with_two_bad_arguments)
def test_run_all_refuses_an_unknown_dtype_and_a_gpu_folder_before_any_stage(ahead):
    """--plots-only --dtypes float33 drew everything; a GPU folder as --results-dir read nothing.
    One run, one line each (the check says every problem it finds)."""
    results, proc = ahead(run_all_with_two_bad_arguments)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        "run_all.sh: --dtypes: unknown dtype 'float33'; the study measures float32, bfloat16, float16",
        f"run_all.sh: --results-dir {results / GPU} holds one GPU's results itself ({', '.join(FILES)}): pass the "
        f"folder above it, {results} (results go to <results-dir>/<gpu>/)"]
    assert "==" not in proc.stdout, "no stage may run"
