"""experiments/tools/summarize_decode.py: decode.csv's rows as a table, the same table as before
it had a command line; one line and exit status 2 for a file it cannot read as decode.csv's."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.scripts import ROOT, load_script

DECODE = ROOT / "tests" / "fixtures" / "results" / "fixture-gpu-a-synthetic-numbers" / "decode.csv"
# sha256 of what the script printed for DECODE before it had a command line (68 lines)
PRINTED = "b2a0e1da544c20ac4230a4b8194e5fc2144750d80da461cd24718f2119e24759"


@pytest.fixture(scope="module")
def summarize():
    return load_script("experiments/tools/summarize_decode.py")


def test_the_table_of_a_good_file_is_unchanged(summarize, capsys):
    assert summarize.main([str(DECODE)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "hbm 3000" and lines[1].split() == ["dtype", "B", "S", "len", "naive", "sdpa-math",
                                                           "sdpa-efficient", "sdpa-flash", "sdpa-cudnn",
                                                           "flex-attention", *(f"d{i:02d}" for i in range(1, 11))]
    assert lines[2] == "bfloat16    1    256 full " + " ".join([
        "     6.6   119  1.53", "     9.2    85  2.14", "     4.5   174  1.05", "     4.4   180  1.01",
        "     4.3   182  1.00", "     4.7   169  1.08", "     4.9   161  1.13", "     4.7   167  1.09",
        "     4.6   171  1.06", "     4.5   174  1.05", "     4.5   176  1.03", "     4.4   178  1.02",
        "     4.4   180  1.01", "     4.3   181  1.00", "     4.3   182  1.00", "     4.3   183  0.99"])
    assert "float32     1    256 full      9.2   170  1.83     14.5   109  2.87      5.0   312  1.00 " \
           "not available for fl not available for fl      5.3   296  1.05" in out
    assert len(lines) == 68 and hashlib.sha256(out.encode()).hexdigest() == PRINTED


def test_several_files_are_a_table_each_under_its_name(summarize, capsys):
    """The device calls pass a glob ($OUT/res/*/decode.csv): a second GPU's file was left out
    without a word."""
    assert summarize.main([str(DECODE), str(DECODE)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"== {DECODE}" and lines[70] == f"== {DECODE}" and lines[69] == ""
    assert lines[1:69] == lines[71:]


def test_help_is_its_docstring(summarize, capsys):
    """'--help' was opened as a file (FileNotFoundError)."""
    with pytest.raises(SystemExit) as stop:
        summarize.main(["--help"])
    assert stop.value.code == 0 and "Print decode.csv rows as a table per dtype" in capsys.readouterr().out


def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


@pytest.mark.parametrize("make,said", [
    (lambda d: d / "missing.csv", "missing.csv: no such file"),
    (lambda d: d, "is a folder, not a decode.csv file"),
    (lambda d: write(d / "empty.csv", ""), "empty.csv is empty: no header, no rows"),
    (lambda d: write(d / "header.csv", DECODE.read_text().splitlines()[0] + "\n"), "header.csv: a header and no rows"),
    (lambda d: write(d / "kernels.csv", "backend,dtype,B,H,T\nv01,float32,1,12,64\n"),
     "kernels.csv: not decode.csv's rows (no column S, lengths, status"),
    (lambda d: write(d / "cut.csv", "\n".join(DECODE.read_text().splitlines()[:2])[:-200] + "\n"),
     "cut.csv:2: a damaged row"),
    (lambda d: write(d / "latin.csv", b"backend,dtype\n\xe9\n"), "latin.csv: cannot be read"),
    (lambda d: "", "argument CSV: an empty path"),
], ids=["missing", "folder", "empty", "header only", "another csv", "damaged row", "not utf-8", "empty path"])
def test_a_file_that_is_not_decode_csv_is_one_line(summarize, make, said, tmp_path, capsys):
    """Each was a traceback (FileNotFoundError, IsADirectoryError, NameError: hbm, KeyError,
    ValueError, UnicodeDecodeError); '' opened the current folder."""
    try:
        code = summarize.main([str(DECODE), str(make(tmp_path))])
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "", "a table printed before the bad file was found"
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and said in err, err
