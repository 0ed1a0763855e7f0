"""The compile check with nvcc alone (no GPU, no torch): resources from ptxas, and the
launch configuration printed by the host probe linked with a kernel file."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from backends import registry
from backends.extension import find_nvcc
from backends.registry import CudaVersion
from harness.compile_check import (
    H100,
    CompileError,
    KernelRequirements,
    KernelResources,
    LaunchConfig,
    Probes,
    VersionReport,
    check_version,
    compile_failed,
    compile_version,
    count_warp_syncs,
    format_resources,
    parse_ptxas_report,
    probe_launch,
    skip_reason,
)
from harness.study import Shape
from tests.ahead import Ahead, takes

NVCC = find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found: the compile check needs the CUDA toolkit")
# A stand-in version whose launch configuration the test knows (tests/fixtures/probe_kernel).
PROBE_KERNEL = CudaVersion(name="v99", description="test kernel", number=99,
                           folder=str(Path(__file__).parent / "fixtures" / "probe_kernel"))


# Each test's compilations are a job started ahead (tests/ahead.py): nvcc runs in the background
# while the other tests run, and the test, run last, takes what the job returns.
def shared_probes(ahead: Ahead) -> Probes:
    """The probes' object files, each compiled once for all the jobs (Probes is thread-safe)."""
    return Probes(NVCC, ahead.tmp("probe"))


def probe_kernel_launch(ahead: Ahead) -> tuple[LaunchConfig, KernelRequirements]:
    out = ahead.tmp("probe-kernel")
    compile_version(NVCC, PROBE_KERNEL, "sm_90", out)
    return probe_launch(NVCC, ahead(shared_probes).object_for(PROBE_KERNEL), out / "v99_sm_90.o", PROBE_KERNEL,
                        Shape(2, 12, 513), H100)


@needs_nvcc
@takes(probe_kernel_launch)
def test_the_probe_prints_the_launch_configuration(ahead):
    launch, requirements = ahead(probe_kernel_launch)
    assert launch == LaunchConfig(grid=(24, 9, 1), block=(16, 32, 1), smem_bytes=3 * 64 * 64 * 4)
    assert launch.threads == 512
    assert requirements == KernelRequirements(strided_inputs=False, alignment_bytes=4, half_precision=False)


# The first version, and the first of the half-precision track on Hopper's arch-specific target
# (skipped for sm_75, compiled for sm_90a, probed with the half-precision glue): every path of
# the check. CI's `python -m harness compile-check` compiles every version; the newest ones
# take 12 s each here, for nothing more than these check.
CHECKED = [registry.versions()[0], next(v for v in registry.versions()
                                        if v.arch_specific is not None and "bfloat16" in v.dtypes)]


def checked(version: CudaVersion):
    """The job that checks `version` for sm_90 and sm_75."""
    def check(ahead: Ahead) -> VersionReport:
        return check_version(NVCC, version, ["sm_90", "sm_75"], ahead(shared_probes), ahead.tmp(version.name))

    check.__name__ = f"check_{version.name}"
    return check


CHECK_JOBS = {version.name: checked(version) for version in CHECKED}


@needs_nvcc
@pytest.mark.parametrize("version", [pytest.param(v, id=v.name, marks=takes(CHECK_JOBS[v.name]))
                                     for v in CHECKED])
def test_versions_compile_and_report_resources_and_launch(version, ahead):
    """A plain version and an arch-specific half-precision one (CI's compile check covers them all)."""
    report = ahead(CHECK_JOBS[version.name])
    assert isinstance(report.launch, LaunchConfig), report.launch
    assert report.disagreement is None, report.disagreement
    assert report.launch.smem_bytes > 0 and 0 < report.launch.threads <= 1024, report.launch
    for arch, resources in report.resources.items():
        if skip_reason(version, arch):  # an arch older than the version needs: skipped, with why
            assert isinstance(resources, str) and resources.startswith("skipped: needs compute"), resources
            continue
        assert not isinstance(resources, str), resources
        # One block's registers must fit the 64K-register file, or it could never launch.
        assert 0 < resources.registers * report.launch.threads <= 65536, (arch, resources)


def disagreeing_rows(ahead: Ahead) -> tuple[VersionReport, VersionReport, VersionReport]:
    """The fixture kernel checked as its own row, as a row that says otherwise, and as a row of
    the half-precision track."""
    rows = (PROBE_KERNEL, dataclasses.replace(PROBE_KERNEL, strided_inputs=True, alignment_bytes=16),
            dataclasses.replace(PROBE_KERNEL, dtypes=("bfloat16", "float16")))
    return tuple(check_version(NVCC, row, ["sm_90"], ahead(shared_probes), ahead.tmp("disagrees")) for row in rows)


@needs_nvcc
@takes(disagreeing_rows)
def test_a_registry_row_that_disagrees_with_its_kernel_file_is_named(ahead):
    """The fixture kernel's requirements() says contiguous inputs, 4-byte alignment."""
    agrees, wrong, half = ahead(disagreeing_rows)
    assert agrees.requirements == KernelRequirements(False, 4, False) and agrees.disagreement is None
    assert (wrong.version.strided_inputs, wrong.version.alignment_bytes) == (True, 16)
    assert wrong.disagreement == ("v99: its registry row says strided_inputs=True, alignment_bytes=16, "
                                  "half_precision=False (dtypes float32), but its kernel file's requirements() "
                                  "says strided_inputs=False, alignment_bytes=4, half_precision=False")
    # a row of the other track: the probe is compiled for HalfArgs, which the kernel file lacks
    assert half.version.dtypes == ("bfloat16", "float16")
    assert half.launch_failed and "launch_config" in str(half.launch), half.launch


def broken_version(ahead: Ahead) -> tuple[CudaVersion, VersionReport]:
    """A version whose kernel file is not CUDA, and its check."""
    broken = ahead.tmp("v98_broken")
    (broken / "attention.cu").write_text("this is not CUDA\n")
    version = CudaVersion(name="v98", description="broken", number=98, folder=str(broken))
    return version, check_version(NVCC, version, ["sm_90"], None, ahead.tmp("broken-out"))


@needs_nvcc
@takes(broken_version)
def test_a_compiler_error_is_reported_not_raised(ahead, tmp_path):
    version, report = ahead(broken_version)
    assert isinstance(report.resources["sm_90"], str) and "nvcc for v98 (sm_90) failed" in report.resources["sm_90"]
    with pytest.raises(CompileError):
        compile_version(NVCC, version, "sm_90", tmp_path)


def without_launch_config(ahead: Ahead) -> VersionReport:
    """The fixture kernel less its launch_config, checked."""
    folder = ahead.tmp("v97_no_launch_config")
    source = (Path(PROBE_KERNEL.source_dir) / "attention.cu").read_text()
    start = source.index("LaunchConfig launch_config(")
    end = source.index("size_t workspace_bytes(")
    (folder / "attention.cu").write_text(source[:start] + source[end:])
    version = CudaVersion(name="v97", description="no launch_config", number=97, folder=str(folder))
    return check_version(NVCC, version, ["sm_90"], ahead(shared_probes), ahead.tmp("no-launch-config-out"))


@needs_nvcc
@takes(without_launch_config)
def test_a_version_without_launch_config_is_a_failure_with_a_clear_message(ahead):
    report = ahead(without_launch_config)
    assert report.launch_failed and "v97 does not define causal_attention::launch_config" in report.launch


def sm90a_only(ahead: Ahead) -> VersionReport:
    """The fixture kernel refusing any device target but sm_90a, as a row built only for it,
    checked for sm_90 and sm_75."""
    folder = ahead.tmp("v99_sm90a_only")
    guard = ('#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)\n'
             '#error "compiled for a target other than sm_90a"\n#endif\n')
    (folder / "attention.cu").write_text(guard + (PROBE_KERNEL.source_dir / "attention.cu").read_text())
    row = dataclasses.replace(PROBE_KERNEL, folder=str(folder), min_compute_capability=(9, 0), arch_specific=(9, 0))
    return check_version(NVCC, row, ["sm_90", "sm_75"], ahead(shared_probes), ahead.tmp("sm90a-only-out"))


@needs_nvcc
@takes(sm90a_only)
def test_an_arch_specific_version_is_compiled_for_its_target_and_skipped_elsewhere(ahead):
    """Asked for sm_90 and sm_75, a version built only for sm_90a is compiled for sm_90a (the
    kernel file refuses any other device target) and skipped for sm_75."""
    report = ahead(sm90a_only)
    compiled = report.resources["sm_90"]
    assert isinstance(compiled, KernelResources) and compiled.arch == "sm_90a", compiled
    assert format_resources("v99", "sm_90", compiled).split()[:2] == ["v99", "sm_90a"]
    assert isinstance(report.launch, LaunchConfig), report.launch  # the probe linked the sm_90a object
    skipped = report.resources["sm_75"]
    assert isinstance(skipped, str) and skipped.startswith("skipped: needs compute capability 9.0 exactly (v99 ")
    assert skipped.endswith(": sm_90a code runs on no other GPU); sm_75 is 7.5"), skipped


# nvcc 13.0's `-Xptxas -v` report for a file of two kernels, the first of which had its wgmma
# serialised (experiments/h03_1's first form, 2026-11-25); mangled names shortened.
_SERIALISED_REPORT = """\
ptxas info    : (C7519) warpgroup.arrive is injected in around line 6188 by compiler to allow use of registers in GMMA in function '_Z6attendv'
ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register resources for the wgmma pipeline in the function '_Z6attendv'
ptxas info    : Compiling entry function '_Z5mergev' for 'sm_90a'
ptxas info    : Function properties for _Z5mergev
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 63 registers, used 0 barriers
ptxas info    : Compiling entry function '_Z6attendv' for 'sm_90a'
ptxas info    : Function properties for _Z6attendv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 3 barriers
"""


def test_a_kernel_whose_wgmma_ptxas_serialised_is_reported_and_fails_the_check():
    """ptxas still builds such a kernel (no spills, no error), and it computes the right thing
    at a fraction of the tensor cores' rate: h03_1's first form ran 22% slower than its parent
    with every HGMMA followed by a wait, and the resources table said nothing."""
    resources = parse_ptxas_report("h03a", "sm_90a", _SERIALISED_REPORT)
    assert resources.registers == 168, resources  # the main kernel, the one the remark names
    assert resources.wgmma_serialized == "C7511: insufficient register resources for the wgmma pipeline", resources
    assert "SERIALISED by ptxas (C7511" in format_resources("h03a", "sm_90a", resources)
    assert compile_failed(resources)


def test_a_remark_about_another_kernel_is_not_pinned_on_the_main_one():
    report = _SERIALISED_REPORT.replace("in the function '_Z6attendv'", "in the function '_Z5mergev'")
    resources = parse_ptxas_report("h03a", "sm_90a", report)
    assert resources.registers == 168 and resources.wgmma_serialized == "", resources
    assert not compile_failed(resources)
    assert format_resources("h03a", "sm_90a", resources).endswith("  -")


# cuobjdump -sass of a file with two kernels, abridged: the count is the named kernel's only.
_SASS = """\
\tcode for sm_90a
\t\tFunction : _Z5mergev
\t.headerflags\t@"EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0010*/                   WARPSYNC.COLLECTIVE R2, `(.L_x_1) ;
\t\t..........

\t\tFunction : _Z6attendv
\t.headerflags\t@"EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0460*/                   WARPSYNC.COLLECTIVE R4, `(.L_x_7) ;
        /*0470*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ;
        /*0480*/                   WARPSYNC.COLLECTIVE R4, `(.L_x_8) ;
        /*0490*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
\t\t..........
"""


def test_warp_syncs_are_counted_in_the_main_kernel_only():
    assert count_warp_syncs(_SASS, "_Z6attendv") == 2
    assert count_warp_syncs(_SASS, "_Z5mergev") == 1
    assert count_warp_syncs(_SASS, "_Z4nonev") is None


def test_the_main_kernels_name_is_kept_for_the_sass():
    resources = parse_ptxas_report("h03a", "sm_90a", _SERIALISED_REPORT)
    assert resources.entry == "_Z6attendv", resources
    assert resources.warp_syncs is None  # filled in by compile_version where cuobjdump exists


def test_the_resources_row_shows_the_warp_syncs_or_a_question_mark():
    resources = KernelResources("h10", "sm_90a", 128, 0, 0, 0, 0, warp_syncs=40)
    assert format_resources("h10", "sm_90a", resources).split()[-2:] == ["40", "-"]
    unknown = dataclasses.replace(resources, warp_syncs=None)
    assert format_resources("h10", "sm_90a", unknown).split()[-2:] == ["?", "-"]
    assert not compile_failed(resources), "a count is a diagnostic, not a failure"
