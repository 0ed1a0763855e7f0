"""The flex-attention baseline: torch.nn.attention.flex_attention with a causal block mask,
compiled by torch.compile into a Triton kernel, in full float32 precision.

Precision: in float32, Inductor's flex template multiplies with `tl.dot(...,
input_precision=FLOAT32_PRECISION)`, whose default follows
torch.backends.cuda.matmul.fp32_precision (or torch.get_float32_matmul_precision()) and
is 'tf32' unless those say 'ieee'/'highest'. We pass FLOAT32_PRECISION='ieee' in
kernel_options, which takes precedence over that default, so no TF32 is used whatever
the process-wide settings are (torch/_inductor/kernel/flex/flex_attention.py,
get_float32_precision and kernel_options.setdefault).

Compilation: one compiled function per device with dynamic shapes (one compilation
covers every B and T, apart from torch's specialisation of sizes 0 and 1), so the gate
and the kernel benchmark do not compile once per shape. Block masks depend on T only
(B and H broadcast) and are cached per (T, device).
"""
from __future__ import annotations

import functools
from typing import Callable

import torch

from backends.baselines import merge_heads, split_heads

KERNEL_OPTIONS = {"FLOAT32_PRECISION": "'ieee'"}  # a Triton template constant, quoted
RECOMPILE_LIMIT = 16  # dynamic shapes need a few compilations; more would mean a bug


def causal(batch: torch.Tensor, head: torch.Tensor, q_index: torch.Tensor, kv_index: torch.Tensor) -> torch.Tensor:
    """flex-attention mask_mod: a query sees the keys at or before its position."""
    return q_index >= kv_index


class FlexAttention:
    """fn(q, k, v, num_heads) -> (B, T, C) through flex_attention on one device."""

    def __init__(self, device: torch.device, *, compiled: bool = True) -> None:
        from torch.nn.attention.flex_attention import flex_attention

        self.device = device
        self.compiled = compiled
        self._flex: Callable = torch.compile(flex_attention, dynamic=True) if compiled else flex_attention
        self._masks: dict[int, object] = {}

    def block_mask(self, T: int):
        """The causal BlockMask for sequence length T (built once per T)."""
        mask = self._masks.get(T)
        if mask is None:
            from torch.nn.attention.flex_attention import create_block_mask

            mask = create_block_mask(causal, B=None, H=None, Q_LEN=T, KV_LEN=T, device=self.device)
            self._masks[T] = mask
        return mask

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
        qh, kh, vh = (split_heads(t, num_heads) for t in (q, k, v))  # (B, H, T, d) views
        mask = self.block_mask(q.shape[1])
        if not self.compiled:
            out = self._flex(qh, kh, vh, block_mask=mask, kernel_options=KERNEL_OPTIONS)
            return merge_heads(out)
        # A recompilation past the limit must fail loudly rather than fall back to eager
        # (an unfused implementation that would be timed as if it were the compiled kernel).
        with torch._dynamo.config.patch(_loud_recompile_limit()):
            out = self._flex(qh, kh, vh, block_mask=mask, kernel_options=KERNEL_OPTIONS)  # (B, H, T, d)
        return merge_heads(out)  # (B, T, C)


def _loud_recompile_limit() -> dict[str, object]:
    """Dynamo settings (by their torch 2.6+ names, older aliases where those are missing)."""
    config = torch._dynamo.config
    limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    loud = "fail_on_recompile_limit_hit" if hasattr(config, "fail_on_recompile_limit_hit") \
        else "fail_on_cache_limit_hit"
    return {limit: RECOMPILE_LIMIT, loud: True}


@functools.cache
def flex_attention_for(device: torch.device) -> FlexAttention:
    """The compiled flex-attention of `device`, shared by every caller in the process."""
    return FlexAttention(device)
