"""KV-cache generation on the CPU with a tiny GPT-2 (tests/tiny_gpt2.py): the recompute mode's
tokens and logits, rows of a batch independent, the cache allocated by each generation, the
batch's prompts."""
from __future__ import annotations

import pytest
import torch

from backends import registry
from gpt2 import cache as cache_module
from gpt2.modes import KV_CACHE, RECOMPUTE, greedy_generate
from gpt2.prompts import STUDY_PROMPT_TOKENS, study_prompts
from gpt2.tokenizer import PROMPT, load_tokenizer
from tests.tiny_gpt2 import TINY_CONFIG, tiny_model

NEW_TOKENS = 6
LOGITS_RTOL = 1e-5  # float32: the two paths differ only in the order of their sums


def model_with(name: str):
    backend = registry.get(name)
    return tiny_model(backend.attention("cpu"), decode=backend.decode_attention("cpu"))


@pytest.fixture(scope="module")
def naive_model():
    return model_with("naive")


@pytest.mark.parametrize("prompt_tokens", [8, 5])
@pytest.mark.parametrize("name", ["naive", "sdpa-math"])
def test_kv_cache_gives_the_recompute_tokens(name, prompt_tokens):
    model = model_with(name)
    prompts = study_prompts(2, prompt_tokens)
    total = prompt_tokens + NEW_TOKENS
    recomputed = greedy_generate(model, prompts, total, RECOMPUTE)
    cached = greedy_generate(model, prompts, total, KV_CACHE)
    assert cached.shape == (2, total) and cached[:, :prompt_tokens].tolist() == [list(p) for p in prompts]
    assert cached.tolist() == recomputed.tolist()
    assert len(set(cached[0, prompt_tokens:].tolist())) > 1, "a constant continuation would test little"


def test_teacher_forced_logits_of_the_two_modes_agree(naive_model):
    prompt_tokens = 5
    ids = greedy_generate(naive_model, study_prompts(2, prompt_tokens), prompt_tokens + NEW_TOKENS, RECOMPUTE)
    (recomputed,) = RECOMPUTE.teacher_forced(naive_model, ids, prompt_tokens)  # (B, T, vocab), every position
    cached = torch.cat(list(KV_CACHE.teacher_forced(naive_model, ids, prompt_tokens)), dim=1)  # (B, T - P, vocab)
    expected = recomputed[:, prompt_tokens - 1:-1]  # the logits predicting positions P .. T-1
    assert cached.shape == expected.shape == (2, NEW_TOKENS, TINY_CONFIG.vocab_size)
    scale = expected.abs().max().item()
    worst = (cached - expected).abs().max().item()
    assert worst <= LOGITS_RTOL * scale, f"max |kv-cache - recompute| {worst:.2e} (logits up to {scale:.1f})"


def test_rows_of_a_batch_are_independent(naive_model):
    prompts = study_prompts(3, 6)
    together = greedy_generate(naive_model, prompts, 6 + NEW_TOKENS, KV_CACHE)
    for row, prompt in enumerate(prompts):
        alone = greedy_generate(naive_model, [prompt], 6 + NEW_TOKENS, KV_CACHE)
        assert together[row].tolist() == alone[0].tolist(), f"row {row} depends on the other rows"


def test_the_cache_is_allocated_by_each_generation_and_its_bytes_counted(naive_model, monkeypatch):
    allocated: list[int] = []
    allocate = cache_module.KVCache.allocate.__func__

    def counted(cls, *args, **kwargs):
        cache = allocate(cls, *args, **kwargs)
        allocated.append(cache.nbytes)
        return cache

    monkeypatch.setattr(cache_module.KVCache, "allocate", classmethod(counted))
    prompts, total = study_prompts(2, 4), 4 + 3
    greedy_generate(naive_model, prompts, total, RECOMPUTE)
    assert allocated == [], "recomputing keeps no cache"
    for _ in range(2):
        greedy_generate(naive_model, prompts, total, KV_CACHE)
    c = TINY_CONFIG
    expected = 2 * c.n_layer * 2 * total * c.n_embd * 4 + 2 * 4  # K and V per layer in float32, int32 lengths
    assert allocated == [expected, expected], "one cache per generation, of (B, total, C) per layer"
    assert KV_CACHE.cache_bytes(c, 2, total, torch.float32) == expected
    assert RECOMPUTE.cache_bytes(c, 2, total, torch.float32) == 0
    assert KV_CACHE.cache_bytes(c, 2, total, torch.bfloat16) == (expected - 8) // 2 + 8


def test_a_model_without_a_decode_op_refuses_kv_cache_generation():
    model = tiny_model(registry.get("naive").attention("cpu"))
    with pytest.raises(ValueError, match="no decode attention"):
        greedy_generate(model, study_prompts(1, 4), 6, KV_CACHE)


def test_cache_positions_beyond_the_context_are_refused(naive_model):
    with pytest.raises(ValueError, match="context of 32"):
        greedy_generate(naive_model, study_prompts(1, 4), TINY_CONFIG.n_positions + 1, KV_CACHE)


def test_the_prompts_of_a_batch():
    study = tuple(load_tokenizer().encode(PROMPT))
    assert len(study) == STUDY_PROMPT_TOKENS
    assert study_prompts(1, 8) == (study,), "one row of 8 tokens is the study's prompt"
    assert study_prompts(1, 3) == (study[:3],)
    prompts = study_prompts(4, 12)
    assert len(prompts) == 4 and all(len(p) == 12 for p in prompts)
    assert prompts[0][:8] == study and len(set(prompts)) == 4, "rows must differ"
    assert study_prompts(4, 12) == prompts, "seeded: the same in every run"
    assert study_prompts(2, 12) == prompts[:2], "a row does not depend on the batch size"
    assert all(0 <= t < TINY_CONFIG.vocab_size - 1 for p in prompts for t in p)
    with pytest.raises(ValueError):
        study_prompts(0, 8)
