"""Building and loading one CUDA version as a torch extension.

Each version is its own extension: its kernel file plus the torch glue of its op kind
(versions/common/torch_glue.cpp for prefill, decode_glue.cpp for decode), compiled with
ninja into build/<name>/ and rebuilt only when a source or a flag changes. Loading
registers torch.ops.flash_vNN.causal_attention (or flash_dNN.decode_attention) and its
fake kernel.

Target architectures: TORCH_CUDA_ARCH_LIST when it is set ("9.0", "7.5;9.0+PTX"), else
the GPU that is present. We pass the -gencode flags ourselves, so torch's own arch
detection (which fails without a GPU) never runs. A version whose row names an
arch_specific capability is built for that capability's arch-specific target alone
("9.0" builds it for sm_90a, the others for sm_90) and skips the other targets.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from backends.registry import (DECODE, PREFILL, PROJECT_ROOT, VERSIONS_DIR, Capability, KernelVersion, OpKind,
                               arch_digits, capability_text)
from gpt2.model import AttentionFn, DecodeFn

BUILD_ROOT = PROJECT_ROOT / "build"
COMMON_DIR = VERSIONS_DIR / "common"
BASE_CUDA_FLAGS = ("-O3", "-lineinfo", "-std=c++17")
ARCH_LIST_VARIABLE = "TORCH_CUDA_ARCH_LIST"
_ARCH = re.compile(r"^(\d+)\.(\d+)(a?)(\+PTX)?$")


class BuildSetupError(RuntimeError):
    """The versions cannot be built here (no CUDA torch, no toolkit, no target); says what to do."""


@dataclass(frozen=True)
class Arch:
    """One target architecture: compute capability, 'a' (arch-specific) suffix, +PTX."""

    capability: Capability
    arch_specific: bool = False
    ptx: bool = False

    @property
    def digits(self) -> str:
        """'90', '90a', '75': the number nvcc's compute_/sm_ names take."""
        return arch_digits(self.capability, self.arch_specific)

    @property
    def sm_name(self) -> str:
        """'sm_90', 'sm_90a': nvcc's name of the real architecture."""
        return f"sm_{self.digits}"

    def gencode_flags(self) -> list[str]:
        digits = self.digits
        flags = [f"-gencode=arch=compute_{digits},code=sm_{digits}"]
        if self.ptx:
            flags.append(f"-gencode=arch=compute_{digits},code=compute_{digits}")
        return flags


def parse_arch_list(text: str) -> list[Arch]:
    """TORCH_CUDA_ARCH_LIST's numeric form: '9.0', '7.5;9.0', '8.0 9.0a+PTX'."""
    archs = []
    for item in text.replace(" ", ";").split(";"):
        if not item:
            continue
        match = _ARCH.match(item.strip())
        if not match:
            raise BuildSetupError(f"{ARCH_LIST_VARIABLE}: cannot read {item!r}; use compute capabilities "
                                  "such as '9.0' or '7.5;9.0+PTX'")
        archs.append(Arch((int(match[1]), int(match[2])), bool(match[3]), bool(match[4])))
    if not archs:
        raise BuildSetupError(f"{ARCH_LIST_VARIABLE} is set but names no architecture")
    return archs


def target_archs(arch_list: str | None) -> list[Arch]:
    """The architectures to build for: `arch_list` (TORCH_CUDA_ARCH_LIST's value) if given,
    else every visible GPU's."""
    if arch_list:
        return parse_arch_list(arch_list)
    if torch.cuda.is_available():
        capabilities = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
        return [Arch(tuple(c)) for c in capabilities]  # type: ignore[arg-type]
    raise BuildSetupError(f"no CUDA device to build for: set {ARCH_LIST_VARIABLE} to the GPUs you will run "
                          f"on, e.g. {ARCH_LIST_VARIABLE}=9.0 for an H100/H200 (8.0 for an A100, 7.5 for "
                          "Turing)")


def arch_for(version: KernelVersion, arch: Arch) -> Arch:
    """What `version` is built for where `arch` (a capability it runs on) is asked: `arch`
    itself, or for a version built only for an arch-specific target, that target without
    PTX (sm_90a's PTX would run on no other GPU either)."""
    return Arch(arch.capability, arch_specific=True) if version.arch_specific else arch


def archs_for(version: KernelVersion, archs: list[Arch]) -> tuple[list[Arch], str | None]:
    """The architectures this version is built for when `archs` are asked (each once), and
    why the others are skipped."""
    mismatches = {a: version.capability_mismatch(a.capability) for a in archs}
    kept = list(dict.fromkeys(arch_for(version, a) for a, mismatch in mismatches.items() if mismatch is None))
    dropped = [a for a, mismatch in mismatches.items() if mismatch]
    if not dropped:
        return kept, None
    names = ", ".join(capability_text(a.capability) for a in dropped)
    return kept, f"{mismatches[dropped[0]]}; not built for {names}"


def find_cuda_home() -> Path | None:
    """The CUDA toolkit, looked for as torch's builder does: $CUDA_HOME or $CUDA_PATH, the
    nvcc on PATH, /usr/local/cuda."""
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            return Path(os.environ[variable])
    nvcc = shutil.which("nvcc")
    if nvcc:
        return Path(nvcc).parent.parent
    default = Path("/usr/local/cuda")
    return default if default.exists() else None


def find_nvcc() -> Path | None:
    home = find_cuda_home()
    nvcc = home / "bin" / "nvcc" if home else None
    return nvcc if nvcc and nvcc.exists() else None


def check_build_setup() -> None:
    """Raise BuildSetupError unless this torch can build CUDA extensions with a toolkit found."""
    if torch.version.cuda is None:
        raise BuildSetupError(f"this torch ({torch.__version__}) is a CPU build: building the CUDA versions needs "
                              "a CUDA build of torch (the compile check, `python -m harness compile-check`, "
                              "needs only nvcc)")
    from torch.utils import cpp_extension

    if cpp_extension.CUDA_HOME is None or find_cuda_home() is None:
        raise BuildSetupError("CUDA toolkit not found: put nvcc on PATH or set CUDA_HOME")


def build_dir(version: KernelVersion) -> Path:
    return BUILD_ROOT / version.name


def build_and_load(version: KernelVersion, archs: list[Arch], *, verbose: bool = False) -> None:
    """Compile (if needed) and load the version's library for `archs`.

    Raises whatever torch's builder raises on a compiler error, with the compiler's
    output in the message. Waits while another process builds or loads the same version;
    a lock left by one that was killed is removed (backends/build_lock.py).
    """
    from torch.utils import cpp_extension

    from backends.build_lock import build_folder_lock

    out_dir = build_dir(version)
    out_dir.mkdir(parents=True, exist_ok=True)
    # One folder serves every target: torch writes these flags into its build.ninja, and ninja
    # rebuilds when a command changes (sm_90 to sm_90a, say); no stale library is loaded.
    arch_flags = [flag for arch in archs for flag in arch.gencode_flags()]
    with build_folder_lock(out_dir):
        cpp_extension.load(
            name=version.namespace,
            sources=[str(version.source_dir / "attention.cu"), str(COMMON_DIR / version.glue_file)],
            extra_cflags=["-O3", f"-DATTN_NAMESPACE={version.namespace}", *version.glue_defines],
            extra_cuda_cflags=[*BASE_CUDA_FLAGS, *version.build_flags, *version.glue_defines, *arch_flags],
            extra_include_paths=[str(COMMON_DIR)],
            build_directory=str(out_dir),
            is_python_module=False,
            verbose=verbose,
        )


def register_fake(namespace: str, kind: OpKind = PREFILL) -> None:
    """The op's fake (meta) kernel: a new contiguous tensor shaped like q ((B, T, C) for
    prefill, (B, C) for decode)."""
    qualname = f"{namespace}::{kind.op_name}"
    if torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "Meta"):
        return  # already registered in this process

    def fake_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
        torch._check(q.dim() == 3, lambda: f"{qualname}: q must be 3-D (B, T, C)")
        torch._check(q.shape == k.shape and q.shape == v.shape,
                     lambda: f"{qualname}: q, k and v must have the same shape")
        return q.new_empty(q.shape)  # contiguous

    def fake_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lengths: torch.Tensor,
                    num_heads: int) -> torch.Tensor:
        torch._check(q.dim() == 2, lambda: f"{qualname}: q must be 2-D (B, C)")
        torch._check(k_cache.dim() == 3 and k_cache.shape == v_cache.shape,
                     lambda: f"{qualname}: k_cache and v_cache must be 3-D (B, S, C) of one shape")
        return q.new_empty(q.shape)  # (B, C), contiguous

    torch.library.register_fake(qualname, fake_decode if kind == DECODE else fake_prefill)


def load_op(version: KernelVersion, *, verbose: bool = False) -> AttentionFn | DecodeFn:
    """The version's op, built for the visible GPU (or TORCH_CUDA_ARCH_LIST) and loaded."""
    check_build_setup()
    archs, skipped = archs_for(version, target_archs(os.environ.get(ARCH_LIST_VARIABLE)))
    if not archs:
        raise BuildSetupError(f"{version.name}: {skipped}")
    build_and_load(version, archs, verbose=verbose)
    register_fake(version.namespace, version.op_kind)
    return getattr(getattr(torch.ops, version.namespace), version.op_kind.op_name)
