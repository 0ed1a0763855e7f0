"""Greedy generation without a KV cache, written into a preallocated buffer on the device."""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from gpt2.model import GPT2

StepCallback = Callable[[int], None]  # called with the number of tokens written so far


def model_device(model: GPT2) -> torch.device:
    return next(model.parameters()).device


def prompt_buffer(prompt_ids: Sequence[int], total_tokens: int, device: torch.device) -> torch.Tensor:
    """A (1, total_tokens) id buffer with the prompt uploaded (the rest is written by generation)."""
    ids = torch.zeros((1, total_tokens), dtype=torch.long, device=device)
    ids[0, : len(prompt_ids)] = torch.tensor(list(prompt_ids), dtype=torch.long)
    return ids


@torch.inference_mode()
def generate_into(model: GPT2, ids: torch.Tensor, prompt_len: int, on_step: StepCallback | None = None) -> None:
    """Fill ids[:, prompt_len:] greedily, one token per step.

    Each step runs the whole sequence so far (no KV cache) and writes the argmax of the
    last position's logits into the buffer on the device: nothing syncs with the host,
    so the loop can be captured as one CUDA graph. `on_step(n)` is called after the
    n-th token (prompt included) is written.
    """
    for t in range(prompt_len, ids.shape[1]):
        logits = model(ids[:, :t])  # (1, vocab)
        ids[:, t] = logits.argmax(dim=-1)
        if on_step is not None:
            on_step(t + 1)


def greedy_generate(model: GPT2, prompt_ids: Sequence[int], total_tokens: int,
                    on_step: StepCallback | None = None) -> torch.Tensor:
    """Exactly `total_tokens` ids (prompt included) as a (1, total_tokens) tensor."""
    ids = prompt_buffer(prompt_ids, total_tokens, model_device(model))
    generate_into(model, ids, len(prompt_ids), on_step)
    return ids
