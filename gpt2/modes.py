"""Generation modes: how a greedy generation runs the model, as one object that the command
line, the timing code and the end-to-end benchmark receive.

- RECOMPUTE (the original study's): every step runs the whole sequence so far through the
  backend's prefill op; no cache.
- KV_CACHE (as deployments run): the prompts through the prefill op once, their keys and
  values kept in a static cache allocated by the generation, then each new token through the
  decode op against the cache.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import torch

from backends.registry import DECODE, PREFILL, Backend, OpKind, Target
from gpt2 import generate
from gpt2.cache import KVCache
from gpt2.config import GPT2Config
from gpt2.generate import StepCallback, model_device, prompt_buffer
from gpt2.model import GPT2


def _no_cache(config: GPT2Config, batch: int, total_tokens: int, dtype: torch.dtype) -> int:
    return 0


@dataclass(frozen=True, eq=False, repr=False)
class GenerationMode:
    """name:           what the command line takes and result rows carry
    kinds:          the backend ops the mode calls
    step_kind:      the op called at a new length for every new token (what a backend that
                    compiles per length prepares: Backend.prepare_generation)
    generate_into:  fn(model, ids (B, total), prompt_len, on_step) filling ids[:, prompt_len:]
                    greedily (gpt2/generate.py)
    teacher_forced: fn(model, ids (B, T), prompt_len) -> the logits of this mode's path on the
                    given ids, chunk by chunk (B, n, vocab)
    cache_bytes:    fn(config, batch, total_tokens, dtype) -> what one generation's cache takes"""

    name: str
    description: str
    kinds: tuple[OpKind, ...]
    step_kind: OpKind
    generate_into: Callable[[GPT2, torch.Tensor, int, StepCallback | None], None]
    teacher_forced: Callable[[GPT2, torch.Tensor, int], Iterator[torch.Tensor]]
    cache_bytes: Callable[[GPT2Config, int, int, torch.dtype], int] = _no_cache

    def why_unavailable(self, backend: Backend, target: Target, dtype: str) -> str | None:
        """None if `backend` provides every op this mode calls and runs on `target` in `dtype`,
        else why not, in one line."""
        return next((reason for kind in self.kinds if (reason := backend.why_unavailable(target, dtype, kind))),
                    None)

    def attach(self, model: GPT2, backend: Backend, device: torch.device, dtype: str) -> None:
        """Give `model` the backend's ops this mode calls (the others: none)."""
        ops = {kind: backend.op(kind, device, dtype) for kind in self.kinds}
        model.set_attention(ops[PREFILL], ops.get(DECODE))  # type: ignore[arg-type]

    def prepare(self, backend: Backend, model: GPT2, batch: int, total_tokens: int) -> None:
        """Whatever `backend` must do before `model` generates (compile every length), untimed."""
        backend.prepare_generation(model, total_tokens, batch=batch, kind=self.step_kind)

    def __repr__(self) -> str:
        return f"<generation mode {self.name}>"


RECOMPUTE = GenerationMode(
    "recompute", "every step runs the whole sequence so far through the prefill op (no cache)",
    kinds=(PREFILL,), step_kind=PREFILL, generate_into=generate.generate_into,
    teacher_forced=generate.recomputed_logits)
KV_CACHE = GenerationMode(
    "kv-cache", "the prompts through the prefill op once, then each new token through the decode op against a "
                "static KV cache",
    kinds=(PREFILL, DECODE), step_kind=DECODE, generate_into=generate.generate_cached_into,
    teacher_forced=generate.cached_logits, cache_bytes=KVCache.bytes_for)
MODES: tuple[GenerationMode, ...] = (RECOMPUTE, KV_CACHE)


def by_name(name: str) -> GenerationMode:
    for mode in MODES:
        if mode.name == name:
            return mode
    raise ValueError(f"unknown generation mode {name!r}; modes: {', '.join(m.name for m in MODES)}")


def greedy_generate(model: GPT2, prompts: Sequence[Sequence[int]], total_tokens: int,
                    mode: GenerationMode = RECOMPUTE, on_step: StepCallback | None = None) -> torch.Tensor:
    """Exactly total_tokens ids per sequence (prompt included) from B prompts of one length, as
    a (B, total_tokens) tensor, generated in `mode`."""
    ids = prompt_buffer(prompts, total_tokens, model_device(model))
    mode.generate_into(model, ids, len(prompts[0]), on_step)
    return ids
