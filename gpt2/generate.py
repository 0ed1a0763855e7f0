"""Greedy generation without a KV cache, and its timing."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

from gpt2.model import GPT2


@torch.inference_mode()
def greedy_generate(model: GPT2, prompt_ids: list[int], total_tokens: int,
                    on_step: Callable[[], None] | None = None) -> torch.Tensor:
    """Exactly `total_tokens` ids (prompt included) as a (1, total_tokens) tensor.

    Each step runs the whole sequence (no KV cache) and takes the argmax of the last
    position's logits; nothing stops at end-of-text, and nothing syncs with the host:
    the new id is written on the device into a preallocated buffer. `on_step` is called
    after each step (the profiler's step counter uses it).
    """
    device = next(model.parameters()).device
    ids = torch.empty((1, total_tokens), dtype=torch.long, device=device)
    ids[0, : len(prompt_ids)] = torch.tensor(prompt_ids, dtype=torch.long)
    for t in range(len(prompt_ids), total_tokens):
        logits = model(ids[:, :t])  # (1, vocab)
        ids[:, t] = logits.argmax(dim=-1)
        if on_step is not None:
            on_step()
    return ids


@dataclass
class GenerationTiming:
    token_ids: list[int]
    seconds: list[float]  # one per timed run
    peak_memory_bytes: int | None  # CUDA only

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_generation(model: GPT2, prompt_ids: list[int], total_tokens: int, *, repeats: int,
                    warmup: int = 1) -> GenerationTiming:
    """Warm up, then time `repeats` full generations with a host clock around device syncs."""
    device = next(model.parameters()).device
    ids = None
    for _ in range(warmup):
        ids = greedy_generate(model, prompt_ids, total_tokens)
    _sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    seconds = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        ids = greedy_generate(model, prompt_ids, total_tokens)
        _sync(device)
        seconds.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    assert ids is not None
    return GenerationTiming(token_ids=ids[0].tolist(), seconds=seconds, peak_memory_bytes=peak)
