"""The command-line tools on a machine without a GPU: a clear one-line message and a
non-zero exit instead of a traceback. Refusals run in-process (fast); each entry point
(python -m gpt2, python -m harness, run_all.sh) has one subprocess smoke test, its command
started ahead (tests/ahead.py)."""
from __future__ import annotations

import csv
import errno
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from backends.registry import PROJECT_ROOT
from gpt2 import cli as gpt2_cli
from harness import cli as harness_cli
from harness.results import KERNELS
from tests.ahead import Ahead, takes

PROMPT_IDS = [15496, 11, 314, 1101, 257, 3303, 2746, 11]


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    """As on a machine without a GPU, whatever this one has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def refused(main, argv: list[str], capsys, *fragments: str, status: int = 2) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == status, err
    assert "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def gpt2(argv: list[str], capsys, *fragments: str) -> str:
    return refused(gpt2_cli.main, argv, capsys, *fragments)


def harness(argv: list[str], capsys, *fragments: str) -> str:
    return refused(harness_cli.main, argv, capsys, *fragments)


def test_unknown_backend_lists_valid_names(capsys):
    gpt2(["--backend", "v99", "--device", "cpu"], capsys, "unknown backend 'v99'", "naive", "v11")


def test_cuda_only_backend_without_cuda(capsys):
    """Without --device the device is chosen for the user: say there is no GPU (it said 'v05: v05
    needs a CUDA device (asked to run on cpu)', the name twice, of a device nobody asked for)."""
    err = gpt2(["--backend", "v05"], capsys, "v05 needs a CUDA device and none is available (backends that run on "
                                             "a CPU: naive, sdpa-math)")
    assert err.count("v05") == 1 and "asked" not in err
    err = gpt2(["--backend", "sdpa-efficient", "--device", "cpu"], capsys,
               "sdpa-efficient: needs a CUDA device (asked to run on cpu)")
    assert err.count("sdpa-efficient") == 1


def test_float32_unavailable_backend(capsys):
    gpt2(["--backend", "sdpa-flash", "--device", "cpu"], capsys, "not available for float32")


@pytest.mark.parametrize("tokens", ["8", "3", "1025"])
def test_token_count_out_of_range(capsys, tokens):
    gpt2(["--tokens", tokens, "--device", "cpu", "--weights", "random"], capsys,
         "--tokens must be larger than the prompt (8 tokens)", "context (1024)")


@pytest.mark.parametrize("argv,message", [
    (["--batch", "0"], "--batch must be at least 1, got 0"),
    (["--prompt-tokens", "0"], "--prompt-tokens must be at least 1, got 0"),
    (["--prompt-tokens", "64", "--tokens", "64"], "--tokens must be larger than the prompt (64 tokens)"),
    (["--prompt-tokens", "1000", "--tokens", "1025"], "at most the model's context (1024), got 1025"),
    (["--mode", "kv-cache", "--backend", "v05"], "v05: provides no decode op (it provides prefill); --mode kv-cache "
                                                 "needs one"),
], ids=["batch", "prompt", "prompt-longer-than-tokens", "context", "no-decode-op"])
def test_generation_shape_and_mode_refusals(capsys, argv, message):
    err = gpt2([*argv, "--device", "cpu", "--weights", "random"], capsys, message)
    assert err.count("\n") == 1 and err.startswith("python -m gpt2: error: "), err


def test_repeats_must_be_positive(capsys):
    gpt2(["--repeats", "0", "--device", "cpu", "--weights", "random"], capsys, "--repeats must be at least 1")


def test_missing_model_dir(tmp_path, capsys):
    gpt2(["--model-dir", str(tmp_path / "absent"), "--device", "cpu"], capsys, "does not exist")


def test_model_dir_without_weights(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"n_layer": 2, "n_head": 2, "n_embd": 128}))
    gpt2(["--model-dir", str(tmp_path), "--device", "cpu"], capsys, "has no model.safetensors")


@pytest.mark.parametrize("config,message", [
    ("{not json", "not valid JSON"),
    (json.dumps({"n_layer": "two", "n_head": 2, "n_embd": 128}), "n_layer must be a positive integer, got 'two'"),
    (json.dumps({"n_layer": 2, "n_head": 3, "n_embd": 128}), "not divisible by n_head=3"),
    (json.dumps({"n_layer": 2, "n_head": 2, "n_embd": 128, "n_positions": 0}), "n_positions must be a positive"),
    (json.dumps([1, 2]), "must hold a JSON object"),
], ids=["not-json", "n_layer-two", "heads", "positions", "list"])
def test_malformed_config(tmp_path, capsys, config, message):
    (tmp_path / "config.json").write_text(config)
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 16)
    gpt2(["--model-dir", str(tmp_path), "--device", "cpu"], capsys, message, str(tmp_path / "config.json"))


def test_malformed_weights(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"n_layer": 2, "n_head": 2, "n_embd": 128}))
    (tmp_path / "model.safetensors").write_bytes(b"garbage, not safetensors")
    gpt2(["--model-dir", str(tmp_path), "--device", "cpu", "--tokens", "10"], capsys,
         "not a readable safetensors file")


def test_model_dir_with_a_wrongly_shaped_tensor(tmp_path, capsys, monkeypatch):
    """Named with its shape and the shape config.json gives it, by python -m gpt2 and by the
    end-to-end benchmark before its correctness gate (here on the CPU)."""
    from safetensors.torch import save_file

    (tmp_path / "config.json").write_text(json.dumps({"n_layer": 2, "n_head": 2, "n_embd": 128}))
    save_file({"transformer.h.1.attn.c_attn.weight": torch.zeros(128, 100)}, str(tmp_path / "model.safetensors"))
    message = ("model.safetensors: tensor h.1.attn.c_attn.weight has shape [128, 100], but config.json's model "
               "(2 layers, 2 heads, width 128) needs [128, 384]")
    gpt2(["--model-dir", str(tmp_path), "--device", "cpu", "--tokens", "10"], capsys, message)
    monkeypatch.setattr(harness_cli, "_cuda", lambda *args: torch.device("cpu"))
    harness(["bench-e2e", "--model-dir", str(tmp_path)], capsys, message)


def test_vocabulary_smaller_than_the_tokenizer(tmp_path, capsys):
    from gpt2.config import TOKENIZER_VOCAB_SIZE
    from gpt2.tokenizer import load_tokenizer

    assert load_tokenizer().n_vocab == TOKENIZER_VOCAB_SIZE
    (tmp_path / "config.json").write_text(json.dumps({"n_layer": 2, "n_head": 2, "n_embd": 128, "vocab_size": 100}))
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 16)
    gpt2(["--model-dir", str(tmp_path), "--device", "cpu", "--tokens", "10"], capsys,
         "config.json: vocab_size=100 is smaller than GPT-2's tokenizer", "at least 50257")


def test_ctrl_c_says_interrupted(monkeypatch, capsys):
    def interrupted(request):
        raise KeyboardInterrupt

    monkeypatch.setattr(gpt2_cli, "run", interrupted)
    err = refused(gpt2_cli.main, ["--device", "cpu", "--weights", "random"], capsys, "interrupted", status=130)
    assert err.strip() == "python -m gpt2: interrupted"


TINY_MODEL = """
import sys, transformers
transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_head=2, n_embd=128, n_positions=64)) \\
    .save_pretrained(sys.argv[1])
"""


def tiny_model(ahead: Ahead) -> str:
    """A GPT-2 of 2 layers and width 128 saved as Hugging Face does; made once (a job: the
    smoke test of `python -m gpt2` below takes it ahead), in a child process: importing
    transformers' GPT-2 is seconds of Python, which in the lane's thread held the interpreter's
    lock against the tests running beside it."""
    pytest.importorskip("transformers")
    directory = ahead.tmp("tiny-gpt2")
    made = subprocess.run([sys.executable, "-c", TINY_MODEL, str(directory)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    return str(directory)


@pytest.fixture
def tiny_model_dir(ahead) -> str:
    return ahead(tiny_model)


def test_progress_bar_on_a_terminal_only(tiny_model_dir, monkeypatch, capsys):
    argv = ["--model-dir", tiny_model_dir, "--device", "cpu", "--tokens", "12", "--repeats", "1"]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert gpt2_cli.main(argv) == 0
    captured = capsys.readouterr()
    assert "naive, eager" in captured.err and "/8 " in captured.err, captured.err  # (1 warm-up + 1 run) x 4 tokens
    assert "4 generated" in captured.out
    assert gpt2_cli.main([*argv, "--json"]) == 0
    assert capsys.readouterr().err == ""


def test_kv_cache_batch_json_counts_every_sequence(tiny_model_dir, capsys):
    """--mode kv-cache --batch 2: one row of tokens per sequence, the first the study's prompt,
    tokens/s counting the generated tokens of both, the cache's bytes reported."""
    argv = ["--model-dir", tiny_model_dir, "--device", "cpu", "--tokens", "12", "--repeats", "1",
            "--mode", "kv-cache", "--batch", "2", "--prompt-tokens", "9", "--json"]
    assert gpt2_cli.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["mode"], result["batch"], result["prompt_tokens"]) == ("kv-cache", 2, 9)
    rows = result["token_ids_by_sequence"]
    assert len(rows) == 2 and all(len(r) == 12 for r in rows) and rows[0][:8] == PROMPT_IDS and rows[0] != rows[1]
    assert result["token_ids"] == rows[0] and result["generated_tokens_in_batch"] == 6
    assert result["tokens_per_second_eager"] == pytest.approx(6 / result["seconds_eager"]["median"])
    assert result["cache_bytes"] == 2 * 2 * 2 * 12 * 128 * 4 + 2 * 4  # K and V, 2 layers, B=2, 12 rows, width 128
    assert gpt2_cli.main(argv[:-1]) == 0
    out = capsys.readouterr().out
    assert "2 sequences x 12 (9 prompt + 3 generated)" in out and "the KV cache takes 48.0 KiB" in out, out


def test_harness_unknown_backend(capsys):
    harness(["build", "--backends", "v01,nope"], capsys, "unknown backend 'nope'")


@pytest.mark.parametrize("command", ["check", "bench-kernels", "bench-e2e", "sanitize-workload"])
def test_harness_gpu_steps_without_gpu(capsys, command):
    harness([command], capsys, "no CUDA device is available", "--plots-only")


def test_sanitize_workload_refuses_an_unknown_dtype_before_any_gpu_work(capsys):
    """A misspelt --dtypes would otherwise run nothing under the sanitizer and pass."""
    harness(["sanitize-workload", "--backends", "h23", "--dtypes", "bf16"], capsys, "--dtypes: unknown dtype 'bf16'")


def test_sanitize_workload_refuses_a_batch_it_has_no_shape_of_before_any_gpu_work(capsys):
    """A --batch matching no shape would otherwise run nothing under the sanitizer and pass."""
    harness(["sanitize-workload", "--backends", "v29", "--batch", "3"], capsys,
            "--batch: the workload has no shape of batch size 3 (it has 1, 2, 4)")


def test_harness_ctrl_c_says_what_is_kept_and_how_to_resume(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    for name in ("cmd_bench_kernels", "cmd_build", "cmd_plot", "cmd_list"):
        monkeypatch.setattr(harness_cli, name, interrupted)
    refused(harness_cli.main, ["bench-kernels", "--backends", "naive,v01"], capsys, "interrupted; every finished row "
            "is kept; to resume where this one stopped, run the same command again: python -m harness bench-kernels "
            "--backends naive,v01", status=130)
    refused(harness_cli.main, ["build"], capsys, "every finished build is kept", "python -m harness build",
            status=130)
    err = refused(harness_cli.main, ["plot"], capsys, "it measures nothing", "run the same command again", status=130)
    assert "row" not in err and "resume" not in err, "a plot keeps no rows and resumes nothing"
    assert refused(harness_cli.main, ["list"], capsys, status=130).strip() == "python -m harness: interrupted"


def test_build_without_a_gpu_says_what_to_set(monkeypatch, capsys):
    """With a CPU build of torch: say so. With a CUDA build and no GPU: name TORCH_CUDA_ARCH_LIST."""
    from harness import build

    if torch.version.cuda is None:
        harness(["build"], capsys, "is a CPU build", "CUDA build of torch")
        monkeypatch.setattr(build, "check_build_setup", lambda: None)  # as with a CUDA build of torch
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    harness(["build"], capsys, "no CUDA device to build for", "TORCH_CUDA_ARCH_LIST=9.0")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "nine")
    harness(["build"], capsys, "TORCH_CUDA_ARCH_LIST: cannot read 'nine'")


def test_compile_check_refuses_a_malformed_arch(capsys):
    harness(["compile-check", "--arch", "hopper"], capsys, "cannot read the architecture 'hopper'")


@pytest.mark.parametrize("argv,arch,capability", [
    (["compile-check", "--arch", "sm_13"], "sm_13", "1.3"),
    (["compile-check", "--arch", "sm_75", "--arch", "sm_50"], "sm_50", "5.0"),
    (["try", "--compile-only", "--arch", "sm_61", "a=v16+experiments/v16/v16_1_k_float2.patch"], "sm_61", "6.1"),
], ids=["sm_13", "sm_50", "try"])
def test_an_architecture_older_than_every_version_is_refused(capsys, monkeypatch, argv, arch, capability):
    """sm_13 exited 0 with every version skipped; the oldest the study builds for is 7.5."""
    monkeypatch.chdir(PROJECT_ROOT)
    harness(argv, capsys, f"--arch: {arch} is compute capability {capability}, older than any the study builds for: "
                          "use sm_75 (compute capability 7.5) or newer")


@pytest.mark.parametrize("command", ["build", "compile-check"])
@pytest.mark.parametrize("jobs", ["0", "-3"])
def test_jobs_must_be_positive(capsys, command, jobs):
    harness([command, "--jobs", jobs], capsys, f"--jobs must be at least 1 (got {jobs})")


def test_plot_and_report_without_results(tmp_path, capsys):
    results, plots = tmp_path / "results", tmp_path / "plots"
    (results / "some-gpu").mkdir(parents=True)  # an empty GPU folder
    for command in ("plot", "report"):
        assert harness_cli.main([command, "--results-dir", str(results), "--plots-dir", str(plots)]) == 0
        out = capsys.readouterr().out
        assert "no results under" in out, out
    assert "No results yet" in (results / "report.md").read_text()


FIXTURE_KERNELS = PROJECT_ROOT / "tests" / "fixtures" / "results" / "fixture-gpu-a-synthetic-numbers" / "kernels.csv"


def results_with_kernel_rows(results: Path, rows: int = 4) -> Path:
    """A results folder of one GPU with the first `rows` rows of the fixtures' kernels.csv."""
    path = results / "some-gpu" / "kernels.csv"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\n".join(FIXTURE_KERNELS.read_bytes().split(b"\n")[:rows + 1]) + b"\n")
    return path


def test_a_byte_that_is_not_utf8_in_a_results_file(tmp_path, capsys):
    """Issue 20 items 3-4: in a row, the row is skipped with its file and line; in the header,
    the file is refused. Never a UnicodeDecodeError."""
    results, plots = tmp_path / "results", tmp_path / "plots"
    path = results_with_kernel_rows(results)
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"ok", b"o\xffk", 1)
    path.write_bytes(b"\n".join(lines))
    for command in (["report"], ["plot", "--plots-dir", str(plots)]):
        assert harness_cli.main([*command, "--results-dir", str(results)]) == 0
        err = capsys.readouterr().err
        assert f"warning: {path}:3: skipped a damaged row (not UTF-8 text: byte 0xff)" in err, err
        assert "Traceback" not in err
    path.write_bytes(path.read_bytes().replace(b"backend", b"back\xe9nd", 1))
    for command in (["report"], ["plot", "--plots-dir", str(plots)]):
        harness([*command, "--results-dir", str(results)], capsys,
                f"{path}:1: the header is damaged (not UTF-8 text: byte 0xe9)")


def test_a_row_the_csv_module_rejects_in_a_results_file(tmp_path, capsys):
    """A NUL byte (which csv reads as text from Python 3.11 on, and rejected before) or a field
    longer than csv.field_size_limit() (csv.Error): in a row, the row is skipped with its file
    and line and the rows after it are read; in the header, the file is refused. Never a
    csv.Error traceback."""
    results, plots = tmp_path / "results", tmp_path / "plots"
    path = results_with_kernel_rows(results)
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"ok", b"o\x00k", 1)
    lines[3] = lines[3].replace(b"ok", b"ok" + b"x" * csv.field_size_limit(), 1)
    path.write_bytes(b"\n".join(lines))
    for command in (["report"], ["plot", "--plots-dir", str(plots)]):
        assert harness_cli.main([*command, "--results-dir", str(results)]) == 0
        err = capsys.readouterr().err
        assert f"warning: {path}:3: skipped a damaged row (a NUL byte)" in err, err
        assert f"warning: {path}:4: skipped a damaged row (field larger than field limit" in err, err
        assert "Traceback" not in err
    assert len(KERNELS.read(path).rows) == 2, "the rows before and after them"
    header, rest = path.read_bytes().split(b"\r\n", 1)  # csv ends its lines with CR LF
    for damaged, why in ((header.replace(b"backend", b"back\x00end"), "a NUL byte"),
                         (header + b"x" * csv.field_size_limit(), "field larger than field limit")):
        path.write_bytes(damaged + b"\r\n" + rest)
        for command in (["report"], ["plot", "--plots-dir", str(plots)]):
            harness([*command, "--results-dir", str(results)], capsys, f"{path}:1: the header is damaged ({why}")


def test_plot_leaves_a_closed_stdout_to_the_entry_point(tmp_path, monkeypatch):
    """'wrote FILE' into a pipe the reader closed is not a figure that cannot be written (it
    said 'error: cannot write a file: Broken pipe'): the BrokenPipeError reaches __main__.py,
    which ends quietly (tests/test_interrupts.py)."""
    results = tmp_path / "results"
    results_with_kernel_rows(results)
    monkeypatch.setattr("harness.plots.plot_all", lambda gpus, plots_dir: [plots_dir / "a.png"])
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    with pytest.raises(BrokenPipeError):
        harness_cli.main(["plot", "--results-dir", str(results), "--plots-dir", str(tmp_path / "plots")])


class ClosedPipe(io.StringIO):
    """stdout after the reader has gone."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def test_plot_and_report_read_results_from_an_existing_folder(tmp_path, capsys):
    """Not a traceback (a file), not an empty success that creates the folder (missing)."""
    missing, a_file = tmp_path / "missing", tmp_path / "a-file"
    a_file.write_text("")
    for command in (["report"], ["plot", "--plots-dir", str(tmp_path / "plots")]):
        harness([*command, "--results-dir", str(missing)], capsys, f"--results-dir {missing} does not exist")
        harness([*command, "--results-dir", str(a_file)], capsys, f"--results-dir {a_file} is a file")
    assert not missing.exists()


def test_plot_and_report_write_where_a_folder_can_be(tmp_path, capsys):
    results = tmp_path / "results"
    results_with_kernel_rows(results)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    harness(["plot", "--results-dir", str(results), "--plots-dir", str(a_file / "plots")], capsys,
            f"--plots-dir {a_file / 'plots'}: {a_file} is a file, not a folder")
    harness(["report", "--results-dir", str(results), "--output", str(a_file / "report.md")], capsys,
            f"--output {a_file / 'report.md'}: {a_file} is a file, not a folder")
    harness(["report", "--results-dir", str(results), "--output", str(tmp_path)], capsys,
            f"--output {tmp_path} is a folder")


def test_plot_and_report_refuse_a_folder_they_cannot_write_in(tmp_path, capsys, monkeypatch):
    """A read-only folder, as the operating system reports it (here simulated: root writes
    anywhere; the run_all.sh test below uses a real one)."""
    results, plots = tmp_path / "results", tmp_path / "plots"
    results_with_kernel_rows(results)
    plots.mkdir()
    read_only = {results, plots}
    real = tempfile.TemporaryFile

    def temporary_file(*, dir: Path):
        if Path(dir) in read_only:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dir))
        return real(dir=dir)

    monkeypatch.setattr(harness_cli.tempfile, "TemporaryFile", temporary_file)
    harness(["report", "--results-dir", str(results)], capsys,
            f"--results-dir {results}: cannot write in {results} (Read-only file system); write the report "
            "elsewhere with --output FILE")
    harness(["plot", "--results-dir", str(results), "--plots-dir", str(plots)], capsys,
            f"--plots-dir {plots}: cannot write in {plots} (Read-only file system)")
    assert harness_cli.main(["report", "--results-dir", str(results), "--output", str(tmp_path / "r.md")]) == 0

    def plot_all(gpus, plots_dir: Path):  # a GPU's subfolder is read-only
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(plots_dir / "some-gpu" / "a.png"))

    monkeypatch.setattr("harness.plots.plot_all", plot_all)
    harness(["plot", "--results-dir", str(results), "--plots-dir", str(tmp_path / "elsewhere")], capsys,
            f"cannot write {tmp_path / 'elsewhere' / 'some-gpu' / 'a.png'}: Permission denied")


def test_report_says_when_the_readmes_are_unchanged(tmp_path, monkeypatch, capsys, committed_results_read_once):
    """It said 'updated README.md' also when nothing changed; an unchanged file is not rewritten."""
    import dataclasses

    from backends import registry
    from harness import report

    readme, index = tmp_path / "README.md", tmp_path / "results" / "README.md"
    notes, decode_notes = tmp_path / "v01" / "README.md", tmp_path / "d01" / "README.md"
    for path in (notes, decode_notes, index):
        path.parent.mkdir()
    readme.write_text("# study\n")
    notes.write_text("# v01\n")
    decode_notes.write_text("# d01\n")
    index.write_text("# results\n")
    monkeypatch.setattr(report, "README", readme)
    monkeypatch.setattr(report, "RESULTS_README", index)
    v01 = dataclasses.replace(registry.get("v01"), folder=str(notes.parent))
    d01 = dataclasses.replace(registry.decode_versions()[0], folder=str(decode_notes.parent))
    monkeypatch.setattr(registry, "versions", lambda: [v01])  # nothing of the project's versions/ is written
    monkeypatch.setattr(registry, "decode_versions", lambda: [d01])
    assert harness_cli.main(["report"]) == 0  # the committed results
    pages = sorted(index.parent.glob("*/README.md"))
    assert len(pages) == len(list((PROJECT_ROOT / "results").glob("*/kernels.csv"))), "a page per GPU"
    files = (readme, index, *pages, notes, decode_notes)
    assert capsys.readouterr().out.splitlines() == [f"updated {path}" for path in files]
    assert decode_notes.read_text().startswith("# d01\n\n<!-- BEGIN GENERATED: measured -->\n## Measured")
    written = [path.stat().st_mtime_ns for path in files]
    assert harness_cli.main(["report"]) == 0
    assert capsys.readouterr().out == ("README.md, results/ and versions/*/README.md unchanged: their tables already "
                                       "match the results\n")
    assert [path.stat().st_mtime_ns for path in files] == written


def test_bench_e2e_refuses_an_unknown_mode(capsys):
    harness(["bench-e2e", "--modes", "recompute,nope"], capsys, "--modes: unknown generation mode 'nope'",
            "modes: recompute, kv-cache")


def test_bench_e2e_takes_transformers_generate_beside_the_registry_rows(capsys):
    """Not a registry row: measured with 'all' and 'quick' or where --backends names it."""
    from backends import registry
    from harness.hf_generate import NAME

    assert harness_cli._e2e_selection("all") == (list(registry.BACKENDS), True)
    assert harness_cli._e2e_selection("quick") == (registry.select("quick"), True)
    assert harness_cli._e2e_selection("naive,v05") == ([registry.get("naive"), registry.get("v05")], False)
    assert harness_cli._e2e_selection(f"naive,{NAME}") == ([registry.get("naive")], True)
    assert harness_cli._e2e_selection(NAME) == ([], True)
    harness(["bench-e2e", "--backends", f"{NAME},nope"], capsys, "unknown backend 'nope'")


def test_list_shows_where_each_backend_runs(capsys):
    assert harness_cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "CPU or GPU" in out and "GPU cc >= 7.5" in out and "cc: a GPU's compute capability" in out \
        and "dtypes: bfloat16, float16 (PyTorch's kernel accepts float16/bfloat16 only)" in out


# -- one subprocess smoke test per entry point ---------------------------------------------
ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=PROJECT_ROOT, env=env or ENV, capture_output=True, text=True, timeout=300)


RUN_ALL_ENV = {**ENV, "PYTHON": sys.executable}


# Each smoke test's command runs to completion on its own: a job started ahead (tests/ahead.py),
# its seconds (importing torch) spent in the background while the other tests run.
def gpt2_json(ahead: Ahead) -> subprocess.CompletedProcess:
    return run(sys.executable, "-m", "gpt2", "--model-dir", ahead(tiny_model), "--device", "cpu", "--tokens", "12",
               "--repeats", "2", "--json")


@takes(gpt2_json)
def test_gpt2_entry_point_json_on_cpu(ahead):
    proc = ahead(gpt2_json)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", "no progress bar with --json"
    result = json.loads(proc.stdout)
    assert result["token_ids"][:8] == PROMPT_IDS and len(result["token_ids"]) == 12
    assert result["text"].startswith("Hello, I'm a language model,")
    assert result["generated_tokens"] == 4
    eager = result["seconds_eager"]
    assert eager["min"] <= eager["median"] <= eager["max"] and len(eager["all"]) == 2
    assert result["tokens_per_second_eager"] == pytest.approx(4 / eager["median"])
    assert result["seconds_gpu"] is None
    assert {"gpu", "driver", "cuda", "torch", "commit", "date"} <= set(result["provenance"])
    assert result["provenance"]["torch"] == torch.__version__


def harness_without_a_gpu(ahead: Ahead) -> subprocess.CompletedProcess:
    return run(sys.executable, "-m", "harness", "bench-kernels")


@takes(harness_without_a_gpu)
def test_harness_entry_point(ahead):
    proc = ahead(harness_without_a_gpu)
    assert proc.returncode == 2 and "no CUDA device is available" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def run_all_naming(commit: str):
    """The job of `run_all.sh` (no options) with STUDY_COMMIT=commit."""
    def job(ahead: Ahead) -> subprocess.CompletedProcess:
        return run("bash", "run_all.sh", env={**RUN_ALL_ENV, "STUDY_COMMIT": commit})

    job.__name__ = f"run_all_naming_{commit.replace('-', '_')}"
    return job


RUN_ALL_NAMING = {commit: run_all_naming(commit) for commit in ("0123456789ab-dirty", "0123456789ab")}


@takes(RUN_ALL_NAMING["0123456789ab"])
def test_run_all_checks_for_a_gpu_before_anything_else(ahead):
    proc = ahead(RUN_ALL_NAMING["0123456789ab"])  # the commit named: no warning on a tree that differs from HEAD
    assert proc.returncode == 2, proc.stderr
    assert "no CUDA device is available" in proc.stderr and "--plots-only" in proc.stderr
    assert "installing" not in proc.stdout


def test_run_all_installs_nothing_outside_a_virtual_environment(tmp_path):
    """An interpreter without the dependencies and outside any venv: run_all.sh says what
    to run and exits; it never calls pip (the shim would log it)."""
    log = tmp_path / "calls.log"
    shim = tmp_path / "python"
    # -S: no site-packages (so nothing imports) and sys.prefix == sys.base_prefix (no venv).
    shim.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {sys.executable} -S "$@"\n')
    shim.chmod(0o755)
    proc = run("bash", "run_all.sh", "--plots-only", env={**ENV, "PYTHON": str(shim)})
    assert proc.returncode == 2, proc.stderr
    assert "not a virtual environment" in proc.stderr and "python3 -m venv" in proc.stderr, proc.stderr
    assert "pip" not in log.read_text()


def test_run_all_rejects_unknown_option():
    proc = run("bash", "run_all.sh", "--bogus")
    assert proc.returncode == 2 and "unknown option: --bogus" in proc.stderr


def run_all_unknown_backend(ahead: Ahead) -> subprocess.CompletedProcess:
    empty = ahead.tmp("run-all")
    return run("bash", "run_all.sh", "--plots-only", "--backends", "naive,v99", "--results-dir", str(empty),
               "--plots-dir", str(empty), env=RUN_ALL_ENV)


@takes(run_all_unknown_backend)
def test_run_all_refuses_an_unknown_backend_before_anything_runs(ahead):
    """--plots-only used to ignore --backends v99 and draw."""
    proc = ahead(run_all_unknown_backend)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("run_all.sh: --backends: unknown backend 'v99'; valid backends: naive,"), proc.stderr
    assert "==" not in proc.stdout, "no stage may run"


def read_only_run(folder: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    """`args` run with `folder` read-only: by chmod, or for root (who writes through any
    permission bits) on a read-only bind mount of its own; skips where neither can be had."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            return run(*args, env=env)
        finally:
            folder.chmod(0o755)
    mount = 'mount --bind -o ro "$0" "$0"'
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "sh", "-c", mount, str(folder)],
                                                         capture_output=True).returncode != 0:
        pytest.skip("root cannot make a read-only folder here (no unshare -m / mount --bind)")
    return run("unshare", "-m", "sh", "-c", f'{mount} && exec "$@"', str(folder), *args, env=env)


def run_all_into_a_read_only_plots_dir(ahead: Ahead) -> tuple[Path, subprocess.CompletedProcess]:
    results, plots = ahead.tmp("results"), ahead.tmp("plots")
    results_with_kernel_rows(results)
    return plots, read_only_run(plots, "bash", "run_all.sh", "--plots-only", "--results-dir", str(results),
                                "--plots-dir", str(plots), env=RUN_ALL_ENV)


@takes(run_all_into_a_read_only_plots_dir)
def test_run_all_plots_only_with_a_read_only_plots_dir(ahead):
    """Issue 20 item 10: the plots stage says so in one line, and the sweep stops there."""
    plots, proc = ahead(run_all_into_a_read_only_plots_dir)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert f"python -m harness: error: --plots-dir {plots}: cannot write in {plots} (" in proc.stderr
    assert "== report" not in proc.stdout


def test_record_stages_refuses_a_malformed_stage_and_needs_a_gpu(capsys):
    common = ["record-stages", "--run", "2026-01-01T00:00:00Z", "--mode", "full", "--backends", "all"]
    harness([*common, "build:41"], capsys, "cannot read the stage 'build:41'", "NAME:SECONDS:EXIT_STATUS")
    harness([*common, "kernel benchmark:sixty:0"], capsys, "cannot read the stage 'kernel benchmark:sixty:0'")
    harness([*common, "kernel benchmark:62:0"], capsys, "needs a GPU", "stored with the GPU's provenance")


def test_try_and_call_refuse_without_a_gpu_saying_what_works(capsys, monkeypatch):
    monkeypatch.chdir(PROJECT_ROOT)
    variant = "a=v16+experiments/v16/v16_1_k_float2.patch"
    harness(["try", variant], capsys, "needs a GPU", "--compile-only works without one")
    harness(["try", variant, variant], capsys, "repeated: a")
    harness(["try", "--rounds", "0", variant], capsys, "--rounds must be at least 1")
    harness(["try", "--compile-only", "--arch", "sm9", variant], capsys, "cannot read the architecture")
    harness(["call", "v16"], capsys, "needs a GPU")
    harness(["call", "v16", "--T", "0"], capsys, "must be at least 1")


def test_bench_kernels_refuses_fewer_than_one_round_before_looking_for_a_gpu(capsys):
    harness(["bench-kernels", "--rounds", "0"], capsys, "--rounds must be at least 1 (got 0)")
    harness(["bench-kernels", "--rounds", "2"], capsys, "needs a GPU")


@pytest.mark.parametrize("commit, warned", [pytest.param(commit, warned, marks=takes(RUN_ALL_NAMING[commit]))
                                            for commit, warned in (("0123456789ab-dirty", True),
                                                                   ("0123456789ab", False))])
def test_run_all_warns_before_measuring_rows_that_would_name_a_dirty_commit(commit, warned, ahead):
    """A GPU machine sent the files but an old .git names the wrong commit with '-dirty';
    run_all.sh says so (and how to name the right one) before its GPU check, as `try` does
    in its log (backends.environment.stale_commit_warning)."""
    proc = ahead(RUN_ALL_NAMING[commit])
    said = f"run_all.sh: the tree differs from commit 0123456789ab, so what is measured will name {commit}"
    assert (said in proc.stderr) == warned, proc.stderr
    assert ("STUDY_COMMIT=<the commit this tree is>" in proc.stderr) == warned, proc.stderr
