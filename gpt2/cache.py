"""The static KV cache of one generation: per layer, K and V of every sequence's positions.

Allocated by the generation that uses it (so that the allocator's peak during a generation
includes it) and never zeroed: prefill writes rows 0 .. P-1, and each new token writes its
row before any attention reads it. `lengths` holds how many rows each sequence attends to,
on the device, written by the generation (no host synchronisation).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gpt2.config import GPT2Config

LENGTHS_DTYPE = torch.int32  # the decode op's contract: lengths (B,) int32 on the device


@dataclass(frozen=True)
class LayerCache:
    """One layer's view of the cache: k and v (B, S_max, C), lengths (B,) shared by all layers."""

    k: torch.Tensor
    v: torch.Tensor
    lengths: torch.Tensor


@dataclass(frozen=True)
class KVCache:
    k: tuple[torch.Tensor, ...]  # per layer, (B, S_max, C) in the model's dtype
    v: tuple[torch.Tensor, ...]  # per layer, (B, S_max, C)
    lengths: torch.Tensor  # (B,) int32

    @classmethod
    def allocate(cls, config: GPT2Config, batch: int, max_tokens: int, device: torch.device,
                 dtype: torch.dtype) -> "KVCache":
        """Room for `batch` sequences of up to `max_tokens` positions (prompt included)."""
        if not 1 <= max_tokens <= config.n_positions:
            raise ValueError(f"a cache of {max_tokens} positions does not fit the model's context of "
                             f"{config.n_positions}")
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        shape = (batch, max_tokens, config.n_embd)

        def layers() -> tuple[torch.Tensor, ...]:
            return tuple(torch.empty(shape, device=device, dtype=dtype) for _ in range(config.n_layer))

        return cls(layers(), layers(), torch.empty(batch, device=device, dtype=LENGTHS_DTYPE))

    @staticmethod
    def bytes_for(config: GPT2Config, batch: int, max_tokens: int, dtype: torch.dtype) -> int:
        """What allocate() takes: K and V of every layer, and the lengths."""
        element = torch.empty((), dtype=dtype).element_size()
        lengths = batch * torch.empty((), dtype=LENGTHS_DTYPE).element_size()
        return 2 * config.n_layer * batch * max_tokens * config.n_embd * element + lengths

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.k, *self.v, self.lengths))

    def layer(self, index: int) -> LayerCache:
        return LayerCache(self.k[index], self.v[index], self.lengths)
