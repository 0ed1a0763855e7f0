"""The prefill floors (harness/prefill_floor.py): bytes and FLOPs counted by hand at small
shapes, the floors' units, and which floor binds where."""
from __future__ import annotations

import re

import pytest

from backends import precision
from harness.prefill_floor import causal_flops, compute_floor_us, floor_us, io_bytes, memory_floor_us
from harness.study import Shape
from tests.scripts import ROOT, load_script

FLOAT32, BFLOAT16 = precision.FLOAT32, precision.BFLOAT16


def test_bytes_are_q_k_v_and_o_once_each():
    # B=2, H=3, T=5, d=64: each tensor 2 x 5 x 192 elements
    assert io_bytes(Shape(2, 3, 5), FLOAT32) == 4 * (2 * 5 * 192) * 4
    assert io_bytes(Shape(2, 3, 5), BFLOAT16) == 4 * (2 * 5 * 192) * 2
    assert io_bytes(Shape(2, 3, 5), precision.FLOAT16) == io_bytes(Shape(2, 3, 5), BFLOAT16)


def test_flops_count_every_causal_pair_in_both_products():
    # T=3: pairs (0,0) (1,0) (1,1) (2,0) (2,1) (2,2) = 6; each 2 d in S and 2 d in P V; one head
    assert causal_flops(Shape(1, 1, 3)) == 6 * 4 * 64
    assert causal_flops(Shape(2, 3, 3)) == 6 * causal_flops(Shape(1, 1, 3))
    assert causal_flops(Shape(1, 1, 1)) == 4 * 64  # T = 1: the one pair


def test_floors_are_in_microseconds():
    # 3,000 GB/s = 3e9 bytes per ms = 3e6 per µs: B=64 T=64 float32 moves 50,331,648 bytes
    assert memory_floor_us(Shape(64, 12, 64), FLOAT32, 3000.0) == pytest.approx(50331648 / 3e6)
    # 800 TFLOP/s = 8e8 FLOPs per µs
    shape = Shape(8, 12, 4096)
    assert compute_floor_us(shape, 800.0) == pytest.approx(causal_flops(shape) / 8e8)


def test_short_prompts_are_bound_by_memory_and_long_ones_by_the_tensor_cores():
    """At H100-like rates (3,000 GB/s, 800 TFLOP/s), bfloat16: T/4 FLOPs per byte against a
    ridge of about 267; T = 64 is memory's, T = 4096 the tensor cores'."""
    short, long = Shape(64, 12, 64), Shape(8, 12, 4096)
    assert floor_us(short, BFLOAT16, 3000.0, 800.0) == memory_floor_us(short, BFLOAT16, 3000.0)
    assert floor_us(long, BFLOAT16, 3000.0, 800.0) == compute_floor_us(long, 800.0)
    assert floor_us(long, FLOAT32, 3000.0, None) == memory_floor_us(long, FLOAT32, 3000.0)


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_a_rate_that_is_not_positive_is_refused(bad):
    with pytest.raises(ValueError, match="copy_gbps must be positive"):
        memory_floor_us(Shape(1, 12, 64), FLOAT32, bad)
    with pytest.raises(ValueError, match="peak_tflops must be positive"):
        compute_floor_us(Shape(1, 12, 64), bad)


def test_issue_43s_targets_come_from_the_right_reference():
    """float32: 0.35x sdpa-efficient, even where flex-attention is faster; 16 bits: the fastest
    SDPA backend, not flex-attention or naive."""
    tool = load_script("experiments/tools/grid_floor.py")
    assert tool.target_us({"sdpa-efficient": 10.0, "flex-attention": 5.0}, FLOAT32) == pytest.approx(3.5)
    assert tool.target_us({"flex-attention": 5.0}, FLOAT32) is None
    half = {"sdpa-cudnn": 9.0, "sdpa-flash": 8.0, "flex-attention": 4.0, "naive": 1.0}
    assert tool.target_us(half, BFLOAT16) == 8.0


def test_the_committed_grid_floor_tables_are_what_the_tool_prints(capsys):
    """results/<gpu>/experiments/*_grid_floor.md: regenerated from the committed rows, so that
    the notes that quote them cannot drift from the CSVs."""
    tool = load_script("experiments/tools/grid_floor.py")
    committed = sorted((ROOT / "results").glob("*/experiments/*_grid_floor.md"))
    assert committed, "no committed grid_floor tables"
    for path in committed:
        gpu = path.parent.parent.name
        commit = re.search(r"--commit (\w+)", path.read_text()).group(1)
        io = re.search(r"--io-floor (\S+?)`", path.read_text())
        assert tool.main(["--gpu", gpu, "--commit", commit, "--results-dir", str(ROOT / "results"),
                          *(["--io-floor", str(ROOT / io.group(1))] if io else [])]) == 0
        assert capsys.readouterr().out == path.read_text(), f"{path} differs from the tool's output"


IO_FIELDS = "gpu,driver,torch,commit,date,dtype,B,H,T,us_device_median,us_device_min,us_device_max,rounds"


def test_the_io_floor_sets_the_targets_against_one_kernels_traffic(tmp_path, capsys):
    """--io-floor (io_floor.py's rows): each row gets the elementwise kernel's time and the target
    over it, and the targets under it are named; rows of another GPU, a damaged row and a file
    that is not io_floor.py's are refused naming the file and line (main turns the error into
    one line and exit 2, as test_bad_input checks for a folder given as the file)."""
    tool = load_script("experiments/tools/grid_floor.py")
    gpu, commit = "NVIDIA H100 80GB HBM3", "efd86a241ce1"  # the committed H100 sweep's grid
    rows = [f"{gpu},-,-,-,-,bfloat16,64,12,256,{us},{us},{us},3" for us in (50.0,)]
    csv_path = tmp_path / "io.csv"
    csv_path.write_text(IO_FIELDS + "\n" + "\n".join(rows) + "\n")
    args = ["--gpu", "nvidia-h100-80gb-hbm3", "--commit", commit, "--results-dir", str(ROOT / "results"),
            "--dtypes", "bfloat16", "--io-floor", str(csv_path)]
    assert tool.main(args) == 0
    out = capsys.readouterr().out
    assert "| I/O floor µs | target / I/O floor |" in out
    row = next(line for line in out.splitlines() if line.startswith("| 64 | 12 | 256 |"))
    target = float(row.split("|")[11])  # sdpa-cudnn's time there, the 16-bit target
    assert row.endswith(f"| 50.0 | {target / 50.0:.2f} |"), row
    assert f"under the I/O floor: B=64 T=256 ({target / 50.0:.2f})" in out, out
    assert next(line for line in out.splitlines() if line.startswith("| 1 | 12 | 64 |")).endswith("| – | – |")
    for text, message in ((IO_FIELDS + "\nanother GPU,-,-,-,-,bfloat16,1,12,64,3.0,3.0,3.0,3\n", "not 'NVIDIA H100"),
                          (IO_FIELDS + f"\n{gpu},-,-,-,-,bfloat16,1,12,64,nan,3.0,3.0,3\n", "io.csv:2: a damaged row"),
                          (IO_FIELDS + f"\n{gpu},-,-,-,-,bfloat16,1,x,64,3.0,3.0,3.0,3\n", "io.csv:2: a damaged row"),
                          ("a,b\n1,2\n", "not io_floor.py's CSV")):
        csv_path.write_text(text)
        with pytest.raises(ValueError, match=re.escape(message)):
            tool.read_io_floor(csv_path, gpu)


@pytest.mark.parametrize("args,message", [
    (["--rounds", "0"], "--rounds must be at least 1"),
    (["--rounds", "21"], "--rounds must be at most 20"),
    (["--dtypes", "float33"], "unknown dtype 'float33'"),
    (["--out", ""], "an empty path"),
    (["--out", "README.md"], "exists (a new file"),
    (["--out", "no-such-folder/io.csv"], "its folder does not exist"),
])
def test_io_floor_refuses_bad_arguments_before_looking_for_a_gpu(args, message, capsys, monkeypatch, tmp_path):
    tool = load_script("experiments/tools/io_floor.py")
    monkeypatch.chdir(ROOT)
    out = ["--out", str(tmp_path / "io.csv")] if "--out" not in args else []
    with pytest.raises(SystemExit) as stop:
        tool.main([*out, *args])
    assert stop.value.code == 2 and message in capsys.readouterr().err
