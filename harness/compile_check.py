"""Compile each version's kernel file with nvcc alone (no GPU, no torch) and report
registers, shared memory, stack and spill bytes from ptxas."""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.registry import Backend
from harness.extension import BASE_CUDA_FLAGS, COMMON_DIR

DEFAULT_ARCHS = ("sm_90", "sm_75")  # Hopper (our GPU) and Turing (the original GTX 1660 Super)
_REGISTERS = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_STACK_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


@dataclass(frozen=True)
class KernelResources:
    name: str
    arch: str
    registers: int
    static_smem_bytes: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.exists() else None


def compile_version(nvcc: str, backend: Backend, arch: str) -> KernelResources:
    """Compile to an object file and parse ptxas's report; raises RuntimeError with the
    compiler's output on failure."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [nvcc, f"-arch={arch}", "-c", str(backend.source_dir / "attention.cu"), "-o",
               str(Path(tmp) / "attention.o"), f"-I{COMMON_DIR}", "-Xptxas", "-v",
               *BASE_CUDA_FLAGS, *backend.build_flags]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc failed for {backend.name} ({arch}):\n{output}")
    # The kernel's own report follows its "Compiling entry function" line.
    kernel_part = output[output.find("Compiling entry function"):]
    registers = _REGISTERS.search(kernel_part)
    stack = _STACK_SPILLS.search(kernel_part)
    if not registers or not stack:
        raise RuntimeError(f"could not read ptxas's report for {backend.name} ({arch}):\n{output}")
    smem = _SMEM.search(kernel_part)
    return KernelResources(backend.name, arch, int(registers.group(1)), int(smem.group(1)) if smem else 0,
                           int(stack.group(1)), int(stack.group(2)), int(stack.group(3)))


def run_compile_check(backends: list[Backend], archs: list[str] | None) -> int:
    nvcc = find_nvcc()
    if nvcc is None:
        print("compile-check skipped: nvcc not found (install the CUDA toolkit or put nvcc on PATH)")
        return 0
    failures = 0
    print(f"{'version':8s} {'arch':6s} {'registers':>9s} {'static smem':>11s} {'stack':>6s} {'spills (st/ld)':>15s}")
    for backend in (b for b in backends if b.is_version):
        for arch in archs or DEFAULT_ARCHS:
            try:
                r = compile_version(nvcc, backend, arch)
            except RuntimeError as err:
                print(err)
                failures += 1
                continue
            print(f"{r.name:8s} {r.arch:6s} {r.registers:9d} {r.static_smem_bytes:11d} {r.stack_bytes:6d} "
                  f"{r.spill_store_bytes:>7d}/{r.spill_load_bytes:<7d}")
    return 1 if failures else 0
