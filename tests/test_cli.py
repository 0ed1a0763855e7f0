"""Bad input to the command-line tools: a clear one-line message, a non-zero exit, no traceback."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.registry import PROJECT_ROOT

ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # as on a machine without a GPU


def run(*args: str, cwd: Path = PROJECT_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)


def gpt2(*args: str) -> subprocess.CompletedProcess:
    return run(sys.executable, "-m", "gpt2", *args)


def assert_refused(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, f"{fragment!r} not in {proc.stderr!r}"


def test_unknown_backend_lists_valid_names():
    assert_refused(gpt2("--backend", "v99", "--device", "cpu"), "unknown backend 'v99'", "naive", "v11")


def test_cuda_only_backend_without_cuda():
    assert_refused(gpt2("--backend", "v05"), "v05 needs a CUDA device")
    assert_refused(gpt2("--backend", "sdpa-efficient", "--device", "cpu"), "needs a CUDA device")


def test_float32_unavailable_backend():
    assert_refused(gpt2("--backend", "sdpa-flash", "--device", "cpu"), "not available for float32")


@pytest.mark.parametrize("tokens", ["8", "3", "1025"])
def test_token_count_out_of_range(tokens):
    assert_refused(gpt2("--tokens", tokens, "--device", "cpu", "--weights", "random"),
                   "--tokens must be larger than the prompt (8 tokens)", "context (1024)")


def test_missing_model_dir(tmp_path):
    assert_refused(gpt2("--model-dir", str(tmp_path / "absent"), "--device", "cpu"), "does not exist")


def test_model_dir_without_weights(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"n_layer": 2, "n_head": 2, "n_embd": 128}))
    assert_refused(gpt2("--model-dir", str(tmp_path), "--device", "cpu"), "has no model.safetensors")


def test_malformed_config(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 16)
    assert_refused(gpt2("--model-dir", str(tmp_path), "--device", "cpu"), "not valid JSON")


def test_malformed_weights(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"n_layer": 2, "n_head": 2, "n_embd": 128}))
    (tmp_path / "model.safetensors").write_bytes(b"garbage, not safetensors")
    assert_refused(gpt2("--model-dir", str(tmp_path), "--device", "cpu", "--tokens", "10"),
                   "not a readable safetensors file")


def test_json_output_on_cpu(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=128, n_positions=64)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    proc = gpt2("--model-dir", str(tmp_path), "--device", "cpu", "--tokens", "12", "--repeats", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    for key in ("backend", "weights", "device", "tokens", "token_ids", "seconds_median", "seconds_min",
                "seconds_max", "peak_memory_bytes", "text"):
        assert key in result
    assert len(result["token_ids"]) == 12 and result["token_ids"][:8] == [15496, 11, 314, 1101, 257, 3303, 2746, 11]
    assert result["text"].startswith("Hello, I'm a language model,")
    assert result["seconds_min"] <= result["seconds_median"] <= result["seconds_max"]


def test_harness_unknown_backend():
    proc = run(sys.executable, "-m", "harness", "build", "--backends", "v01,nope")
    assert_refused(proc, "unknown backend 'nope'")


@pytest.mark.parametrize("command", ["check", "bench-kernels", "bench-e2e"])
def test_harness_gpu_steps_without_gpu(command):
    assert_refused(run(sys.executable, "-m", "harness", command), "no CUDA device is available")


def test_run_all_without_gpu_says_so():
    proc = run("bash", "run_all.sh")
    assert proc.returncode == 2
    assert "no CUDA device is available" in proc.stderr and "--plots-only" in proc.stderr


def test_run_all_rejects_unknown_option():
    proc = run("bash", "run_all.sh", "--bogus")
    assert proc.returncode == 2 and "unknown option: --bogus" in proc.stderr
