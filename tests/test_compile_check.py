"""Every kernel file compiles with nvcc alone (no GPU, no torch), for sm_90 (our H100/H200)
and sm_75 (the original study's GTX 1660 Super), and ptxas reports its resources."""
import pytest

from harness import registry
from harness.compile_check import compile_version, find_nvcc

NVCC = find_nvcc()


@pytest.mark.skipif(NVCC is None, reason="nvcc not found: the compile check needs the CUDA toolkit")
@pytest.mark.parametrize("arch", ["sm_90", "sm_75"])
@pytest.mark.parametrize("name", [v.name for v in registry.versions()])
def test_compiles_and_reports_resources(name, arch):
    resources = compile_version(NVCC, registry.get(name), arch)
    print(f"{name} {arch}: {resources.registers} registers, {resources.stack_bytes} B stack, "
          f"spills {resources.spill_store_bytes}/{resources.spill_load_bytes} B")
    # A block of up to 1024 threads must fit the 64K-register file: at most 64 per thread.
    assert 0 < resources.registers <= 64, resources
