"""harness/one_run.py: the arguments the grid tools share, and the copy's rate of one sweep."""
from __future__ import annotations

import argparse
import statistics

import pytest

from harness.one_run import add_run_arguments, copy_rate, load_run
from tests.scripts import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "results"
GPU_A = "fixture-gpu-a-synthetic-numbers"


def test_copy_rate_is_the_median_of_that_commits_decode_rows_and_none_elsewhere(fixture_results):
    r = fixture_results[0]  # GPU A, as read once for the session (tests/conftest.py)
    assert r.slug == GPU_A
    commit = r.measured_decode[0].provenance.commit
    rates = [x.hbm_gbps for x in r.measured_decode if x.provenance.commit == commit and x.hbm_gbps]
    assert rates and copy_rate(r, commit) == statistics.median(rates)
    assert copy_rate(r, "no-such-commit") is None


def test_a_gpu_folder_that_is_not_there_is_a_usage_error(capsys):
    parser = argparse.ArgumentParser(prog="tool")
    add_run_arguments(parser)
    args = parser.parse_args(["--gpu", "no-such-gpu", "--commit", "x", "--results-dir", str(FIXTURES)])
    with pytest.raises(SystemExit) as stop:
        load_run(parser, args)
    assert stop.value.code == 2 and "no folder" in capsys.readouterr().err


@pytest.mark.parametrize("gpu", ["", " "])
def test_an_empty_gpu_is_said_to_be_empty(gpu, capsys):
    """Not 'no folder <results-dir>/', which sent the reader looking at the folder."""
    parser = argparse.ArgumentParser(prog="tool")
    add_run_arguments(parser)
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--gpu", gpu, "--commit", "x", "--results-dir", str(FIXTURES)])
    assert stop.value.code == 2 and "argument --gpu: an empty value" in capsys.readouterr().err
