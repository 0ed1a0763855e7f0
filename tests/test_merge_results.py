"""experiments/tools/merge_results.py: a device run's new rows are appended to the local
results, rows already there are not doubled, and a file of another header is refused."""
from __future__ import annotations

from pathlib import Path

from tests.scripts import load_script

HEADER = "backend,dtype,us,commit"


def write(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_new_rows_are_appended_in_the_runs_order_and_old_ones_kept(tmp_path):
    tool = load_script("experiments/tools/merge_results.py")
    local = write(tmp_path / "results/gpu/kernels.csv", HEADER, "a,float32,1.0,x", "b,float32,2.0,x")
    write(tmp_path / "run/gpu/kernels.csv", HEADER, "a,float32,1.0,x", "c,float32,3.0,y", "d,float32,4.0,y")
    write(tmp_path / "run/other-gpu/stages.csv", "run,stage", "r1,build")
    assert tool.main([str(tmp_path / "run"), "--results-dir", str(tmp_path / "results")]) == 0
    assert local.read_text().splitlines() == [HEADER, "a,float32,1.0,x", "b,float32,2.0,x",
                                              "c,float32,3.0,y", "d,float32,4.0,y"]
    assert (tmp_path / "results/other-gpu/stages.csv").read_text() == "run,stage\nr1,build\n"
    assert tool.main([str(tmp_path / "run"), "--results-dir", str(tmp_path / "results")]) == 0  # again
    assert len(local.read_text().splitlines()) == 5


def test_a_file_of_another_header_is_refused_and_nothing_written(tmp_path, capsys):
    tool = load_script("experiments/tools/merge_results.py")
    local = write(tmp_path / "results/gpu/kernels.csv", HEADER, "a,float32,1.0,x")
    write(tmp_path / "run/gpu/kernels.csv", "backend,dtype,us", "c,float32,3.0")
    assert tool.main([str(tmp_path / "run"), "--results-dir", str(tmp_path / "results")]) == 2
    assert "header differs" in capsys.readouterr().err
    assert local.read_text() == f"{HEADER}\na,float32,1.0,x\n"


def test_an_empty_run_folder_is_an_error(tmp_path, capsys):
    tool = load_script("experiments/tools/merge_results.py")
    assert tool.main([str(tmp_path)]) == 2
    assert "no <gpu>/<file>.csv in" in capsys.readouterr().err


def test_full_sweeps_archive_is_merged_as_its_folder(tmp_path):
    """full_sweep.sh returns the rows as sweep_results.tgz (./<gpu>/<file>.csv inside)."""
    import tarfile

    tool = load_script("experiments/tools/merge_results.py")
    local = write(tmp_path / "results/gpu/kernels.csv", HEADER, "a,float32,1.0,x")
    write(tmp_path / "run/gpu/kernels.csv", HEADER, "a,float32,1.0,x", "c,float32,3.0,y")
    archive = tmp_path / "sweep_results.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "run/gpu/kernels.csv", arcname="./gpu/kernels.csv")
    assert tool.main([str(archive), "--results-dir", str(tmp_path / "results")]) == 0
    assert local.read_text().splitlines() == [HEADER, "a,float32,1.0,x", "c,float32,3.0,y"]
