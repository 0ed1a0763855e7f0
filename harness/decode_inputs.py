"""Seeded inputs of the decode op: q (B, C), a K and a V cache (B, S, C) and the lengths.

Two layouts of the caches, both of which every decode version must take:
- "contiguous": q (B, C) and each cache (B, S, C) its own contiguous tensor (the benchmark);
- "packed": the caches are views of one buffer of shape (B, S + 3, 2C + 8), K in its first C
  columns and V in the next C (row stride 2C + 8, batch stride (S + 3)(2C + 8): a slice of a
  preallocated cache), and q is a view of a (B, 3C) projection (batch stride 3C), as GPT-2
  passes the new token's queries. The 8 padding elements keep 16-byte alignment in every dtype.
With poison_past_length, every cached row at or past a sequence's length is NaN in both
caches, and so are the packed buffer's rows past S: a kernel that reads one shows it in its
output.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

CONTIGUOUS, PACKED = "contiguous", "packed"
PACKED_ROW_PAD, PACKED_EXTRA_ROWS = 8, 3  # elements after each packed row; rows past S in the buffer


@dataclass(frozen=True)
class DecodeInputs:
    q: torch.Tensor  # (B, C)
    k_cache: torch.Tensor  # (B, S, C)
    v_cache: torch.Tensor  # (B, S, C)
    lengths: torch.Tensor  # (B,) int32 on the device
    host_lengths: tuple[int, ...]  # the same numbers on the host

    def args(self, num_heads: int) -> tuple:
        """The op's arguments: (q, k_cache, v_cache, lengths, num_heads)."""
        return self.q, self.k_cache, self.v_cache, self.lengths, num_heads


def random_decode_inputs(B: int, H: int, S: int, lengths: Sequence[int], *, seed: int, device: torch.device | str,
                         dtype: torch.dtype = torch.float32, layout: str = CONTIGUOUS,
                         poison_past_length: bool = False) -> DecodeInputs:
    """Values from N(0, 1) drawn in float32 and cast to `dtype` (scores q . k / sqrt(64) of
    standard deviation 1), in `layout`; `lengths` are B ints."""
    if len(lengths) != B:
        raise ValueError(f"{len(lengths)} lengths for a batch of {B}")
    if layout not in (CONTIGUOUS, PACKED):
        raise ValueError(f"layout must be {CONTIGUOUS!r} or {PACKED!r}, got {layout!r}")
    C = H * 64
    generator = torch.Generator(device=device).manual_seed(seed)

    def draw(*size: int) -> torch.Tensor:
        return torch.randn(*size, device=device, generator=generator).to(dtype)

    if layout == CONTIGUOUS:
        q, k, v = draw(B, C), draw(B, S, C), draw(B, S, C)  # (B, C), (B, S, C), (B, S, C)
    else:
        q = draw(B, 3 * C)[:, :C]  # (B, C) view, batch stride 3C
        buffer = draw(B, S + PACKED_EXTRA_ROWS, 2 * C + PACKED_ROW_PAD)  # (B, S + 3, 2C + 8)
        k, v = buffer[:, :S, :C], buffer[:, :S, C:2 * C]  # (B, S, C) views
    if poison_past_length:
        if layout == PACKED:
            buffer[:, S:] = float("nan")  # the rows past the cache: read only by reading past S
        for b, n in enumerate(lengths):
            start = min(max(int(n), 0), S)
            k[b, start:] = float("nan")
            v[b, start:] = float("nan")
    device_lengths = torch.tensor(list(lengths), dtype=torch.int32, device=device)
    return DecodeInputs(q, k, v, device_lengths, tuple(int(n) for n in lengths))
