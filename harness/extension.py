"""Building and loading one CUDA version as a torch extension.

Each version is its own extension: its kernel file plus the shared torch glue
(versions/common/torch_glue.cpp), compiled with ninja into build/<name>/ and rebuilt
only when a source changes. Loading registers torch.ops.flash_vNN.causal_attention
and its fake kernel.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import torch

from harness.registry import PROJECT_ROOT, VERSIONS_DIR, Backend

BUILD_ROOT = PROJECT_ROOT / "build"
COMMON_DIR = VERSIONS_DIR / "common"
GLUE_SOURCE = COMMON_DIR / "torch_glue.cpp"
BASE_CUDA_FLAGS = ("-O3", "-lineinfo", "-std=c++17")

AttentionOp = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]


def build_dir(backend: Backend) -> Path:
    return BUILD_ROOT / backend.name


def build_and_load(backend: Backend, *, verbose: bool = False) -> str:
    """Compile (if needed) and load the version's library; returns the .so path.

    Raises whatever torch's builder raises on a compiler error, with the compiler's
    output in the message.
    """
    from torch.utils import cpp_extension

    out_dir = build_dir(backend)
    out_dir.mkdir(parents=True, exist_ok=True)
    return cpp_extension.load(
        name=backend.namespace,
        sources=[str(backend.source_dir / "attention.cu"), str(GLUE_SOURCE)],
        extra_cflags=["-O3", f"-DATTN_NAMESPACE={backend.namespace}"],
        extra_cuda_cflags=[*BASE_CUDA_FLAGS, *backend.build_flags],
        extra_include_paths=[str(COMMON_DIR)],
        build_directory=str(out_dir),
        is_python_module=False,
        verbose=verbose,
    )


def register_fake(namespace: str) -> None:
    """The op's fake (meta) kernel: a new contiguous (B, T, C) tensor like q."""
    qualname = f"{namespace}::causal_attention"
    if torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "Meta"):
        return  # already registered in this process

    def fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
        torch._check(q.dim() == 3, lambda: f"{qualname}: q must be 3-D (B, T, C)")
        torch._check(q.shape == k.shape and q.shape == v.shape,
                     lambda: f"{qualname}: q, k and v must have the same shape")
        return q.new_empty(q.shape)  # contiguous

    torch.library.register_fake(qualname, fake)


def load_op(backend: Backend, *, verbose: bool = False) -> AttentionOp:
    """The version's op, built and loaded on first use."""
    build_and_load(backend, verbose=verbose)
    register_fake(backend.namespace)
    return getattr(torch.ops, backend.namespace).causal_attention


def set_build_environment() -> None:
    """Target the GPU that is present unless the user chose architectures themselves."""
    if "TORCH_CUDA_ARCH_LIST" not in os.environ and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
