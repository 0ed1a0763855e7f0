"""Kernel variants (harness/variants.py) and `python -m harness try` without a GPU: specs
refused with the rule, patches applied in order, every chain in experiments/ still applying
to its version, a variant's compile report from nvcc alone, the check and the timing table
on stand-ins. (The CLI's refusals without a GPU are in test_cli.py.)"""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from backends import precision, registry
from backends.extension import find_nvcc
from backends.registry import PROJECT_ROOT
from harness import cli as harness_cli
from harness.compile_check import compiled_arch
from harness.reference import bounds_for, compare, random_qkv, reference_attention
from harness.study import Shape
from backends.environment import Provenance
from harness.try_variants import Case, Log, built_arch, check, header, time_table
from harness.variants import VariantError, VariantSpec, materialize, parse_spec, patched_source
from tests.ahead import Ahead, takes

EXPERIMENTS = PROJECT_ROOT / "experiments"
K_FLOAT2 = "experiments/v16/v16_1_k_float2.patch"
PIPELINE = "experiments/v16/v16_2_pipeline.patch"
V17_PIPELINE = "experiments/v17/v17_1_pipeline.patch"
WGMMA = "experiments/v16/v16w_1_wgmma.patch"
WGMMA_SPLIT = "experiments/v16/v16w_2_split_pass.patch"
WGMMA_PROBE = EXPERIMENTS / "tools" / "wgmma_tf32_probe.cu"


def chains() -> dict[str, list[Path]]:
    """experiments/vNN/vNN[tag]_<k>_<what>.patch grouped by chain (vNN and its tag: v16_1, v16_2
    are one chain, v16w_1 another on the same version), in file-name order; every patch lies in
    its version's folder."""
    grouped: dict[str, list[Path]] = {}
    assert not list(EXPERIMENTS.glob("*.patch")), "a patch lies in its version's folder, experiments/vNN/"
    for patch in sorted(EXPERIMENTS.glob("*/*.patch"), key=lambda p: p.name):
        match = re.match(r"^([vhd]\d\d)[a-z]*_\d+_", patch.name)
        assert match, f"{patch.name}: experiments/ names patches vNN[tag]_<position>_<what>.patch (or hNN, dNN...)"
        assert patch.parent.name == match[1], f"{patch}: a patch of {match[1]} belongs in experiments/{match[1]}/"
        grouped.setdefault(patch.name.split("_")[0], []).append(patch)
    return grouped


@pytest.mark.parametrize("chain", sorted(chains()))
def test_every_chain_of_patches_applies_to_its_version(chain):
    patches = chains()[chain]
    version = chain[:3]  # vNN
    spec = parse_spec(f"x={version}+" + "+".join(str(p) for p in patches))
    source = patched_source(spec)
    assert source != (spec.base.source_dir / "attention.cu").read_text(), "the patches change nothing"


def test_a_chain_applies_in_order_and_reports_the_patch_that_does_not():
    both = patched_source(parse_spec(f"x=v16+{K_FLOAT2}+{PIPELINE}", cwd=PROJECT_ROOT))
    assert "kPitchK" in both and "s_next" in both  # the first patch's padding, the second's pipeline
    with pytest.raises(VariantError, match=r"x: v16_2_pipeline.patch does not apply to "
                                           r"versions/v16_tf32x3_mma/attention.cu"):
        patched_source(parse_spec(f"x=v16+{PIPELINE}", cwd=PROJECT_ROOT))  # needs the first patch under it
    with pytest.raises(VariantError, match="v17_1_pipeline.patch does not apply"):
        patched_source(parse_spec(f"x=v16+{V17_PIPELINE}", cwd=PROJECT_ROOT))  # another version's file


@pytest.mark.parametrize("text,message", [
    ("v16p", "write a variant as NAME=VERSION+PATCH"),
    ("V16=v16+" + K_FLOAT2, "lowercase letters, digits and _"),
    ("v16=v16+" + K_FLOAT2, "'v16' is a backend of the registry"),
    ("x=v99+" + K_FLOAT2, "unknown backend 'v99'"),
    ("x=naive+" + K_FLOAT2, "naive is a baseline"),
    ("x=v16", "name one or more patches"),
    ("x=v16+", "name one or more patches"),
    ("x=v16+no_such.patch", "no patch file 'no_such.patch'"),
    ("x=v16+experiments/v16", "the patch 'experiments/v16' is a folder: name a patch file"),
])
def test_bad_specs_are_refused_with_the_rule(text, message):
    with pytest.raises(VariantError, match=re.escape(message)):
        parse_spec(text, cwd=PROJECT_ROOT)


def test_a_variant_is_its_version_under_its_own_name(tmp_path):
    row = materialize(parse_spec(f"v16k=v16+{K_FLOAT2}", cwd=PROJECT_ROOT), tmp_path)
    base = registry.get("v16")
    assert (row.name, row.namespace) == ("v16k", "flash_v16k")
    assert row.source_dir == tmp_path / "v16k"
    assert (row.build_flags, row.strided_inputs, row.min_compute_capability) == \
        (base.build_flags, base.strided_inputs, base.min_compute_capability)
    kernel = row.source_dir / "attention.cu"
    written = kernel.stat().st_mtime_ns
    materialize(parse_spec(f"v16k=v16+{K_FLOAT2}", cwd=PROJECT_ROOT), tmp_path)
    assert kernel.stat().st_mtime_ns == written, "an unchanged variant was rewritten (it would rebuild)"


def test_a_variant_of_an_arch_specific_version_keeps_its_target(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    hopper_only = dataclasses.replace(registry.get("v16"), min_compute_capability=(9, 0), arch_specific=(9, 0))
    row = materialize(VariantSpec("v16k", hopper_only, (PROJECT_ROOT / K_FLOAT2,)), tmp_path)
    assert (row.arch_specific, row.min_compute_capability, row.runs_on()) == ((9, 0), (9, 0), "GPU cc 9.0 only")
    assert compiled_arch(row, built_arch((9, 0))) == "sm_90a"


def small_case(repeat: bool) -> Case:
    shape = Shape(2, 2, 33)
    q, k, v = random_qkv(shape, seed=33, device="cpu")
    return Case("B=2, T=33", shape.H, (q, k, v), reference_attention(q, k, v, shape.H), repeat)


def test_check_passes_a_correct_op_and_names_a_wrong_or_nondeterministic_one(tmp_path, capsys):
    log_path = tmp_path / "log"
    log = Log(log_path)
    cases = [small_case(repeat=False), small_case(repeat=True)]
    correct = registry.get("naive").attention("cpu")
    assert check("naive", correct, cases, log)
    assert not check("wrong", lambda q, k, v, H: v.clone(), cases, log)
    noisy = lambda q, k, v, H: correct(q, k, v, H) + 1e-9 * torch.randn_like(q)  # noqa: E731
    assert not check("noisy", noisy, cases, log)
    log.close()
    out = capsys.readouterr().out
    assert "naive: ok (2 cases" in out
    assert "FAILED wrong at B=2, T=33: rel err" in out and "wrong: FAILED" in out
    assert "FAILED noisy at B=2, T=33: two calls on the same inputs differ" in out
    assert log_path.read_text() == out


def test_check_notes_a_refusal_by_pytorchs_kernel_and_fails_one_by_a_version(capsys):
    """cuDNN refuses T = 1 with a RuntimeError: for PyTorch's kernels (may_refuse) the case is
    noted and skipped, the others still checked; a version that raises fails the check."""
    cases = [small_case(repeat=False), small_case(repeat=True)]
    correct = registry.get("naive").attention("cpu")

    def refuses_the_first(q, k, v, H):
        if refuses_the_first.calls == 0:
            refuses_the_first.calls += 1
            raise RuntimeError("No available kernel. Aborting execution.")
        return correct(q, k, v, H)

    refuses_the_first.calls = 0
    log = Log(None)
    assert check("vendor", refuses_the_first, cases, log, may_refuse=True)
    refuses_the_first.calls = 0
    assert not check("version", refuses_the_first, cases, log)
    out = capsys.readouterr().out
    assert "vendor: ok (1 cases" in out and "refuses B=2, T=33" in out
    assert "FAILED version at B=2, T=33: No available kernel" in out and "version: FAILED" in out


def test_check_holds_a_half_precision_op_to_the_half_precision_bound(capsys):
    """In bfloat16 the reference is float64 of the bfloat16 inputs and each case carries the
    study's bound (without a vendor kernel on the CPU: its fixed fallback, a unit roundoff
    relative). The naive op in bfloat16 meets it, and would fail float32's bound, so the case's
    own bounds are the ones applied; an output 1% off fails it."""
    shape = Shape(2, 2, 33)
    q, k, v = random_qkv(shape, seed=33, device="cpu", dtype=torch.bfloat16)
    reference = reference_attention(q, k, v, shape.H)
    bounds = bounds_for(precision.BFLOAT16, reference, [], q, k, v, shape.H)
    assert bounds.rel == 2.0**-8
    half_case = Case("B=2, T=33", shape.H, (q, k, v), reference, False, bounds)
    float32_case = dataclasses.replace(half_case, bounds=bounds_for(precision.FLOAT32, reference, [], q, k, v, 2))
    log = Log(None)
    naive = registry.get("naive").attention("cpu", precision.BFLOAT16)
    assert check("naive", naive, [half_case], log)
    assert not check("naive", naive, [float32_case], log)
    assert not check("off", lambda q, k, v, H: (naive(q, k, v, H).float() * 1.01).to(q.dtype), [half_case], log)
    assert "FAILED off at B=2, T=33" in capsys.readouterr().out


def test_try_refuses_a_dtype_its_versions_do_not_take(capsys):
    assert harness_cli.main(["try", "--compile-only", "--dtype", "bfloat16", f"v16p=v16+{K_FLOAT2}"]) == 2
    err = capsys.readouterr().err
    assert "--dtype bfloat16: v16 (not available for bfloat16" in err, err


def test_try_needs_a_variant_or_backends_to_time(capsys):
    assert harness_cli.main(["try", "--compile-only"]) == 2
    err = capsys.readouterr().err
    assert "name a variant" in err and "--against" in err, err


def test_time_table_gives_the_median_over_rounds_and_the_ratio_to_the_reference():
    shape = Shape(1, 12, 512)
    times = {(registry.KERNEL_REFERENCE, shape): [60.0, 62.0, 61.0], ("v16p", shape): [20.0, 40.0, 30.0]}
    table = time_table(times, [registry.KERNEL_REFERENCE, "v16p"], [shape])
    assert table.splitlines()[1].split() == ["B=1", "T=512", "61.0", "(1.00)", "30.0", "(0.49)"]


# `python -m harness try --compile-only` as a job (tests/ahead.py): nvcc's seconds spent in the
# background while the other tests run. Both runs below in one child process (one start and one
# import of torch, not two), each with its own output, status and variants' folder under the
# job's own (variants.VARIANTS_DIR, set as a test would patch it), not build/variants/.
TRY = """
import contextlib, io, json, sys
from pathlib import Path
from harness import cli, variants

runs = []
for folder, *args in json.loads(sys.argv[1]):
    variants.VARIANTS_DIR = Path(folder)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(["try", "--compile-only", *args])
    runs.append((status, out.getvalue(), err.getvalue()))
print(json.dumps(runs))
"""


def tries_compiled(ahead: Ahead) -> dict[str, tuple[subprocess.CompletedProcess, str]]:
    """Each run of `try --compile-only` by name: what it printed (stdout), said (stderr) and
    returned (returncode), and what its log holds ("" without --log). "chain": v16 with the
    K-float2 and pipeline patches, compiled for sm_90 with a log; "wgmma": the wgmma candidates
    for sm_90a."""
    folder = ahead.tmp("try")
    runs = {"chain": ["--log", str(folder / "chain" / "try.log"), f"v16p=v16+{K_FLOAT2}+{PIPELINE}"],
            "wgmma": ["--arch", "sm_90a", f"v16w=v16+{WGMMA}", f"v16w2=v16+{WGMMA}+{WGMMA_SPLIT}"]}
    for name in runs:
        (folder / name).mkdir()
    proc = subprocess.run([sys.executable, "-c", TRY, json.dumps([[str(folder / name), *args]
                                                                  for name, args in runs.items()])],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr  # a traceback outside `try`'s main
    done = {}
    for (name, args), (status, out, err) in zip(runs.items(), json.loads(proc.stdout)):
        log = folder / name / "try.log"
        done[name] = (subprocess.CompletedProcess(["try", "--compile-only", *args], status, out, err),
                      log.read_text() if log.exists() else "")
    return done


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found: the compile report needs the CUDA toolkit")
@takes(tries_compiled)
def test_try_compile_only_reports_the_variant_and_its_version(ahead):
    proc, logged = ahead(tries_compiled)["chain"]
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert set(rows) == {"v16", "v16p"}, out  # the tried chain still compiles, without spills
    assert all(row[1] == "sm_90" and int(row[2]) > 0 and row[5] == "0/0" for row in rows.values()), out
    assert logged == out  # everything printed is in the log


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found: the compile report needs the CUDA toolkit")
@takes(tries_compiled)
def test_the_wgmma_candidates_compile_for_sm_90a_without_spills(ahead):
    proc, _ = ahead(tries_compiled)["wgmma"]
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()[1:]}
    for name in ("v16w", "v16w2"):  # wgmma exists only in sm_90a
        assert rows[name][1] == "sm_90a" and rows[name][5] == "0/0", rows


def wgmma_probe_compiled(ahead: Ahead) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """nvcc on the probe for sm_90a and for plain sm_90, both at once: a job (tests/ahead.py),
    run in the background while the other tests run."""
    nvcc, out = str(find_nvcc()), ahead.tmp("wgmma-probe")
    commands = [[nvcc, "-std=c++17", f"-gencode=arch=compute_{arch},code=sm_{arch}", "-c", "-o", str(out / f"{arch}.o"),
                 str(WGMMA_PROBE)] for arch in ("90a", "90")]
    running = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    said = [p.communicate() for p in running]  # (stdout, stderr), the process waited for
    return tuple(subprocess.CompletedProcess(c, p.returncode, *s) for c, p, s in zip(commands, running, said))


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
@takes(wgmma_probe_compiled)
def test_the_wgmma_probe_compiles_for_sm_90a_and_refuses_plain_sm_90(ahead):
    ok, plain = ahead(wgmma_probe_compiled)
    assert ok.returncode == 0, ok.stderr
    assert plain.returncode != 0 and "build for sm_90a" in plain.stderr, plain.stderr


@pytest.mark.gpu
def test_a_variant_builds_as_its_own_op_and_matches_float64(tmp_path):
    row = materialize(parse_spec(f"v16k=v16+{K_FLOAT2}", cwd=PROJECT_ROOT), tmp_path)
    reason = row.why_unavailable(registry.Target.of("cuda"))
    if reason:
        pytest.skip(reason)
    fn = row.attention("cuda")
    shape = Shape(2, 12, 129)
    q, k, v = random_qkv(shape, seed=129, device="cuda")
    result = compare(fn(q, k, v, shape.H), reference_attention(q, k, v, shape.H))
    assert result.ok, result.describe()
    assert hasattr(torch.ops.flash_v16k, "causal_attention")


@pytest.mark.parametrize("listed,expected", [
    (None, "sm_90"),            # nothing listed: the GPU's own architecture
    ("9.0a", "sm_90a"),         # arch-specific (wgmma): the compile report must use it too
    ("7.5;9.0+PTX", "sm_90"),
    ("8.0", "sm_90"),           # no entry for this GPU: its own
])
def test_try_reports_resources_for_the_architecture_the_builds_target(monkeypatch, listed, expected):
    if listed is None:
        monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    else:
        monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", listed)
    assert built_arch((9, 0)) == expected


def test_the_log_warns_when_its_commit_names_a_tree_that_differs_from_it():
    """`try` on a GPU machine whose .git is older than the files it was sent logs a '-dirty'
    commit; its header says so and how to name the right one."""
    clean = Provenance(gpu="NVIDIA H100 80GB HBM3", driver="580.159.04", cuda="13.0", torch="2.11.0+cu130",
                       commit="0123456789ab", date="2026-11-25T10:00:00Z")
    lines = header(clean, "float32")
    assert len(lines) == 2 and "commit 0123456789ab; float32" in lines[1]
    dirty = dataclasses.replace(clean, commit="0123456789ab-dirty")
    warning = header(dirty, "float32")[-1]
    assert warning.startswith("# warning: the tree differs from commit 0123456789ab") and "STUDY_COMMIT=" in warning
