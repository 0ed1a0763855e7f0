"""GPT-2 forward pass in plain PyTorch; attention is whatever function it is given.

Parameter names follow Hugging Face's GPT2Model (h.0.attn.c_attn.weight, ...) and the
linear layers keep its Conv1D layout (weight is (in, out)), so checkpoints load as is.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from gpt2.config import GPT2Config

# The pluggable attention: fn(q, k, v, num_heads) -> out, with q, k, v (B, T, C) views
# (row stride 3C: the packed qkv projection) and out a new contiguous (B, T, C).
AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]
# The pluggable decode attention (KV-cache generation): fn(q, k_cache, v_cache, lengths,
# num_heads) -> out, with q (B, C) the new token's queries, k_cache and v_cache (B, S, C) views
# of the preallocated cache, lengths (B,) int32 on the device (sequence b attends to its rows
# 0 .. lengths[b]-1) and out a new contiguous (B, C).
DecodeFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]


class Conv1D(nn.Module):
    """y = x W + b with W of shape (in, out), as in the released checkpoints."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.empty(n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], -1)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's GELU (the tanh approximation)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


class SelfAttention(nn.Module):
    def __init__(self, config: GPT2Config, attention: AttentionFn) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = Conv1D(config.n_embd, 3 * config.n_embd)
        self.c_proj = Conv1D(config.n_embd, config.n_embd)
        self.attention = attention

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.c_attn(x)  # (B, T, 3C), packed
        q, k, v = qkv.split(x.shape[-1], dim=-1)  # three (B, T, C) views, row stride 3C
        y = self.attention(q, k, v, self.n_head)  # (B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.c_fc = Conv1D(config.n_embd, 4 * config.n_embd)
        self.c_proj = Conv1D(4 * config.n_embd, config.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(gelu_tanh(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, config: GPT2Config, attention: AttentionFn) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = SelfAttention(config, attention)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """GPT-2 language model; the LM head shares the token embedding (wte)."""

    def __init__(self, config: GPT2Config, attention: AttentionFn) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.h = nn.ModuleList(Block(config, attention) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

    @property
    def attention(self) -> AttentionFn:
        return self.h[0].attn.attention

    def set_attention(self, attention: AttentionFn) -> None:
        for block in self.h:
            block.attn.attention = attention

    def forward(self, ids: torch.Tensor, *, all_positions: bool = False) -> torch.Tensor:
        """ids (B, T) -> logits (B, vocab) at the last position, or (B, T, vocab)."""
        T = ids.shape[1]
        if T > self.config.n_positions:
            raise ValueError(f"sequence of {T} tokens exceeds the model's context of {self.config.n_positions}")
        positions = torch.arange(T, device=ids.device)
        x = self.wte(ids) + self.wpe(positions)  # (B, T, C)
        for block in self.h:
            x = block(x)
        if not all_positions:
            x = x[:, -1]  # (B, C): the head runs on the last position only
        return self.ln_f(x) @ self.wte.weight.T  # (B, vocab) or (B, T, vocab)
