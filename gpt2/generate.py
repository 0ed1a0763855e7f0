"""Greedy generation written into a preallocated id buffer on the device, two ways (gpt2/modes.py
names them): the whole sequence recomputed at each step, or with a KV cache.

Nothing syncs with the host: each step writes the argmax of the last position's logits into
the buffer on the device, and positions are Python ints known from the schedule, so a whole
generation can be captured as one CUDA graph. `on_step(n)` is called after the n-th token
(prompt included) is written in every sequence.
"""
from __future__ import annotations

from typing import Callable, Iterator, Sequence

import torch

from gpt2.model import GPT2

StepCallback = Callable[[int], None]  # called with the number of tokens written so far


def model_device(model: GPT2) -> torch.device:
    return next(model.parameters()).device


def prompt_buffer(prompts: Sequence[Sequence[int]], total_tokens: int, device: torch.device) -> torch.Tensor:
    """A (B, total_tokens) id buffer with the B prompts (of one length) uploaded; the rest is
    written by generation."""
    ids = torch.zeros((len(prompts), total_tokens), dtype=torch.long, device=device)
    ids[:, : len(prompts[0])] = torch.tensor([list(p) for p in prompts], dtype=torch.long)
    return ids


@torch.inference_mode()
def generate_into(model: GPT2, ids: torch.Tensor, prompt_len: int, on_step: StepCallback | None = None) -> None:
    """Fill ids[:, prompt_len:] greedily, one token per step, each step running the whole
    sequence so far (no KV cache) through the prefill op."""
    for t in range(prompt_len, ids.shape[1]):
        logits = model(ids[:, :t])  # (B, vocab)
        ids[:, t] = logits.argmax(dim=-1)
        if on_step is not None:
            on_step(t + 1)


@torch.inference_mode()
def generate_cached_into(model: GPT2, ids: torch.Tensor, prompt_len: int,
                         on_step: StepCallback | None = None) -> None:
    """Fill ids[:, prompt_len:] greedily with a KV cache allocated here (B sequences of up to
    ids.shape[1] positions): the prompts through the prefill op, then each new token through
    the decode op against the cache."""
    B, total = ids.shape
    cache = model.new_cache(B, total)
    logits = model.prefill(ids[:, :prompt_len], cache)  # (B, vocab)
    for t in range(prompt_len, total):
        if t > prompt_len:
            logits = model.decode(ids[:, t - 1], t - 1, cache)  # (B, vocab)
        ids[:, t] = logits.argmax(dim=-1)
        if on_step is not None:
            on_step(t + 1)


@torch.inference_mode()
def recomputed_logits(model: GPT2, ids: torch.Tensor, prompt_len: int) -> Iterator[torch.Tensor]:
    """Teacher-forced on the given ids (B, T): the logits (B, T, vocab) at every position from
    one pass over the whole sequence (prompt_len unused: every position is compared)."""
    yield model(ids, all_positions=True)


@torch.inference_mode()
def cached_logits(model: GPT2, ids: torch.Tensor, prompt_len: int) -> Iterator[torch.Tensor]:
    """Teacher-forced on the given ids (B, T) through the KV-cache path: the prompts' prefill,
    then one decode step per given token; yields the logits (B, 1, vocab) predicting each of
    positions prompt_len .. T-1, one step at a time (never all of them at once)."""
    B, T = ids.shape
    cache = model.new_cache(B, T)
    yield model.prefill(ids[:, :prompt_len], cache)[:, None]
    for p in range(prompt_len, T - 1):
        yield model.decode(ids[:, p], p, cache)[:, None]
