"""Turning a registry row into an attention function with the op's signature."""
from __future__ import annotations

import functools
from typing import Callable

import torch

from harness import baselines
from harness.registry import Backend

AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]


class BackendUnavailableError(RuntimeError):
    """The backend cannot run here (float32 unsupported, or no CUDA device)."""


def check_runnable(backend: Backend, device: torch.device | str) -> None:
    """Raise BackendUnavailableError with a clear reason if `backend` cannot run on `device`."""
    if backend.unavailable:
        raise BackendUnavailableError(f"{backend.name}: {backend.unavailable}")
    device_type = torch.device(device).type
    if backend.requires_cuda and device_type != "cuda":
        raise BackendUnavailableError(f"{backend.name} needs a CUDA device (asked to run on {device_type})")
    if device_type == "cuda" and not torch.cuda.is_available():
        raise BackendUnavailableError(f"{backend.name}: no CUDA device is available")


def attention_fn(backend: Backend, *, verbose_build: bool = False) -> AttentionFn:
    """The backend as fn(q, k, v, num_heads) -> (B, T, C), taking any (B, T, C) views.

    Versions that need contiguous inputs get .contiguous() copies (free when the input
    already is contiguous); version 11 gets the views themselves.
    """
    if backend.unavailable:
        raise BackendUnavailableError(f"{backend.name}: {backend.unavailable}")
    if backend.sdpa_backend is not None:
        return functools.partial(baselines.sdpa_attention, backend=backend.sdpa_backend)
    if backend.name == "naive":
        return baselines.naive_attention
    if not backend.is_version:
        raise ValueError(f"no implementation is known for backend {backend.name}")

    from harness.extension import load_op

    op = load_op(backend, verbose=verbose_build)
    if backend.strided_inputs:
        return op

    def contiguous_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
        return op(q.contiguous(), k.contiguous(), v.contiguous(), num_heads)

    return contiguous_op
