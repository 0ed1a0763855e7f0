"""Compile each version's kernel file with nvcc alone (no GPU, no torch) and report
registers, shared memory, stack and spill bytes from ptxas (and its remark when it
serialised a kernel's wgmma, which fails the check), the WARPSYNC.COLLECTIVE instructions
in its SASS where cuobjdump is found (a count, not a failure), and the launch
configuration its launcher chooses (grid, block, dynamic shared memory) at a stated
shape on a stated GPU, printed by a small host probe linked with the kernel file. The
probe also prints the kernel file's input requirements, which must agree with the
version's registry row. A version built only for an arch-specific target is compiled for
it (sm_90a where sm_90 is asked) and skipped elsewhere, as the builds do; the tables name
the architecture actually compiled."""
from __future__ import annotations

import concurrent.futures as futures
import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from backends.extension import BASE_CUDA_FLAGS, COMMON_DIR, Arch, arch_for, find_nvcc
from backends.registry import OLDEST_CAPABILITY, Backend, Capability, KernelVersion, arch_digits, capability_text
from harness.study import HEADLINE_SHAPES, Shape

DEFAULT_ARCHS = ("sm_90", "sm_75")  # Hopper (our GPUs) and Turing (the original GTX 1660 Super)
PROBE_DIR = Path(__file__).resolve().parent / "probe"  # a launch probe per op kind (KernelVersion.probe_file)
PROBE_SHAPE: Shape = HEADLINE_SHAPES[0]  # contiguous q, k, v (decode: caches of T rows)


@dataclass(frozen=True)
class DeviceLimits:
    """What a launcher is told about the GPU (versions/common/attention_launch.h)."""

    name: str
    smem_per_block: int
    smem_per_block_optin: int
    sm_count: int


H100 = DeviceLimits("H100", smem_per_block=49152, smem_per_block_optin=232448, sm_count=132)
PROBE_LIMITS = H100

_REGISTERS = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
# ptxas's remark that it made every wgmma wait for the previous one (C7510-C7515: a reason
# such as "insufficient register resources for the wgmma pipeline"): the kernel still
# computes the right thing, at a fraction of the tensor cores' rate.
_SERIALIZED = re.compile(r"\((C75\d\d)\) Potential Performance Loss: wgmma\.mma_async instructions are "
                         r"serialized due to (.+?) in the function '([^']+)'")
_ENTRY = re.compile(r"^\s*'([^']+)'")
_STACK_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_ARCH = re.compile(r"^sm_(\d+)(\d)(a?)$")
_PROBE_OUTPUT = re.compile(r"grid (\d+) (\d+) (\d+) block (\d+) (\d+) (\d+) smem (\d+)")
_PROBE_REQUIREMENTS = re.compile(r"strided_inputs ([01]) alignment_bytes (\d+) half_precision ([01])")


@dataclass(frozen=True)
class KernelResources:
    name: str
    arch: str
    registers: int
    static_smem_bytes: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    wgmma_serialized: str = ""  # ptxas's code and reason where it serialised the wgmma, else ""
    entry: str = ""  # the kernel's mangled name, as ptxas and cuobjdump print it
    # WARPSYNC.COLLECTIVE instructions in the kernel's SASS (None: no cuobjdump here). ptxas
    # puts one before a warp-collective instruction (a wgmma) whose operands it cannot prove
    # the same in every lane: h10's first form had 24 and ran every tile 15% slower; the
    # versions of the study have none.
    warp_syncs: int | None = None


@dataclass(frozen=True)
class LaunchConfig:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int  # dynamic shared memory per block

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass(frozen=True)
class KernelRequirements:
    """What the kernel file's requirements() says (versions/common/attention_launch.h)."""

    strided_inputs: bool
    alignment_bytes: int
    half_precision: bool  # the track whose launcher contract it implements (HalfArgs)

    def disagreement(self, version: KernelVersion) -> str | None:
        """Why the version's registry row does not say the same, or None."""
        row = KernelRequirements(version.strided_inputs, version.alignment_bytes, version.half_precision)
        if row == self:
            return None
        return (f"{version.name}: its registry row says strided_inputs={row.strided_inputs}, "
                f"alignment_bytes={row.alignment_bytes}, half_precision={row.half_precision} (dtypes "
                f"{', '.join(version.dtypes)}), but its kernel file's requirements() says "
                f"strided_inputs={self.strided_inputs}, alignment_bytes={self.alignment_bytes}, "
                f"half_precision={self.half_precision}")


class CompileError(RuntimeError):
    """nvcc or the probe failed; the message holds their output."""


def parse_arch(arch: str) -> Arch:
    """'sm_90' -> Arch((9, 0)); 'sm_90a' -> Arch((9, 0), arch_specific=True). ValueError for a
    name it cannot read, or an architecture older than every version's."""
    match = _ARCH.match(arch)
    if not match:
        raise ValueError(f"cannot read the architecture {arch!r}; use names such as sm_90 or sm_75")
    parsed = Arch((int(match[1]), int(match[2])), arch_specific=bool(match[3]))
    if parsed.capability < OLDEST_CAPABILITY:
        raise ValueError(f"{arch} is compute capability {capability_text(parsed.capability)}, older than any the "
                         f"study builds for: use sm_{arch_digits(OLDEST_CAPABILITY)} (compute capability "
                         f"{capability_text(OLDEST_CAPABILITY)}) or newer")
    return parsed


def arch_capability(arch: str) -> Capability:
    """'sm_90' -> (9, 0); 'sm_75' -> (7, 5)."""
    return parse_arch(arch).capability


def skip_reason(version: KernelVersion, arch: str) -> str | None:
    """Why `version` is not compiled for `arch` (a GPU of its capability cannot run it), or None."""
    capability = arch_capability(arch)
    mismatch = version.capability_mismatch(capability)
    return f"{mismatch}; {arch} is {capability_text(capability)}" if mismatch else None


def compiled_arch(version: KernelVersion, arch: str) -> str:
    """The architecture `version` is compiled for where `arch` is asked: `arch`, or sm_90a for
    sm_90 when the version is built only for that arch-specific target."""
    return arch_for(version, parse_arch(arch)).sm_name


def _run(cmd: list[str], what: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise CompileError(f"{what} failed:\n{' '.join(cmd)}\n{output}")
    return output


def compile_version(nvcc: Path, version: KernelVersion, arch: str, out_dir: Path) -> KernelResources:
    """Compile to out_dir/<name>_<arch>.o and parse ptxas's report."""
    obj = out_dir / f"{version.name}_{arch}.o"
    # -gencode rather than -arch: nvcc 13.0's -arch=sm_90a also runs a plain sm_90 pass,
    # which rejects sm_90a-only instructions (wgmma).
    digits = arch.removeprefix("sm_")  # "90", "90a"
    output = _run([str(nvcc), f"-gencode=arch=compute_{digits},code=sm_{digits}", "-c",
                   str(version.source_dir / "attention.cu"), "-o", str(obj),
                   f"-I{COMMON_DIR}", "-Xptxas", "-v", *BASE_CUDA_FLAGS, *version.build_flags,
                   *version.glue_defines],
                  f"nvcc for {version.name} ({arch})")
    resources = parse_ptxas_report(version.name, arch, output)
    cuobjdump = find_cuobjdump(nvcc)
    if cuobjdump is None or not resources.entry:
        return resources
    sass = _run([cuobjdump, "-sass", str(obj)], f"cuobjdump for {version.name} ({arch})")
    return dataclasses.replace(resources, warp_syncs=count_warp_syncs(sass, resources.entry))


def find_cuobjdump(nvcc: Path) -> str | None:
    """cuobjdump beside nvcc, else on PATH, else None (the count is then left out)."""
    beside = nvcc.parent / "cuobjdump"
    return str(beside) if beside.exists() else shutil.which("cuobjdump")


def count_warp_syncs(sass: str, entry: str) -> int | None:
    """WARPSYNC.COLLECTIVE instructions in the function `entry` of `cuobjdump -sass` output
    (None if the function is not there)."""
    for function in sass.split("Function : ")[1:]:
        if function.split(None, 1)[0] == entry:
            return function.count("WARPSYNC.COLLECTIVE")
    return None


def parse_ptxas_report(name: str, arch: str, output: str) -> KernelResources:
    """The main kernel's resources from `nvcc -Xptxas -v` output. Each kernel's own report
    follows its "Compiling entry function" line. A file may hold more than one kernel
    (version 17's merge kernel); the main one is the one using the most registers, and it is
    the one reported. ptxas's remarks that it serialised a kernel's wgmma name the kernel
    and may come before its report."""
    serialized = {m[3]: f"{m[1]}: {m[2]}" for m in _SERIALIZED.finditer(output)}
    reports = []
    for part in output.split("Compiling entry function")[1:]:
        registers, stack, smem = _REGISTERS.search(part), _STACK_SPILLS.search(part), _SMEM.search(part)
        entry = _ENTRY.match(part)
        if registers and stack:
            reports.append(KernelResources(name, arch, int(registers[1]), int(smem[1]) if smem else 0,
                                           int(stack[1]), int(stack[2]), int(stack[3]),
                                           serialized.get(entry[1], "") if entry else "",
                                           entry[1] if entry else ""))
    if not reports:
        raise CompileError(f"could not read ptxas's report for {name} ({arch}):\n{output}")
    return max(reports, key=lambda r: r.registers)


def compile_probe(nvcc: Path, out_dir: Path, defines: tuple[str, ...] = (),
                  probe_file: str = "launch_config_probe.cpp") -> Path:
    """The object file of the probe `probe_file` (harness/probe/), compiled for the launcher
    contract that `defines` select (a version's glue_defines: none for the float32 track)."""
    stem = Path(probe_file).stem
    obj = out_dir / (stem + "".join(d.removeprefix("-D").lower() for d in defines) + ".o")
    _run([str(nvcc), "-c", str(PROBE_DIR / probe_file), "-o", str(obj), f"-I{COMMON_DIR}", "-std=c++17",
          *defines], f"the probe {probe_file}")
    return obj


class Probes:
    """The probes' object files, one per launcher contract (prefill float32 Args, prefill half
    HalfArgs, decode Args), each compiled on first use; thread-safe, for check_versions'
    parallel workers."""

    def __init__(self, nvcc: Path, out_dir: Path) -> None:
        self.nvcc, self.out_dir = nvcc, out_dir
        self._objects: dict[tuple[str, ...], Path | CompileError] = {}
        self._lock = threading.Lock()

    def object_for(self, version: KernelVersion) -> Path:
        """The probe compiled for `version`'s contract; raises CompileError if it does not compile."""
        key = (version.probe_file, *version.glue_defines)
        with self._lock:
            if key not in self._objects:
                try:
                    self._objects[key] = compile_probe(self.nvcc, self.out_dir, version.glue_defines,
                                                       version.probe_file)
                except CompileError as err:
                    self._objects[key] = err
            found = self._objects[key]
        if isinstance(found, CompileError):
            raise found
        return found


def probe_launch(nvcc: Path, probe_obj: Path, kernel_obj: Path, version: KernelVersion,
                 shape: Shape = PROBE_SHAPE,
                 limits: DeviceLimits = PROBE_LIMITS) -> tuple[LaunchConfig, KernelRequirements]:
    """Link the probe with the version's object file and run it (no GPU needed)."""
    exe = kernel_obj.with_suffix(".probe")
    link = subprocess.run([str(nvcc), str(probe_obj), str(kernel_obj), "-o", str(exe)], capture_output=True, text=True)
    if link.returncode != 0:
        output = link.stdout + link.stderr
        if "launch_config" in output:
            raise CompileError(f"{version.name} does not define {version.op_kind.op_name}::launch_config "
                               f"(versions/common/{version.launch_header} declares it; every version "
                               "defines it)")
        raise CompileError(f"linking the launch probe with {version.name} failed:\n{output}")
    output = _run([str(exe), str(shape.B), str(shape.H), str(shape.T), str(limits.smem_per_block),
                   str(limits.smem_per_block_optin), str(limits.sm_count)], f"the launch probe of {version.name}")
    match, requirements = _PROBE_OUTPUT.search(output), _PROBE_REQUIREMENTS.search(output)
    if not match or not requirements:
        raise CompileError(f"the launch probe of {version.name} printed {output!r}")
    values = [int(g) for g in match.groups()]
    launch = LaunchConfig(tuple(values[0:3]), tuple(values[3:6]), values[6])  # type: ignore[arg-type]
    return launch, KernelRequirements(requirements[1] == "1", int(requirements[2]), requirements[3] == "1")


@dataclass(frozen=True)
class VersionReport:
    version: KernelVersion
    resources: dict[str, KernelResources | str]  # arch -> resources, or why not (skipped, error)
    launch: LaunchConfig | str  # or why not
    launch_failed: bool = False  # the probe did not run (no launch_config, a link error)
    requirements: KernelRequirements | None = None  # None when the probe did not run

    @property
    def disagreement(self) -> str | None:
        """Why the registry row and the kernel file's requirements() differ, or None."""
        return self.requirements.disagreement(self.version) if self.requirements else None


def check_version(nvcc: Path, version: KernelVersion, archs: Sequence[str], probes: Probes | None,
                  out_dir: Path) -> VersionReport:
    resources: dict[str, KernelResources | str] = {}
    launch: LaunchConfig | str = "no architecture compiled"
    launch_failed = False
    requirements: KernelRequirements | None = None
    for arch in archs:  # resources are keyed by the arch asked; KernelResources.arch is the one compiled
        reason = skip_reason(version, arch)
        if reason:
            resources[arch] = f"skipped: {reason}"
            continue
        compiled = compiled_arch(version, arch)
        try:
            resources[arch] = compile_version(nvcc, version, compiled, out_dir)
        except CompileError as err:
            resources[arch] = str(err)
            continue
        if isinstance(launch, str) and probes is not None:  # the first compiled object runs the probe
            try:
                launch, requirements = probe_launch(nvcc, probes.object_for(version),
                                                    out_dir / f"{version.name}_{compiled}.o", version)
            except CompileError as err:
                launch, launch_failed = str(err), True
    return VersionReport(version, resources, launch, launch_failed, requirements)


def compile_failed(r: KernelResources | str) -> bool:
    """An architecture whose compilation failed (a skip for an older GPU is not a failure), or
    whose wgmma ptxas serialised: a version of the study is never built that way."""
    return (isinstance(r, str) and not r.startswith("skipped")) or (
        isinstance(r, KernelResources) and bool(r.wgmma_serialized))


def check_versions(nvcc: Path, versions: Sequence[KernelVersion], archs: Sequence[str], probes: Probes | None,
                   out_dir: Path, jobs: int | None = None) -> list[VersionReport]:
    """check_version for each version, `jobs` nvcc processes at once (default: cores)."""
    with futures.ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
        return list(pool.map(lambda v: check_version(nvcc, v, archs, probes, out_dir), versions))


RESOURCES_HEADER = (f"{'version':8s} {'arch':6s} {'registers':>9s} {'static smem':>11s} {'stack':>6s} "
                    f"{'spills (st/ld)':>15s} {'warp syncs':>10s}  wgmma")


def format_resources(name: str, arch: str, r: KernelResources | str) -> str:
    """A row of the resources table: the architecture compiled (r.arch), or for a skip or an
    error the one asked (`arch`)."""
    if isinstance(r, str):
        return f"{name:8s} {arch:6s} {r.splitlines()[0]}"
    wgmma = f"SERIALISED by ptxas ({r.wgmma_serialized})" if r.wgmma_serialized else "-"
    syncs = "?" if r.warp_syncs is None else str(r.warp_syncs)
    return (f"{name:8s} {r.arch:6s} {r.registers:9d} {r.static_smem_bytes:11d} {r.stack_bytes:6d} "
            f"{r.spill_store_bytes:>7d}/{r.spill_load_bytes:<7d} {syncs:>10s}  {wgmma}")


def _format_launch(report: VersionReport) -> str:
    name, launch, req = report.version.name, report.launch, report.requirements
    if isinstance(launch, str) or req is None:
        return f"{name:8s} –  ({str(launch).splitlines()[0]})"
    grid = "x".join(map(str, launch.grid))
    block = "x".join(map(str, launch.block))
    inputs = "strided" if req.strided_inputs else "contiguous"
    return (f"{name:8s} {block:>10s} {launch.threads:7d} {grid:>12s} {launch.smem_bytes:12d} {inputs:>10s} "
            f"{req.alignment_bytes:>5d}")


def run_compile_check(backends: Sequence[Backend], archs: Sequence[str] | None, *, jobs: int | None = None) -> int:
    """Print both tables; exit status 1 if a compilation failed (skips are not failures)."""
    nvcc = find_nvcc()
    if nvcc is None:
        print("compile-check skipped: nvcc not found (install the CUDA toolkit, put nvcc on PATH or set CUDA_HOME)")
        return 0
    archs = list(archs or DEFAULT_ARCHS)
    for arch in archs:
        arch_capability(arch)  # refuse a malformed name before compiling anything
    versions = [b for b in backends if isinstance(b, KernelVersion)]
    with tempfile.TemporaryDirectory() as tmp:
        reports = check_versions(nvcc, versions, archs, Probes(nvcc, Path(tmp)), Path(tmp), jobs)
    print(RESOURCES_HEADER)
    failures = 0
    for report in reports:
        for arch, r in report.resources.items():
            print(format_resources(report.version.name, arch, r))
            failures += compile_failed(r)
    limits = PROBE_LIMITS
    print(f"\nlaunch configuration at {PROBE_SHAPE.describe()}, contiguous q, k, v, on an {limits.name} "
          f"({limits.smem_per_block} B shared memory per block by default, {limits.smem_per_block_optin} B "
          f"opt-in, {limits.sm_count} SMs):")
    print(f"{'version':8s} {'block':>10s} {'threads':>7s} {'grid':>12s} {'dynamic smem':>12s} {'inputs':>10s} "
          f"{'align':>5s}")
    for report in reports:
        print(_format_launch(report))
        failures += report.launch_failed
    disagreements = [report.disagreement for report in reports if report.disagreement]
    for line in disagreements:
        print(f"requirements disagree: {line}")
    failures += len(disagreements)
    return 1 if failures else 0
