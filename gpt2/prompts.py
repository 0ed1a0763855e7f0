"""The prompts of a batched generation: B rows of P token ids.

Row 0 begins with the study's prompt, "Hello, I'm a language model," (8 tokens); where P is
longer, the rest of row 0 is seeded random token ids, and so is every other row, each from
its own fixed seed (PROMPT_SEED + row). The rows therefore differ, so that a kernel that mixed
sequences up would change the tokens, and they are the same on every machine and in every
run. One row of 8 tokens is exactly the study's prompt; fewer than 8 tokens are its first P.
"""
from __future__ import annotations

import functools

import torch

from gpt2.tokenizer import END_OF_TEXT, PROMPT, load_tokenizer

PROMPT_SEED = 2024  # row b's random ids come from torch.Generator().manual_seed(PROMPT_SEED + b)
STUDY_PROMPT_TOKENS = 8  # len(study_prompt_ids()), known without loading the tokenizer


@functools.cache
def study_prompt_ids() -> tuple[int, ...]:
    """The study's prompt as GPT-2's token ids (the tokenizer loaded once per process)."""
    return tuple(load_tokenizer().encode(PROMPT))


def random_ids(count: int, seed: int) -> tuple[int, ...]:
    """`count` token ids drawn uniformly from GPT-2's byte-pair ranks (never <|endoftext|>)."""
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randint(0, END_OF_TEXT, (count,), generator=generator).tolist())


def study_prompts(batch: int, prompt_tokens: int) -> tuple[tuple[int, ...], ...]:
    """`batch` prompts of `prompt_tokens` ids each (see the module's docstring)."""
    if batch < 1 or prompt_tokens < 1:
        raise ValueError(f"a batch needs at least one prompt of at least one token, got {batch} x {prompt_tokens}")
    study = study_prompt_ids()[:prompt_tokens]
    first = study + random_ids(prompt_tokens - len(study), PROMPT_SEED)
    return (first, *(random_ids(prompt_tokens, PROMPT_SEED + row) for row in range(1, batch)))
