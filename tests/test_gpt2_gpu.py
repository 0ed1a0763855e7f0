"""GPT-2 with every backend on the GPU: logits against naive's on naive's own 512-token
sequence, and each backend's greedy 512-token run against naive's tokens."""
from __future__ import annotations

import pytest
import torch

from gpt2.generate import greedy_generate
from gpt2.tokenizer import PROMPT, load_tokenizer
from gpt2.weights import build_model, resolve
from harness import registry
from harness.attention import attention_fn

pytestmark = pytest.mark.gpu

TOKENS = 512
LOGITS_TOL = 1e-3  # max |logit - naive's|: float32 through 12 layers stays near 1e-5
RUNNABLE = [b.name for b in registry.BACKENDS if not b.unavailable and b.name != "naive"]


@pytest.fixture(scope="module")
def naive_run():
    source, directory = resolve(None, "auto")
    model = build_model(source, directory, attention_fn(registry.get("naive")), "cuda")
    prompt = load_tokenizer().encode(PROMPT)
    ids = greedy_generate(model, prompt, TOKENS)  # (1, 512)
    with torch.inference_mode():
        logits = model(ids, all_positions=True)  # (1, 512, vocab)
    return model, prompt, ids, logits


@pytest.mark.parametrize("name", RUNNABLE)
def test_logits_match_naive(naive_run, name, version_ops):
    model, _, ids, naive_logits = naive_run
    model.set_attention(attention_fn(registry.get(name)))
    try:
        with torch.inference_mode():
            logits = model(ids, all_positions=True)
    finally:
        model.set_attention(attention_fn(registry.get("naive")))
    diff = (logits - naive_logits).abs()
    worst = diff.max().item()
    position = int(diff.amax(dim=-1).argmax().item())
    assert worst <= LOGITS_TOL, f"{name}: max |logit diff| {worst:.2e} at position {position} (tol {LOGITS_TOL})"


@pytest.mark.parametrize("name", RUNNABLE)
def test_greedy_tokens_match_naive(naive_run, name, version_ops):
    """Same tokens as naive, or a divergence at a near-tie of naive's logits (top-2 gap
    within the logits tolerance), which is then printed."""
    model, prompt, naive_ids, _ = naive_run
    model.set_attention(attention_fn(registry.get(name)))
    try:
        ids = greedy_generate(model, prompt, TOKENS)
    finally:
        model.set_attention(attention_fn(registry.get("naive")))
    if torch.equal(ids, naive_ids):
        return
    first = int((ids != naive_ids).nonzero()[0, 1].item())
    with torch.inference_mode():
        logits = model(naive_ids[:, :first])[0]  # naive's logits for the diverging step
    top2 = logits.topk(2).values
    gap = (top2[0] - top2[1]).item()
    print(f"{name}: first divergence at token {first}, naive's top-2 logit gap {gap:.2e}")
    assert gap <= LOGITS_TOL, (f"{name} diverges from naive at token {first} where naive's top-2 gap is "
                               f"{gap:.2e}, not a near-tie")
