"""GPT-2 forward pass in plain PyTorch; attention is whatever function it is given.

Parameter names follow Hugging Face's GPT2Model (h.0.attn.c_attn.weight, ...) and the
linear layers keep its Conv1D layout (weight is (in, out)), so checkpoints load as is.
"""
from __future__ import annotations

import functools
import math
from typing import Callable

import torch
from torch import nn

from gpt2.cache import KVCache, LayerCache
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
    """Causal self-attention three ways: over a whole sequence (recompute), over a prompt whose
    keys and values are kept (prefill), and for one new token per sequence against them (decode)."""

    def __init__(self, config: GPT2Config, attention: AttentionFn, decode: DecodeFn | None = None) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = Conv1D(config.n_embd, 3 * config.n_embd)
        self.c_proj = Conv1D(config.n_embd, config.n_embd)
        self.attention = attention
        self.decode_attention = decode

    def _qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        qkv = self.c_attn(x)  # (B, T, 3C), packed
        return qkv.split(x.shape[-1], dim=-1)  # three (B, T, C) views, row stride 3C

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x)
        y = self.attention(q, k, v, self.n_head)  # (B, T, C)
        return self.c_proj(y)

    def prefill(self, x: torch.Tensor, cache: LayerCache) -> torch.Tensor:
        """x (B, P, C), a prompt: the prefill op over it, its keys and values copied into cache
        rows 0 .. P-1."""
        q, k, v = self._qkv(x)
        P = x.shape[1]
        cache.k[:, :P].copy_(k)  # (B, P, C)
        cache.v[:, :P].copy_(v)
        return self.c_proj(self.attention(q, k, v, self.n_head))  # (B, P, C)

    def decode(self, x: torch.Tensor, cache: LayerCache, position: int) -> torch.Tensor:
        """x (B, 1, C), each sequence's token at `position`: its key and value written into cache
        row `position`, then the decode op against the cache sliced to rows 0 .. position (a
        view), with cache.lengths holding position + 1."""
        if self.decode_attention is None:
            raise ValueError("the model has no decode attention: give it one with set_attention(prefill, decode)")
        q, k, v = self._qkv(x)  # (B, 1, C) views
        cache.k[:, position].copy_(k[:, 0])  # (B, C)
        cache.v[:, position].copy_(v[:, 0])
        rows = position + 1
        y = self.decode_attention(q[:, 0], cache.k[:, :rows], cache.v[:, :rows], cache.lengths, self.n_head)  # (B, C)
        return self.c_proj(y[:, None])  # (B, 1, C)


class MLP(nn.Module):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.c_fc = Conv1D(config.n_embd, 4 * config.n_embd)
        self.c_proj = Conv1D(4 * config.n_embd, config.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(gelu_tanh(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, config: GPT2Config, attention: AttentionFn, decode: DecodeFn | None = None) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = SelfAttention(config, attention, decode)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, attend: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
        """attend: the attention sublayer's way (self.attn.prefill or .decode with their cache),
        by default self.attn over the whole sequence."""
        x = x + (attend or self.attn)(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """GPT-2 language model; the LM head shares the token embedding (wte).

    forward() runs a whole sequence (recompute mode); prefill() and decode() run generation
    with a KV cache: the prompt through the prefill op, then one token per sequence at a time
    through the decode op.
    """

    def __init__(self, config: GPT2Config, attention: AttentionFn, decode: DecodeFn | None = None) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.h = nn.ModuleList(Block(config, attention, decode) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

    @property
    def attention(self) -> AttentionFn:
        return self.h[0].attn.attention

    @property
    def decode_attention(self) -> DecodeFn | None:
        return self.h[0].attn.decode_attention

    def set_attention(self, attention: AttentionFn, decode: DecodeFn | None = None) -> None:
        """The prefill op every layer uses, and the decode op (None: no KV-cache generation)."""
        for block in self.h:
            block.attn.attention = attention
            block.attn.decode_attention = decode

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln_f(x) @ self.wte.weight.T  # (..., C) -> (..., vocab)

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
        return self._head(x)  # (B, vocab) or (B, T, vocab)

    def new_cache(self, batch: int, max_tokens: int) -> KVCache:
        """An empty KV cache for `batch` sequences of up to max_tokens, on the model's device
        and in its dtype."""
        weight = self.wte.weight
        return KVCache.allocate(self.config, batch, max_tokens, weight.device, weight.dtype)

    def prefill(self, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """ids (B, P), the prompts: every layer's keys and values into cache rows 0 .. P-1;
        returns the logits (B, vocab) at the last position."""
        P = ids.shape[1]
        if P > cache.k[0].shape[1]:
            raise ValueError(f"a prompt of {P} tokens does not fit a cache of {cache.k[0].shape[1]} positions")
        x = self.wte(ids) + self.wpe(torch.arange(P, device=ids.device))  # (B, P, C)
        for index, block in enumerate(self.h):
            x = block(x, functools.partial(block.attn.prefill, cache=cache.layer(index)))
        return self._head(x[:, -1])  # (B, vocab)

    def decode(self, tokens: torch.Tensor, position: int, cache: KVCache) -> torch.Tensor:
        """tokens (B,), each sequence's token at `position` (a Python int, so that nothing waits
        for the device), whose cache rows 0 .. position-1 are filled: its keys and values into
        row `position` of every layer, cache.lengths set to position + 1 on the device; returns
        the logits (B, vocab) for the next position."""
        if not 0 <= position < cache.k[0].shape[1]:
            raise ValueError(f"position {position} lies outside a cache of {cache.k[0].shape[1]} positions")
        cache.lengths.fill_(position + 1)
        x = (self.wte(tokens) + self.wpe.weight[position])[:, None]  # (B, 1, C)
        for index, block in enumerate(self.h):
            x = block(x, functools.partial(block.attn.decode, cache=cache.layer(index), position=position))
        return self._head(x[:, 0])  # (B, vocab)
