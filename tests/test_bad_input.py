"""Issue 44 item 6: bad input that ended in a traceback or was silently taken for something
else now gets one line on stderr and a non-zero exit (or, for a damaged row of a results
file, one warning line naming the file and the line, and the row left out of every table and
figure). No GPU needed."""
from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import torch

from backends import precision, registry
from backends.registry import PROJECT_ROOT
from gpt2 import cli as gpt2_cli
from harness import cli as harness_cli
from harness.results import CORRECTNESS, DECODE_TIMES, E2E, KERNELS, OK, STAGES, TABLES, ResultsFileError
from tests.ahead import Ahead, takes
from tests.scripts import load_script

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


# == the further bad inputs of each kind (issue 44, item 6, after it landed) ====================

def first_row(table) -> dict[str, str]:
    """GPU A's first measured row of `table`'s file, as text: one that reads without a problem."""
    with (FIXTURES / GPU / table.file_name).open(newline="") as f:
        return next(r for r in csv.DictReader(f) if r.get("status", OK) == OK)


def write_rows(path: Path, table, rows: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table.columns))
        writer.writeheader()
        writer.writerows(rows)
    return path


def number_columns(table) -> list[tuple[str, type]]:
    hints = typing.get_type_hints(table.row_type)
    kinds = {name: next((k for k in (bool, int, float) if k in (hint, *typing.get_args(hint))), None)
             for name, hint in hints.items() if name != "provenance"}
    return [(name, kind) for name, kind in kinds.items() if kind in (int, float)]


def bad_numbers(table, column: str, kind: type) -> dict[str, str]:
    """Values no row of `table` may hold in `column`, and what the warning says of each: not
    finite, negative (but where a number is signed), zero (but where a number may be: an
    exact result, a stage under a second), beyond any measurement, or an integer too long for
    a float (it ended in OverflowError)."""
    signed = column in getattr(table.row_type, "SIGNED", ())
    values = {"inf": "is not a finite number", "nan": "is not a finite number"} if kind is float else {}
    if not signed:
        values["-1"] = "is negative"
    if column not in getattr(table.row_type, "MAY_BE_ZERO", ()):
        values["0"] = "is zero"
    values["1" + "0" * 16] = "is beyond any measurement"
    if kind is int:
        values["1" + "0" * 400] = "is beyond any measurement"
    else:
        values.update({"1e308": "is beyond any measurement", "1e-16": "is beyond any measurement",
                       "1e-310": "is beyond any measurement"})
    return values


@pytest.mark.parametrize("table,column,kind", [(t, c, k) for t in TABLES for c, k in number_columns(t)],
                         ids=lambda value: getattr(value, "file_name", None) or getattr(value, "__name__", value))
def test_every_number_of_every_results_file_that_no_measurement_has_is_a_damaged_row(table, column, kind, tmp_path):
    """Zero where nothing measured is (a time: ZeroDivisionError in the version notes, B=0 in
    decode.csv: ValueError in the decode page), beyond any measurement (1e-310 and 1e308:
    'inf×' and 'inf%' in the tables; an integer of 400 digits: OverflowError in the reader)."""
    row = first_row(table)
    path = tmp_path / table.file_name
    for value, said in bad_numbers(table, column, kind).items():
        write_rows(path, table, [row, {**row, column: value}, row])
        read = table.read(path)
        assert len(read.rows) == 2, (column, value)
        assert len(read.problems) == 1, (column, value, read.problems)
        assert read.problems[0].startswith(f"{path}:3: skipped a damaged row ({column}={value!r} {said}"), \
            read.problems


@pytest.mark.parametrize("table,changes,said", [
    (KERNELS, {"us_device_min": ""}, "us_device_min empty beside us_device_median, us_device_max"),
    (E2E, {"seconds_eager_min": "", "seconds_eager_max": ""}, "seconds_eager_min, seconds_eager_max empty beside"),
    (E2E, {"prompt_tokens": "64", "tokens": "64"}, "prompt_tokens=64 is not below tokens=64"),
    (E2E, {"mode": "recompute-twice"}, "mode='recompute-twice' is not one of recompute, kv-cache"),
    (DECODE_TIMES, {"lengths": "ragged"}, "lengths='ragged' is not one of full, ramp"),
    (CORRECTNESS, {"dtype": "float33"}, "dtype='float33' is not one of float32, bfloat16, float16"),
], ids=["min empty", "eager spread half empty", "nothing generated", "unknown mode", "unknown lengths",
        "unknown dtype"])
def test_a_row_whose_values_contradict_each_other_is_a_damaged_row(table, changes, said, tmp_path):
    """A spread half empty crashed `plot` (TypeError on None); a prompt as long as the
    generation drew negative tokens/s; unknown lengths crashed the decode page (ValueError); an
    unknown dtype or mode was tabled under it ('KV-cache generation, float33') or dropped
    without a word."""
    row = first_row(table)
    path = write_rows(tmp_path / table.file_name, table, [row, {**row, **changes}])
    read = table.read(path)
    assert len(read.rows) == 1
    assert len(read.problems) == 1 and read.problems[0].startswith(f"{path}:3: skipped a damaged row (")
    assert said in read.problems[0], read.problems[0]


def test_an_unclosed_quote_names_every_line_it_swallowed(tmp_path):
    """The warning named the line where the row ended (37): the 35 rows before it were lost
    without a word."""
    row = first_row(KERNELS)
    path = write_rows(tmp_path / KERNELS.file_name, KERNELS, [row] * 6)
    lines = path.read_text().splitlines()
    lines[2] = '"' + lines[2]  # never closed: the csv module reads on to the end of the file
    path.write_text("\n".join(lines) + "\n")
    read = KERNELS.read(path)
    assert len(read.rows) == 1
    assert len(read.problems) == 1 and read.problems[0].startswith(f"{path}:3-7: skipped"), read.problems


def test_a_header_that_names_a_column_twice_is_another_schema(tmp_path):
    """Every row was a damaged row (13 of 14 fields), one warning each."""
    path = tmp_path / STAGES.file_name
    path.write_text(",".join([*STAGES.columns, "run"]) + "\n")
    with pytest.raises(ResultsFileError, match="repeated run"):
        STAGES.read(path)


@pytest.fixture(scope="module")
def contradicting_results(tmp_path_factory) -> tuple[Path, list[str]]:
    """GPU A's rows at a few shapes with one damaged row per way `plot` and `report` failed on a
    row that read without a problem; the damaged rows' '<file>:<line>'. And one row that reads
    and is drawn, whose spread does not hold its median (a minimum above it: matplotlib's
    'yerr must not contain negative values')."""
    results = tmp_path_factory.mktemp("contradicting")
    damaged = []
    plan = {KERNELS: (lambda r: (r["B"], r["T"]) in {("1", "512"), ("8", "4096")},
                      {"v29": {"us_device_median": "0"}, "sdpa-efficient": {"us_device_median": "1e-310"},
                       "naive": {"us_device_min": ""}, "h23": {"us_device_min": "99999"}}),
            DECODE_TIMES: (lambda r: r["B"] == "8", {"d09": {"B": "0"}, "naive": {"lengths": "ragged"}})}
    for table, (keep, changes) in plan.items():
        with (FIXTURES / GPU / table.file_name).open(newline="") as f:
            rows = [r for r in csv.DictReader(f) if keep(r)]
        for backend, change in changes.items():  # the last such row a figure draws: a ragged batch in decode.csv
            index = max(i for i, r in enumerate(rows) if r["backend"] == backend and r["status"] == OK
                        and r["dtype"] != "float16")
            rows[index] = {**rows[index], **change}
            if change != {"us_device_min": "99999"}:
                damaged.append(f"{table.file_name}:{index + 2}")
        write_rows(results / GPU / table.file_name, table, rows)
    return results, damaged


def test_rows_that_crashed_plot_and_report_are_warned_of_and_left_out(contradicting_results, tmp_path, capsys,
                                                                     monkeypatch):
    """report: ZeroDivisionError (a zero time), ValueError (B=0, unknown lengths), 'inf×' in the
    headline (1e-310); plot: ValueError (a spread that does not hold its median), TypeError (a
    spread half empty). The figures are made, not drawn into PNGs (a second each), and only the
    kernels' (the decode rows failed in the tables)."""
    import matplotlib.pyplot as plt

    from harness import plots

    results, damaged = contradicting_results
    report, drawn = tmp_path / "report.md", tmp_path / "drawn"
    shutil.copytree(results, drawn, ignore=shutil.ignore_patterns(DECODE_TIMES.file_name))
    monkeypatch.setattr(plots, "save", lambda fig, path: plt.close(fig) or path)
    for command, folder in ((["report", "--output", str(report)], results),
                            (["plot", "--plots-dir", str(tmp_path / "plots")], drawn)):
        assert harness_cli.main([*command, "--results-dir", str(folder)]) == 0
        err = capsys.readouterr().err
        assert all(line.startswith("warning: ") for line in err.splitlines()), err
        shown = [where for where in damaged if (folder / GPU / where.split(":")[0]).exists()]
        assert len(err.splitlines()) == len(shown), err
        for where in shown:
            assert f"{folder / GPU / where}: skipped a damaged row" in err, (where, err)
    assert not re.search(r"(?<![\w-])(inf|nan)(?![\w-])", report.read_text())


# -- python -m harness: names twice, numbers without a bound, checks after the GPU's -----------------
@pytest.mark.parametrize("argv,said", [
    (["build", "--backends", "v16,v16"], "'v16,v16' names v16 more than once: name each backend once"),
    (["bench-kernels", "--backends", "naive, v29,naive"], "names naive more than once"),
    (["check", "--dtypes", "bfloat16,bfloat16"], "--dtypes: 'bfloat16,bfloat16' names bfloat16 more than once"),
    (["try", "--against", "v16,v16"], "names v16 more than once"),
    (["bench-e2e", "--backends", "transformers-generate,transformers-generate"],
     "names transformers-generate more than once"),
    (["compile-check", "--arch", "sm_90", "--arch", "sm_90"], "--arch sm_90 is given more than once"),
], ids=["build", "bench-kernels", "check dtypes", "try against", "bench-e2e transformers", "compile-check arch"])
def test_a_name_given_twice_is_refused(argv, said, capsys):
    """Each was accepted: built, checked and timed twice, its rows written twice (a dtype named
    twice was silently merged), or compiled twice."""
    harness(argv, capsys, said)


@pytest.mark.parametrize("rounds", ["51", str(10**9)])
def test_bench_decode_bounds_its_rounds_as_bench_kernels_does(rounds, capsys):
    """bench-decode checked only the lower bound: 10**9 rounds went on to the GPU."""
    harness(["bench-decode", "--rounds", rounds], capsys, f"--rounds must be at most {harness_cli.MAX_ROUNDS}")


@pytest.mark.parametrize("command", [["check"], ["bench-kernels"], ["bench-decode"], ["bench-e2e", "--weights", "random"],
                                     ["record-stages", "build:41:0", "--run", "r", "--mode", "full", "--backends", "all"]])
def test_a_results_dir_under_a_file_is_refused_before_the_gpu_is_asked_for(command, tmp_path, capsys):
    """It said 'no CUDA device is available'; on a GPU the first row ended in a traceback
    (NotADirectoryError). A path under a regular file fails for root too."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for folder in (a_file, a_file / "results"):
        harness([*command, "--results-dir", str(folder)], capsys,
                f"--results-dir {folder}: {a_file} is a file, not a folder")


def test_arguments_that_need_no_gpu_are_checked_before_it(tmp_path, capsys):
    """Each said 'no CUDA device is available' (and on a GPU, bench-e2e and precompile found the
    model folder wrong only after the GPU's setup, call the dtype only after building)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    harness(["precompile", "--quick", "--grid-only"], capsys, "--quick and --grid-only exclude each other")
    for command in (["precompile"], ["bench-e2e"]):
        harness([*command, "--model-dir", str(a_file)], capsys, f"model directory {a_file} is a file")
        harness([*command, "--model-dir", str(tmp_path / "missing")], capsys, "does not exist")
    harness(["call", "v16", "--dtype", "float16"], capsys, "--dtype float16: v16 (not available for float16")
    harness(["call", "v16", "--dtype", ""], capsys, "argument --dtype: an empty")  # it meant the default


@pytest.mark.parametrize("stage,said", [
    ("build:nan:0", "its seconds must be a number from 0 to"), ("build:inf:0", "its seconds must be a number from 0"),
    ("build:-5:0", "its seconds must be a number from 0"), ("build:1e300:0", "its seconds must be a number from 0"),
    ("build:41:-1", "its exit status must be from 0 to 255 (got -1)"), ("build:41:256", "its exit status must be"),
    (" :41:0", "cannot read the stage"),
], ids=["nan", "inf", "negative", "absurd", "negative status", "status over 255", "blank name"])
def test_record_stages_refuses_a_stage_no_run_has(stage, said, capsys):
    """Each was taken as given: a stage time of nan, inf or -5 s stored in stages.csv (a
    damaged row from then on), an exit status no process has."""
    harness(["record-stages", stage, "--run", "2026-01-01T00:00:00Z", "--mode", "full", "--backends", "all"], capsys,
            said)


@pytest.mark.parametrize("option", ["--run", "--backends", "--dtypes"])
def test_record_stages_refuses_an_empty_value(option, capsys):
    argv = {"--run": "2026-01-01T00:00:00Z", "--backends": "all", "--dtypes": "all"}
    argv[option] = ""
    harness(["record-stages", "build:41:0", "--mode", "full", *(x for item in argv.items() for x in item)], capsys,
            f"argument {option}: an empty")


def test_report_refuses_to_write_over_a_results_file(tmp_path, capsys):
    """--output results/<gpu>/kernels.csv replaced the measurements with the report."""
    folder = tmp_path / "results" / GPU
    shutil.copytree(FIXTURES / GPU, folder)
    before = (folder / "kernels.csv").read_bytes()
    harness(["report", "--results-dir", str(tmp_path / "results"), "--output", str(folder / "kernels.csv")], capsys,
            "is named as a results file")
    assert (folder / "kernels.csv").read_bytes() == before


def test_report_refuses_a_plots_dir_that_is_a_file(tmp_path, capsys):
    """The report linked its figures into a file (every image a dead link)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for plots in (a_file, a_file / "plots"):
        harness(["report", "--results-dir", str(FIXTURES), "--output", str(tmp_path / "r.md"), "--plots-dir",
                 str(plots)], capsys, f"--plots-dir {plots}: {a_file} is a file, not a folder")
    assert not (tmp_path / "r.md").exists()


# -- python -m gpt2 -------------------------------------------------------------------------------
def test_gpt2_bounds_the_batch(capsys):
    """--batch 10**9 was accepted: it built a billion prompts and never started."""
    refused(gpt2_cli.main, ["--batch", str(10**9), "--device", "cpu", "--weights", "random"], capsys,
            f"--batch must be at most {gpt2_cli.MAX_BATCH} (got 1000000000)")


def test_a_model_dir_that_is_a_file_or_holds_no_finite_epsilon(tmp_path, capsys):
    """A file was 'a model directory that does not exist'; layer_norm_epsilon Infinity (JSON
    that Python reads) or NaN was taken as a positive number."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    refused(gpt2_cli.main, ["--model-dir", str(a_file), "--device", "cpu"], capsys,
            f"model directory {a_file} is a file")
    for value in ("Infinity", "NaN"):
        folder = tmp_path / value
        folder.mkdir()
        (folder / "config.json").write_text(f'{{"n_layer": 2, "n_head": 2, "n_embd": 128, '
                                            f'"layer_norm_epsilon": {value}}}')
        (folder / "model.safetensors").write_text("")
        refused(gpt2_cli.main, ["--model-dir", str(folder), "--device", "cpu"], capsys,
                "layer_norm_epsilon must be a positive finite number")


# -- run_all.sh -------------------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["--results-dir", "--plots-dir", "--model-dir", "--backends", "--dtypes"])
def test_run_all_refuses_a_blank_value(trial, option):
    """' ' passed the check for an empty value: the stage began and failed ('--plots-dir ' '),
    or a GPU sweep measured for an hour before the model folder ' ' was looked at."""
    results, plots = trial
    proc = run_all("--plots-only", "--results-dir", str(results), "--plots-dir", str(plots), option, " ")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"run_all.sh: {option} needs a value"
    assert "==" not in proc.stdout, "no stage may run"


def run_all_with_folders_that_cannot_be(ahead: Ahead) -> tuple[Path, subprocess.CompletedProcess]:
    """A job: --plots-only with a file as --results-dir, a --plots-dir under it and a model
    folder that is not one (the check imports torch: seconds in the background)."""
    folder = ahead.tmp("folders")
    a_file = folder / "a-file"
    a_file.write_text("")
    return folder, run_all("--plots-only", "--results-dir", str(a_file), "--plots-dir", str(a_file / "plots"),
                           "--model-dir", str(folder / "missing"))


@takes(run_all_with_folders_that_cannot_be)
def test_run_all_refuses_folders_that_cannot_be_before_any_stage(ahead):
    """The plots stage began and failed on the first ('== plots'); the model folder was looked
    at by the end-to-end stage only, after the build, the gate and the kernel benchmark."""
    folder, proc = ahead(run_all_with_folders_that_cannot_be)
    a_file = folder / "a-file"
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"run_all.sh: --results-dir {a_file} is a file: name a folder of results",
        f"run_all.sh: --plots-dir {a_file / 'plots'}: {a_file} is a file, not a folder",
        f"run_all.sh: --model-dir: model directory {folder / 'missing'} does not exist"]
    assert "==" not in proc.stdout, "no stage may run"


# -- experiments/tools --------------------------------------------------------------------------------
def tool_refuses(main, argv: list[str] | None, capsys, *fragments: str, monkeypatch=None) -> str:
    """A tool's main(argv) (argv None: sys.argv, set here) ends with status 2 and no traceback,
    saying every fragment on stderr."""
    if argv is not None and monkeypatch is not None:
        monkeypatch.setattr(sys, "argv", ["tool", *argv])
        argv = None
    try:
        code = main(argv) if argv is not None else main()
    except SystemExit as stop:
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2, err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def test_merge_results_refuses_what_it_cannot_merge_before_writing(tmp_path, capsys):
    """'' merged the current folder, or into it; a GPU's folder as --results-dir got
    <gpu>/<gpu>/; a file in the way, a .tgz that does not unpack, a CSV that is a folder or not
    UTF-8 ended in a traceback, some files merged and some not."""
    merge = load_script("experiments/tools/merge_results.py").main
    run, results = tmp_path / "run", tmp_path / "results"
    write_rows(run / GPU / "kernels.csv", KERNELS, [first_row(KERNELS)])
    write_rows(results / GPU / "kernels.csv", KERNELS, [])
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    (tmp_path / "damaged.tgz").write_bytes(b"\x1f\x8b\x08\x00 not a whole archive")
    tool_refuses(merge, [""], capsys, "argument run: an empty path")
    tool_refuses(merge, [str(run), "--results-dir", ""], capsys, "argument --results-dir: an empty path")
    tool_refuses(merge, [str(run), "--results-dir", str(results / GPU)], capsys, "holds one GPU's results itself")
    tool_refuses(merge, [str(run), "--results-dir", str(a_file / "results")], capsys, f"{a_file} is a file")
    tool_refuses(merge, [str(tmp_path / "damaged.tgz"), "--results-dir", str(results)], capsys, "does not unpack")
    (run / GPU / "e2e.csv").mkdir()
    tool_refuses(merge, [str(run), "--results-dir", str(results)], capsys, "e2e.csv is a folder, not a CSV file")
    (run / GPU / "e2e.csv").rmdir()
    (run / GPU / "stages.csv").write_bytes(b"run,stage\n\xff\n")
    tool_refuses(merge, [str(run), "--results-dir", str(results)], capsys, "stages.csv is not UTF-8 text")
    assert KERNELS.read(results / GPU / "kernels.csv").rows == [], "nothing merged"
    assert not (results / GPU / GPU).exists() and not (tmp_path / GPU).exists()


def test_merge_results_does_not_join_a_row_to_one_cut_short(tmp_path):
    """The first new row was appended to the local file's last line, which a crash had cut
    short: two rows lost as one damaged row."""
    merge = load_script("experiments/tools/merge_results.py").main
    row = first_row(KERNELS)
    run, results = tmp_path / "run", tmp_path / "results"
    write_rows(run / GPU / "kernels.csv", KERNELS, [{**row, "T": "77"}])
    local = write_rows(results / GPU / "kernels.csv", KERNELS, [row])
    local.write_text(local.read_text()[:-30])  # the last row cut short, no newline
    assert merge([str(run), "--results-dir", str(results)]) == 0
    read = KERNELS.read(local)
    assert [r.T for r in read.rows] == [77] and len(read.problems) == 1 and ":2: skipped" in read.problems[0]


def test_the_grid_tools_refuse_unknown_dtypes_and_unusable_files_in_one_line(tmp_path, capsys):
    """grid_floor.py --dtypes float33 and a results file that is a folder ended in a traceback;
    --gpu '.' read the results folder itself as a GPU's; h23_cost_model.py took --dtype float33,
    --sms 0 and --copy-from '' (for the default), and said 'substring not found' of a log that
    holds no try table."""
    grid_floor = load_script("experiments/tools/grid_floor.py").main
    h23 = load_script("experiments/tools/h23_cost_model.py").main
    run = ["--gpu", GPU, "--commit", "fixture", "--results-dir", str(FIXTURES)]
    err = tool_refuses(grid_floor, [*run, "--dtypes", "float33"], capsys, "--dtypes: unknown dtype 'float33'")
    assert len(err.splitlines()) == 1, err
    tool_refuses(grid_floor, [*run, "--dtypes", "float32,float32"], capsys, "names float32 more than once")
    tool_refuses(grid_floor, ["--gpu", ".", "--commit", "fixture", "--results-dir", str(FIXTURES)], capsys,
                 "--gpu '.': name one GPU's folder")
    (tmp_path / GPU / "kernels.csv").mkdir(parents=True)
    tool_refuses(grid_floor, ["--gpu", GPU, "--commit", "fixture", "--results-dir", str(tmp_path)], capsys,
                 "kernels.csv is a folder, not a kernels.csv file")
    tool_refuses(h23, [*run, "--dtype", "float33"], capsys, "argument --dtype: invalid choice: 'float33'")
    tool_refuses(h23, [*run, "--sms", "0"], capsys, "--sms must be at least 1 (got 0)")
    tool_refuses(h23, [*run, "--copy-from", ""], capsys, "argument --copy-from: an empty")
    (tmp_path / "empty.log").write_text("")
    tool_refuses(h23, [*run, "--version", "h24", "--trials", str(tmp_path / "empty.log")], capsys,
                 "--trials: no table 'device time, µs, bfloat16'")


def test_the_grid_tools_warn_of_a_damaged_row(tmp_path, capsys):
    """Left out without a word (the tables the tools print are committed)."""
    grid_floor = load_script("experiments/tools/grid_floor.py").main
    shutil.copytree(FIXTURES / GPU, tmp_path / GPU)
    path = tmp_path / GPU / "stages.csv"
    path.write_text(path.read_text() + "cut short\n")
    grid_floor(["--gpu", GPU, "--commit", "fixture", "--results-dir", str(tmp_path)])
    assert f"warning: {path}:{len(path.read_text().splitlines())}: skipped a damaged row" in capsys.readouterr().err


@pytest.mark.parametrize("name,argv,said", [
    ("persistent_schedule", ["--sms", str(10**9)], "--sms and --group must be positive (--sms at most"),
    ("persistent_schedule", ["--start-cost", "nan"], "--start-cost a finite number"),
    ("persistent_schedule", ["--start-cost", "1", "inf"], "--start-cost a finite number"),
    ("row_block_plans", ["--sms", str(10**9)], "--sms must be positive (at most"),
    ("row_block_plans", ["--start-cost", "nan"], "--start-cost a finite number"),
    ("split_once_model", ["--l2-tbps", "nan"], "--l2-tbps must be a positive finite number"),
    ("split_once_model", ["--l2-tbps", "inf"], "--l2-tbps must be a positive finite number"),
    ("split_once_model", ["--measure-l2"], "--measure-l2 needs a GPU"),
    ("half_probe", ["h01", "--dtypes", "float33"], "unknown dtype 'float33'"),
    ("half_probe", ["h99"], "unknown backend 'h99'"),
    ("half_probe", ["h01"], "no CUDA device is available"),
    ("sweep_time_profile", ["--results-dir", "x", "--e2e", "v99"], "--e2e: unknown backend 'v99'"),
    ("sweep_time_profile", ["--results-dir", "x"], "no CUDA device is available"),
], ids=["schedule sms", "schedule nan", "schedule inf", "plans sms", "plans nan", "split nan", "split inf",
        "split measure", "probe dtype", "probe name", "probe gpu", "profile name", "profile gpu"])
def test_the_model_and_probe_tools_refuse_numbers_and_names_they_cannot_use(name, argv, said, capsys, monkeypatch):
    """10**9 SMs never ended (a schedule over every SM); a start cost or bandwidth of nan or
    inf printed nan and inf (row_block_plans.py: ZeroDivisionError); the GPU probes ended in a
    traceback without a GPU (AssertionError, BackendUnavailableError) or for an unknown name."""
    tool = load_script(f"experiments/tools/{name}.py")
    tool_refuses(tool.main, argv, capsys, said, monkeypatch=monkeypatch)


@pytest.mark.parametrize("name,argv", [("item_timeline", []), ("small_t_timeline", ["summarise"])])
def test_the_timeline_tools_read_a_file_that_is_not_utf8(name, argv, tmp_path, capsys):
    """UnicodeDecodeError: a traceback; now the bytes are read as text that is no timeline, as
    step_timeline.py and sass_stalls.py read them. A 'TS' line with a field that is not an
    integer ended in ValueError (small_t_timeline.py)."""
    main = load_script(f"experiments/tools/{name}.py").main
    damaged = tmp_path / "timeline.txt"
    damaged.write_bytes(b"\xff\xfe\x00 not text\n# B=1 T=64 call 1\nTS 0 x" + b" 1" * 19 + b"\n")
    try:
        main([*argv, str(damaged)])
    except SystemExit as stop:
        assert stop.code not in (0, None) and str(damaged) in str(stop.code), stop.code
    assert "Traceback" not in capsys.readouterr().err


# == the third round of each kind (issue 44, item 6) ================================================
@pytest.fixture
def loop(tmp_path) -> Path:
    """A symbolic link that leads to itself, through a second one."""
    (tmp_path / "loop").symlink_to(tmp_path / "loop-2")
    (tmp_path / "loop-2").symlink_to(tmp_path / "loop")
    return tmp_path / "loop"


@pytest.mark.parametrize("argv", [
    ["plot", "--results-dir", "{loop}"], ["plot", "--results-dir", str(FIXTURES), "--plots-dir", "{loop}"],
    ["report", "--results-dir", str(FIXTURES), "--output", "{loop}"],
    ["report", "--results-dir", str(FIXTURES), "--output", "{loop}/report.md"],
    ["report", "--results-dir", str(FIXTURES), "--output", "r.md", "--plots-dir", "{loop}"],
    ["bench-kernels", "--results-dir", "{loop}/results"]], ids=["plot results", "plot plots", "report output",
                                                                "report under", "report plots", "bench-kernels"])
def test_a_symbolic_link_loop_is_named_in_one_line(argv, loop, tmp_path, capsys, monkeypatch):
    """A traceback (RuntimeError: Symlink loop, from the path shown in the message); report
    --output replaced the link by the report."""
    monkeypatch.chdir(tmp_path)
    harness([arg.format(loop=loop) for arg in argv], capsys, f"{loop} is a symbolic link that leads nowhere (a loop")
    assert loop.is_symlink() and not (tmp_path / "r.md").exists()


@pytest.mark.parametrize("option,value,said", [
    ("--dtypes", "float33", "--dtypes: unknown dtype 'float33'"), ("--backends", "v99", "unknown backend 'v99'"),
    ("--backends", "v16,v16", "names v16 more than once")])
def test_record_stages_refuses_a_selection_no_run_has(option, value, said, capsys):
    """Taken as given (on a GPU, stored in stages.csv as the run's selection)."""
    argv = {"--run": "2026-01-01T00:00:00Z", "--mode": "full", "--backends": "all", option: value}
    harness(["record-stages", "build:41:0", *(x for item in argv.items() for x in item)], capsys, said)


def test_a_last_row_cut_short_in_its_last_value_is_a_damaged_row(tmp_path):
    """A write cut short inside the last value (the date) left every field there: the row was
    taken, with a date of '2026-01-01T0'. A row the reader already skips is said once."""
    path = write_rows(tmp_path / STAGES.file_name, STAGES, [first_row(STAGES)] * 3)
    path.write_bytes(path.read_bytes()[:-10])
    read = STAGES.read(path)
    assert len(read.rows) == 2
    assert read.problems == [f"{path}:4: skipped a damaged row (cut short: the file ends inside it, with no line "
                             "break after it)"]
    path.write_bytes(path.read_bytes()[:-60])
    read = STAGES.read(path)
    assert len(read.rows) == 2 and len(read.problems) == 1 and "fields)" in read.problems[0], read.problems


def test_a_byte_order_mark_is_not_read_as_part_of_the_first_column(tmp_path):
    """A file saved by a spreadsheet as 'UTF-8 with BOM' was 'written by another version of the
    harness' (missing backend; unknown \\ufeffbackend)."""
    path = write_rows(tmp_path / KERNELS.file_name, KERNELS, [first_row(KERNELS)])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    read = KERNELS.read(path)
    assert len(read.rows) == 1 and read.problems == []


def test_merge_results_refuses_a_header_that_differs_before_writing_any_file(tmp_path, capsys):
    """The files before it were merged, then it stopped ('not merged', exit status 1): half a run
    merged."""
    merge = load_script("experiments/tools/merge_results.py").main
    run, results = tmp_path / "run", tmp_path / "results"
    write_rows(run / GPU / CORRECTNESS.file_name, CORRECTNESS, [first_row(CORRECTNESS)])
    write_rows(run / GPU / STAGES.file_name, STAGES, [first_row(STAGES)])
    write_rows(results / GPU / CORRECTNESS.file_name, CORRECTNESS, [])
    local = results / GPU / STAGES.file_name
    local.write_text(",".join(STAGES.columns).replace("date", "when") + "\n")
    tool_refuses(merge, [str(run), "--results-dir", str(results)], capsys,
                 f"{run / GPU / STAGES.file_name}'s header differs from {local}'s", "nothing was merged")
    assert CORRECTNESS.read(results / GPU / CORRECTNESS.file_name).rows == []


@pytest.mark.parametrize("main,argv,said", [
    (harness_cli.main, ["plot", "--plots-dir", "a", "--plots-dir", "b"], "argument --plots-dir: given twice ('a', "
                                                                         "then 'b'): give it once"),
    (harness_cli.main, ["call", "v16", "--B", "1", "--B", "2"], "argument --B: given twice ('1', then '2')"),
    (harness_cli.main, ["bench-kernels", "--results-dir=a", "--results-dir", "a"],
     "argument --results-dir: given twice"),
    (gpt2_cli.main, ["--device", "cpu", "--weights", "random", "--weights", "auto"], "argument --weights: given twice"),
], ids=["plot", "call", "bench-kernels", "gpt2"])
def test_an_option_given_twice_is_refused(main, argv, said, capsys, tmp_path, monkeypatch):
    """The last one was taken without a word (a sweep into the second of two folders)."""
    monkeypatch.chdir(tmp_path)
    refused(main, argv, capsys, said)
    assert list(tmp_path.iterdir()) == []


def test_an_option_given_twice_in_a_list_option_or_a_flag_is_taken():
    """--arch is repeatable, a flag given twice says the same thing twice."""
    args = harness_cli.build_parser().parse_args(["compile-check", "--arch", "sm_90", "--arch", "sm_75"])
    assert args.arch == ["sm_90", "sm_75"] and not hasattr(args, "_options_given")
    assert harness_cli.build_parser().parse_args(["bench-kernels", "--quick", "--quick"]).quick


@pytest.mark.parametrize("args,option", [(("--results-dir", "a", "--results-dir=b"), "--results-dir"),
                                         (("--dtypes=float32", "--dtypes", "all"), "--dtypes")])
def test_run_all_refuses_an_option_given_twice(args, option):
    """The last one was taken: --plots-only drew from the second folder without a word."""
    proc = run_all("--plots-only", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"run_all.sh: {option} is given twice: give it once"
    assert "==" not in proc.stdout, "no stage may run"


# == the scripts still on plain argparse, and messages that said the wrong thing (issue 44, item 6) ====
TWICE = [
    ("tools/persistent_schedule", ["--sms", "132", "--sms", "66"], "--sms"),
    ("tools/persistent_schedule", ["--start-cost", "1", "--start-cost", "2"], "--start-cost"),
    ("tools/row_block_plans", ["--sms", "132", "--sms", "66"], "--sms"),
    ("tools/narrow_timeline", ["t.txt", "--blocks", "0", "--blocks", "1"], "--blocks"),
    ("tools/narrow_pair_plan", ["--heads", "12", "--heads", "96"], "--heads"),
    ("tools/sass_stalls", ["k.sass", "--function", "a", "--function", "b"], "--function"),
    ("tools/small_t_timeline", ["record", "--B", "1", "--B", "8"], "--B"),
    ("tools/half_probe", ["h01", "--dtypes", "float16", "--dtypes", "bfloat16"], "--dtypes"),
    ("tools/sweep_time_profile", ["--results-dir", "a", "--results-dir", "b"], "--results-dir"),
    ("tools/split_once_model", ["--l2-tbps", "6", "--l2-tbps", "7"], "--l2-tbps"),
    ("d09/cudnn_profile", ["--B", "32", "--B", "8"], "--B"),
    ("d09/read_floor", ["--rounds", "1", "--rounds", "2"], "--rounds"),
]


@pytest.mark.parametrize("script,argv,option", TWICE, ids=[f"{s.split('/')[1]} {o}" for s, _, o in TWICE])
def test_the_scripts_refuse_an_option_given_twice(script, argv, option, capsys, tmp_path, monkeypatch):
    """argparse took the last value without a word (and said a bad command line in two lines,
    its usage first)."""
    monkeypatch.chdir(tmp_path)
    main = load_script(f"experiments/{script}.py").main
    refused(main, argv, capsys, f"argument {option}: given twice")
    assert list(tmp_path.iterdir()) == []


EMPTY = [
    ("item_timeline", [""], "argument files: an empty path"),
    ("step_timeline", [""], "argument files: an empty path"),
    ("narrow_timeline", ["", "--overview"], "argument file: an empty path"),
    ("narrow_timeline", ["t.txt", "--blocks", " "], "argument --blocks: an empty value"),
    ("sass_stalls", ["k.sass", "--function", ""], "argument --function: an empty value"),
    ("sass_stalls", ["k.sass", "--from", ""], "argument --from: an empty value"),
    ("small_t_timeline", ["summarise", ""], "argument files: an empty path"),
    ("small_t_timeline", ["record", "--plain", ""], "argument --plain: an empty value"),
    ("sweep_time_profile", ["--results-dir", ""], "argument --results-dir: an empty path"),
    ("index", ["--check", "--stale"], "unrecognized arguments: --stale"),
    ("narrow_pair_plan", ["--heads", str(10**9)], "--heads must be at most 264 (got 1000000000)"),
]


@pytest.mark.parametrize("name,argv,said", EMPTY, ids=[f"{n} {' '.join(a)}" for n, a, _ in EMPTY])
def test_the_scripts_refuse_an_empty_value_in_one_line(name, argv, said, capsys, tmp_path, monkeypatch):
    """'' was the current folder ('.: no such file') or a function, a delimiter or a backend
    named '' (a search that finds nothing, a traceback on a GPU); a bad command line took two
    lines; --heads 10**9 printed nothing and exited 0."""
    monkeypatch.chdir(tmp_path)
    refused(load_script(f"experiments/tools/{name}.py").main, argv, capsys, said)


def test_cudnn_profile_refuses_an_empty_backend_list_and_a_machine_without_a_gpu(capsys):
    """--backends '' was registry.get(''); without a GPU, torch's own traceback."""
    main = load_script("experiments/d09/cudnn_profile.py").main
    refused(main, ["--backends", ""], capsys, "argument --backends: an empty value")
    refused(main, [], capsys, "no CUDA device is available")
    refused(load_script("experiments/d09/read_floor.py").main, ["--batches", "1"], capsys,
            "no CUDA device is available")


@pytest.mark.parametrize("name,argv", [("item_timeline", []), ("step_timeline", []), ("sass_stalls", []),
                                       ("small_t_timeline", ["summarise"])])
def test_the_timeline_tools_say_a_folder_is_a_folder(name, argv, tmp_path, capsys):
    """'<folder>: no such file'."""
    main = load_script(f"experiments/tools/{name}.py").main
    try:
        code = main([*argv, str(tmp_path)])
    except SystemExit as stop:
        code = stop.code
    assert code not in (0, None)
    said = code if isinstance(code, str) else capsys.readouterr().err
    assert f"{tmp_path} is a folder, not a file" in said, said


@pytest.mark.parametrize("command", [["try", "--compile-only"], ["call"]])
def test_a_patch_that_is_a_folder_or_empty_is_said_to_be_so(command, tmp_path, capsys, monkeypatch):
    """A folder was 'no patch file'; an empty patch got as far as git apply, whose own error
    came as a second line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "patches").mkdir()
    harness([*command, "x=v16+patches"], capsys, "x: the patch 'patches' is a folder: name a patch file")
    (tmp_path / "empty.patch").write_text("\n")
    harness([*command, "x=v16+empty.patch"], capsys, "x: the patch 'empty.patch' is empty: nothing to apply")


def test_the_grid_tools_say_an_empty_gpu_and_an_io_floor_folder(tmp_path, capsys):
    """--gpu '' was 'no folder <results-dir>/'; --io-floor <folder> was 'no such file'."""
    grid_floor = load_script("experiments/tools/grid_floor.py").main
    h23 = load_script("experiments/tools/h23_cost_model.py").main
    for main in (grid_floor, h23):
        refused(main, ["--gpu", "", "--commit", "fixture", "--results-dir", str(FIXTURES)], capsys,
                "argument --gpu: an empty value")
    refused(grid_floor, ["--gpu", GPU, "--commit", "fixture", "--results-dir", str(FIXTURES),
                         "--io-floor", str(tmp_path)], capsys, f"--io-floor {tmp_path} is a folder")


def test_a_model_dir_whose_weights_file_is_a_folder(tmp_path, capsys):
    """'has no model.safetensors', of a folder that has one (a folder)."""
    (tmp_path / "config.json").write_text('{"n_layer": 2, "n_head": 2, "n_embd": 128}')
    (tmp_path / "model.safetensors").mkdir()
    refused(gpt2_cli.main, ["--model-dir", str(tmp_path), "--device", "cpu"], capsys,
            f"model directory {tmp_path}: its model.safetensors is a folder, not a file")
