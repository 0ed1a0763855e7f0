"""Calling a backend's decode op on a batch whose sequences may differ in length.

A row with ragged_lengths (every decode version) takes the whole batch in one call and reads
`lengths` on the device. The PyTorch baselines attend to every row of the cache they are
given (backends/baselines.py): where every sequence has the same length n they get the cache
sliced to n rows (a view, no copy), and where lengths differ one call per sequence on its own
slice. The benchmark and generation only ever have equal lengths, so they pay no loop; the
gate, which is not timed, exercises ragged batches.
"""
from __future__ import annotations

from typing import Sequence

import torch

from backends.registry import Backend
from gpt2.model import DecodeFn


def call_decode(backend: Backend, fn: DecodeFn, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                lengths: torch.Tensor, host_lengths: Sequence[int], num_heads: int) -> torch.Tensor:
    """fn's output (B, C) for q (B, C) against caches (B, S, C) with per-sequence lengths
    (`lengths` on the device, `host_lengths` the same numbers on the host, each 1..S)."""
    if backend.ragged_lengths:
        return fn(q, k_cache, v_cache, lengths, num_heads)
    S = k_cache.shape[1]
    if any(not 1 <= n <= S for n in host_lengths):
        raise ValueError(f"{backend.name}: lengths must lie in 1..{S} for a baseline, got {list(host_lengths)}")
    if len(set(host_lengths)) == 1:
        n = host_lengths[0]
        return fn(q, k_cache[:, :n], v_cache[:, :n], lengths, num_heads)
    rows = [fn(q[b:b + 1], k_cache[b:b + 1, :n], v_cache[b:b + 1, :n], lengths[b:b + 1], num_heads)
            for b, n in enumerate(host_lengths)]  # (1, C) each
    return torch.cat(rows)  # (B, C)
