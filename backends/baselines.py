"""The plain-PyTorch attention baselines, with the op's signature (q, k, v, num_heads)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, T, C) -> (B, H, T, d), a view."""
    B, T, C = x.shape
    return x.view(B, T, num_heads, C // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d) -> contiguous (B, T, C)."""
    B, H, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d)


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + causal mask) v, written out as the original study did."""
    qh, kh, vh = (split_heads(t, num_heads) for t in (q, k, v))  # (B, H, T, d) each
    T, d = qh.shape[-2], qh.shape[-1]
    scores = qh @ kh.transpose(-2, -1)  # (B, H, T, T)
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).triu_(1)  # True above the diagonal
    scores = scores.masked_fill(causal, float("-inf"))
    weights = torch.softmax(scores / math.sqrt(d), dim=-1)  # (B, H, T, T)
    return merge_heads(weights @ vh)  # (B, T, C)


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int,
                   *, backend: SDPBackend) -> torch.Tensor:
    """torch's scaled_dot_product_attention pinned to one backend (no silent fallback)."""
    qh, kh, vh = (split_heads(t, num_heads) for t in (q, k, v))  # (B, H, T, d) each
    with sdpa_kernel(backend):
        out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)  # (B, H, T, d)
    return merge_heads(out)


# -- decode: one query row per sequence against a KV cache ------------------------------
# The baselines attend to every row of the cache they are given (lengths unused): the
# harness passes the cache sliced to the sequences' common length (a view), and calls them
# once per sequence where lengths differ (harness/decode_calls.py). Their registry rows say
# so (ragged_lengths=False).

def naive_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lengths: torch.Tensor,
                 num_heads: int) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v for one query row per sequence, written out; no mask."""
    B, C = q.shape
    qh = q.view(B, num_heads, 1, C // num_heads)  # (B, H, 1, d)
    kh, vh = (split_heads(t, num_heads) for t in (k_cache, v_cache))  # (B, H, S, d) views
    scores = qh @ kh.transpose(-2, -1)  # (B, H, 1, S)
    weights = torch.softmax(scores / math.sqrt(qh.shape[-1]), dim=-1)  # (B, H, 1, S)
    return (weights @ vh).reshape(B, C)  # (B, H, 1, d) -> (B, C)


def sdpa_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lengths: torch.Tensor,
                num_heads: int, *, backend: SDPBackend) -> torch.Tensor:
    """SDPA pinned to one backend with a length-1 query, no mask and is_causal=False: SDPA
    aligns a causal mask to the top left, so a causal length-1 query would see key 0 only."""
    B, C = q.shape
    qh = q.view(B, num_heads, 1, C // num_heads)  # (B, H, 1, d)
    kh, vh = (split_heads(t, num_heads) for t in (k_cache, v_cache))  # (B, H, S, d) views
    with sdpa_kernel(backend):
        out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=False)  # (B, H, 1, d)
    return out.reshape(B, C)
