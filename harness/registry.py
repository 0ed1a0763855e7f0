"""The one registry of attention backends: baselines and CUDA versions, one row each.

Everything else (the GPT-2 CLI, builds, correctness gate, benchmarks, plots, README
tables) iterates over these rows; nothing keeps a parallel list of versions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
VERSIONS_DIR = PROJECT_ROOT / "versions"


class UnknownBackendError(ValueError):
    """A backend name that is not in the registry."""


@dataclass(frozen=True)
class Backend:
    """One attention backend.

    name:           what users type (`--backend v05`)
    description:    one line for listings and plots
    kind:           "baseline" (plain PyTorch) or "version" (a CUDA extension)
    folder:         for versions, the folder under versions/ holding attention.cu
    build_flags:    extra nvcc flags for the version's kernel file
    strided_inputs: True if the op accepts row/batch-strided q, k, v (the model then
                    passes the views of its packed qkv projection without copying)
    requires_cuda:  only runs on a CUDA device
    unavailable:    why this backend can never run here (float32 unsupported), or None
    """

    name: str
    description: str
    kind: str
    folder: str | None = None
    build_flags: tuple[str, ...] = ()
    strided_inputs: bool = False
    requires_cuda: bool = True
    unavailable: str | None = None
    sdpa_backend: str | None = field(default=None, repr=False)  # torch SDPBackend member name

    @property
    def is_version(self) -> bool:
        return self.kind == "version"

    @property
    def namespace(self) -> str:
        """The torch op namespace of a version: torch.ops.<namespace>.causal_attention."""
        if not self.is_version:
            raise ValueError(f"{self.name} is a baseline, not a CUDA version")
        return f"flash_{self.name}"

    @property
    def source_dir(self) -> Path:
        if self.folder is None:
            raise ValueError(f"{self.name} has no source folder")
        return VERSIONS_DIR / self.folder

    @property
    def number(self) -> int | None:
        return int(self.name[1:]) if self.is_version else None


def _version(number: int, short_name: str, description: str, *, build_flags: tuple[str, ...] = (),
             strided_inputs: bool = False) -> Backend:
    name = f"v{number:02d}"
    return Backend(name=name, description=description, kind="version",
                   folder=f"{name}_{short_name}", build_flags=build_flags,
                   strided_inputs=strided_inputs)


_FLOAT32_UNSUPPORTED = "not available for float32 (PyTorch's kernel accepts float16/bfloat16 only)"
_FAST_MATH = ("--use_fast_math",)

BACKENDS: tuple[Backend, ...] = (
    Backend("naive", "matmul, masked_fill, softmax, matmul in plain PyTorch", "baseline",
            requires_cuda=False),
    Backend("sdpa-math", "PyTorch SDPA pinned to the math backend", "baseline",
            requires_cuda=False, sdpa_backend="MATH"),
    Backend("sdpa-efficient", "PyTorch SDPA pinned to the memory-efficient backend", "baseline",
            sdpa_backend="EFFICIENT_ATTENTION"),
    Backend("sdpa-flash", "PyTorch SDPA pinned to the FlashAttention backend", "baseline",
            sdpa_backend="FLASH_ATTENTION", unavailable=_FLOAT32_UNSUPPORTED),
    Backend("sdpa-cudnn", "PyTorch SDPA pinned to the cuDNN backend", "baseline",
            sdpa_backend="CUDNN_ATTENTION", unavailable=_FLOAT32_UNSUPPORTED),
    _version(1, "flash_naive", "FlashAttention v1, statistics in global memory, 48x48 tiles"),
    _version(2, "pad_k", "K rows padded by one float in shared memory (no bank conflicts)"),
    _version(3, "tile_32x32", "32x32 thread block, 32x32 tiles"),
    _version(4, "fast_math", "built with --use_fast_math", build_flags=_FAST_MATH),
    _version(5, "warp_shuffle", "softmax statistics by warp shuffles, in registers",
             build_flags=_FAST_MATH),
    _version(6, "templated", "template tile sizes, division hoisted, restrict pointers",
             build_flags=_FAST_MATH),
    _version(7, "float4", "128-bit vectorized global loads and stores", build_flags=_FAST_MATH),
    _version(8, "o_in_smem", "O accumulated in shared memory, written once",
             build_flags=_FAST_MATH),
    _version(9, "regtile_cols", "2 columns of S and 4 of O per thread (16x32 block)",
             build_flags=_FAST_MATH),
    _version(10, "regtile_rows", "2x2 register tile per thread, B_r = 64",
             build_flags=_FAST_MATH),
    _version(11, "strided", "row/batch strides as arguments: no .contiguous() copies",
             build_flags=_FAST_MATH, strided_inputs=True),
)


def names() -> list[str]:
    return [b.name for b in BACKENDS]


def get(name: str) -> Backend:
    for backend in BACKENDS:
        if backend.name == name:
            return backend
    raise UnknownBackendError(f"unknown backend {name!r}; valid backends: {', '.join(names())}")


def versions() -> list[Backend]:
    return [b for b in BACKENDS if b.is_version]


def select(spec: str | None) -> list[Backend]:
    """Backends named in a comma-separated list ("naive,v05"), or all of them for None/"all"."""
    if spec is None or spec.strip() in ("", "all"):
        return list(BACKENDS)
    return [get(part.strip()) for part in spec.split(",") if part.strip()]
