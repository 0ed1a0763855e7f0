"""The registry is the one list of backends: it matches the version folders, and each row
decides where it can run (compute capability included, checked without an old GPU)."""
import dataclasses

import pytest

from backends import registry
from backends.extension import Arch, BuildSetupError, archs_for, parse_arch_list
from backends.registry import _FAST_MATH, VERSIONS_DIR, Target, _version
from harness import cli as harness_cli
from harness.compile_check import compiled_arch, skip_reason
from harness.results import E2ERow, KernelRow

# A row as v15's will be written (needs cp.async, compute capability 8.0).
NEEDS_AMPERE = _version(15, "cp_async", "K/V tiles double-buffered with cp.async", build_flags=_FAST_MATH,
                        strided_inputs=True, min_compute_capability=(8, 0))
TURING, HOPPER = Target("cuda", (7, 5)), Target("cuda", (9, 0))
# A row built like v18 (wgmma), for sm_90a alone, so it runs on 9.0 exactly; v16 under it keeps
# the messages independent of v18's own row.
HOPPER_ONLY = dataclasses.replace(registry.get("v16"), min_compute_capability=(9, 0), arch_specific=(9, 0))
HOPPER_ONLY_NEEDS = "needs compute capability 9.0 exactly (v16 tf32x3_mma: sm_90a code runs on no other GPU)"


def test_every_version_folder_has_a_row_and_every_row_a_folder():
    folders = sorted(p.name for p in VERSIONS_DIR.iterdir() if p.is_dir() and p.name != "common")
    rows = sorted(v.folder for v in registry.kernel_versions())
    assert folders == rows


def test_each_version_folder_holds_a_kernel_and_notes():
    for version in registry.kernel_versions():
        assert (version.source_dir / "attention.cu").is_file(), version.name
        assert (version.source_dir / "README.md").is_file(), version.name


def test_names_and_namespaces_are_unique():
    names = registry.names()
    assert len(names) == len(set(names))
    spaces = [v.namespace for v in registry.kernel_versions()]
    assert len(spaces) == len(set(spaces))


def test_versions_are_numbered_in_order_per_track_and_keep_fast_math():
    for dtypes, prefix in registry.TRACK_PREFIX.items():
        track = [v for v in registry.versions() if v.dtypes == dtypes]
        assert [v.number for v in track] == list(range(1, len(track) + 1)), prefix
        for v in track:
            assert v.name == f"{prefix}{v.number:02d}" and v.folder.startswith(v.name + "_")
            # float32: from version 4 (the step that added it); half precision: from its first step
            assert ("--use_fast_math" in v.build_flags) == (v.half_precision or v.number >= 4), v.name


def test_each_step_names_an_earlier_version_as_its_parent():
    seen: set[str] = set()
    for v in registry.versions():
        assert v.parent is None or v.parent in seen, f"{v.name}'s parent {v.parent} is not an earlier version"
        assert (v.parent is None) == (v.name == "v01"), v.name  # only the study's first step has none
        seen.add(v.name)


def test_kernel_files_are_free_of_torch_headers():
    for v in registry.kernel_versions():
        text = (v.source_dir / "attention.cu").read_text()
        assert "torch/" not in text and "ATen/" not in text, v.name


def test_select_and_required():
    assert [b.name for b in registry.select("naive, v11")] == ["naive", "v11"]
    assert len(registry.select("all")) == len(registry.BACKENDS)
    with pytest.raises(registry.UnknownBackendError, match="valid backends"):
        registry.select("v01,nope")
    assert [b.name for b in registry.with_required(registry.select("v05,naive"), "sdpa-efficient")] == \
        ["sdpa-efficient", "v05", "naive"]


def test_references_are_rows_and_name_their_columns():
    from backends import precision

    for dtype in precision.EVERY:  # each dtype's kernel reference runs in that dtype
        assert registry.get(registry.kernel_reference(dtype)).accepts(dtype), dtype
    registry.get(registry.TOKENS_REFERENCE)
    fields = {f.name for f in dataclasses.fields(KernelRow)} | {f.name for f in dataclasses.fields(E2ERow)}
    assert "same_tokens_as_" + registry.TOKENS_REFERENCE in fields


def test_where_each_backend_runs():
    cpu, no_gpu = Target("cpu"), Target("cuda", None)
    assert registry.get("naive").why_unavailable(cpu) is None
    assert "needs a CUDA device" in registry.get("v01").why_unavailable(cpu)
    assert registry.get("v01").why_unavailable(no_gpu) == "no CUDA device is available"
    assert "float32" in registry.get("sdpa-flash").why_unavailable(HOPPER, "float32")
    assert registry.get("sdpa-flash").why_unavailable(HOPPER, "bfloat16") is None
    assert all(v.why_unavailable(TURING) is None for v in registry.versions() if v.min_compute_capability <= (7, 5))
    assert all(v.min_compute_capability >= registry.OLDEST_CAPABILITY for v in registry.versions())


def test_a_version_needing_ampere_is_unavailable_on_turing_with_the_reason():
    assert NEEDS_AMPERE.why_unavailable(HOPPER) is None
    assert NEEDS_AMPERE.why_unavailable(TURING) == \
        "needs compute capability 8.0 (v15 cp_async); this GPU is 7.5"
    runnable, unavailable = registry.partition([registry.get("v01"), NEEDS_AMPERE], TURING)
    assert [b.name for b in runnable] == ["v01"] and "compute capability 8.0" in unavailable["v15"]
    assert NEEDS_AMPERE.runs_on() == "GPU cc >= 8.0"


def test_the_compile_check_skips_its_sm75_build():
    assert skip_reason(NEEDS_AMPERE, "sm_90") is None
    assert skip_reason(NEEDS_AMPERE, "sm_75") == "needs compute capability 8.0 (v15 cp_async); sm_75 is 7.5"
    assert skip_reason(registry.get("v01"), "sm_75") is None


def test_the_build_skips_architectures_it_cannot_target():
    archs = parse_arch_list("7.5;9.0+PTX")
    assert archs == [Arch((7, 5)), Arch((9, 0), ptx=True)]
    assert archs[1].gencode_flags() == ["-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_90,code=compute_90"]
    kept, why = archs_for(NEEDS_AMPERE, archs)
    assert kept == [Arch((9, 0), ptx=True)] and "not built for 7.5" in why
    kept, why = archs_for(NEEDS_AMPERE, [Arch((7, 5))])
    assert kept == [] and "needs compute capability 8.0" in why
    with pytest.raises(BuildSetupError, match="cannot read"):
        parse_arch_list("Hopper")


def test_list_shows_a_version_unavailable_on_this_gpu(monkeypatch, capsys):
    monkeypatch.setattr(registry, "BACKENDS", (*registry.BACKENDS, NEEDS_AMPERE))
    monkeypatch.setattr(Target, "of", staticmethod(lambda device: TURING))
    assert harness_cli.main(["list"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("v15"))
    assert "GPU cc >= 8.0" in line and "needs compute capability 8.0 (v15 cp_async); this GPU is 7.5" in line
    assert "compute capability 7.5" in out.splitlines()[0]


def test_quick_selection_is_each_tracks_ends_and_the_baselines():
    quick = {b.name for b in registry.select("quick")}
    for backend in registry.BACKENDS:
        assert (backend.name in quick) == (registry.quick_refusal(backend) is None), backend.name
    assert "flex-attention" not in quick  # its row says why
    for first in ("v01", "h01", "d01"):
        track = [v.name for v in registry.track_of(registry.get(first))]
        assert track[0] == first and len(track) > 2, track
        assert track[0] in quick and track[-1] in quick, track
        assert not set(track[1:-1]) & quick, track
    study = registry.get("study")
    for dtype in ("float32", "bfloat16"):  # the KV-cache generation's pair is measured too
        assert {part.name for part in study.parts(dtype)} <= quick


@pytest.mark.parametrize("capability", [(8, 0), (10, 0)], ids=["older", "newer"])
def test_an_arch_specific_version_runs_on_its_capability_only(capability):
    gpu = Target("cuda", capability)
    assert HOPPER_ONLY.why_unavailable(HOPPER) is None
    assert HOPPER_ONLY.why_unavailable(gpu) == f"{HOPPER_ONLY_NEEDS}; this GPU is {capability[0]}.{capability[1]}"
    assert registry.get("v16").why_unavailable(gpu) is None  # the portable build of the same row
    assert HOPPER_ONLY.runs_on() == "GPU cc 9.0 only"


def test_a_row_names_its_arch_specific_target_once():
    row = _version(18, "wgmma", "wgmma", build_flags=_FAST_MATH, arch_specific=(9, 0))
    assert (row.min_compute_capability, row.arch_specific) == ((9, 0), (9, 0))
    assert row.why_unavailable(Target("cuda", (8, 0))) == \
        "needs compute capability 9.0 exactly (v18 wgmma: sm_90a code runs on no other GPU); this GPU is 8.0"
    with pytest.raises(ValueError, match="v16: built only for sm_90a, so its min_compute_capability must be 9.0, "
                                         "not 8.0"):
        dataclasses.replace(registry.get("v16"), arch_specific=(9, 0))


SM_90A = Arch((9, 0), arch_specific=True)


@pytest.mark.parametrize("listed,built,skipped", [
    ("9.0", [SM_90A], None),
    ("9.0+PTX", [SM_90A], None),  # no PTX: sm_90a's would run nowhere else
    ("9.0a;9.0", [SM_90A], None),
    ("8.0;9.0", [SM_90A], "not built for 8.0"),
    ("10.0", [], "not built for 10.0"),
    ("7.5;9.0;10.0+PTX", [SM_90A], "not built for 7.5, 10.0"),
])
def test_the_build_targets_only_the_arch_specific_architecture(listed, built, skipped):
    kept, why = archs_for(HOPPER_ONLY, parse_arch_list(listed))
    assert kept == built
    assert why == (f"{HOPPER_ONLY_NEEDS}; {skipped}" if skipped else None)


def test_other_versions_keep_the_portable_architecture():
    kept, why = archs_for(registry.get("v16"), parse_arch_list("9.0"))
    assert (kept, why) == ([Arch((9, 0))], None)
    assert kept[0].gencode_flags() == ["-gencode=arch=compute_90,code=sm_90"]
    assert SM_90A.gencode_flags() == ["-gencode=arch=compute_90a,code=sm_90a"]


def test_the_compile_check_compiles_an_arch_specific_version_for_its_target_only():
    assert compiled_arch(HOPPER_ONLY, "sm_90") == "sm_90a" and compiled_arch(HOPPER_ONLY, "sm_90a") == "sm_90a"
    assert compiled_arch(registry.get("v16"), "sm_90") == "sm_90"
    assert skip_reason(HOPPER_ONLY, "sm_90") is None
    assert skip_reason(HOPPER_ONLY, "sm_75") == f"{HOPPER_ONLY_NEEDS}; sm_75 is 7.5"
    assert skip_reason(HOPPER_ONLY, "sm_100") == f"{HOPPER_ONLY_NEEDS}; sm_100 is 10.0"
