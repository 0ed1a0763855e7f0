"""A tiny GPT-2 for CPU tests of generation: two layers, GPT-2's vocabulary (so that the
study's prompt and the seeded prompts' ids embed), weights large enough for attention to
matter."""
from __future__ import annotations

import torch

from gpt2.config import GPT2Config
from gpt2.model import GPT2, AttentionFn, DecodeFn

TINY_CONFIG = GPT2Config(n_layer=2, n_head=2, n_embd=128, n_positions=32)


def tiny_model(attention: AttentionFn, device: torch.device | None = None, dtype: torch.dtype = torch.float32,
               decode: DecodeFn | None = None) -> GPT2:
    model = GPT2(TINY_CONFIG, attention, decode)
    generator = torch.Generator().manual_seed(0)
    for p in model.parameters():
        p.data.normal_(0.0, 0.5, generator=generator)  # large enough for attention to matter
    return model.to(device or "cpu").to(dtype).eval().requires_grad_(False)
