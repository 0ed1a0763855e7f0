"""GPT-2 with every backend on the GPU: in float32, logits against the tokens reference's on
its own 512-token sequence, and each backend's greedy 512-token run against its tokens; in
bfloat16 and float16, the end-to-end rule: teacher-forced logits on float32 naive's sequence,
mean error against float32 naive's at most 1.25x the same-dtype naive's."""
from __future__ import annotations

import pytest
import torch

from backends import precision, registry
from gpt2.modes import greedy_generate
from gpt2.tokenizer import PROMPT, load_tokenizer
from gpt2.weights import build_model, resolve
from harness.study import HEADLINE_TOKENS

pytestmark = pytest.mark.gpu

LOGITS_TOL = 1e-3  # max |logit - reference's|: float32 through 12 layers stays near 1e-5
REFERENCE = registry.TOKENS_REFERENCE
OTHERS = [b.name for b in registry.BACKENDS if b.accepts("float32") and b.name != REFERENCE]
# Every backend in each half-precision dtype it takes (naive itself included: its own ratio is 1).
HALF = [(b.name, d) for b in registry.BACKENDS for d in b.dtypes if precision.is_half(d)]



@pytest.fixture(scope="module")
def reference_run():
    model = build_model(resolve(None, "auto"), registry.get(REFERENCE).attention("cuda"), "cuda")
    prompt = load_tokenizer().encode(PROMPT)
    ids = greedy_generate(model, [prompt], HEADLINE_TOKENS)  # (1, 512)
    with torch.inference_mode():
        logits = model(ids, all_positions=True)  # (1, 512, vocab)
    return model, prompt, ids, logits


@pytest.fixture
def model_with(reference_run, version_ops, attention_or_skip):
    """Swap a backend into the shared model for one test, and back."""
    model = reference_run[0]
    reference = model.attention
    yield lambda name: model.set_attention(attention_or_skip(name)) or model
    model.set_attention(reference)


@pytest.mark.parametrize("name", OTHERS)
def test_logits_match_reference(reference_run, model_with, name):
    _, _, ids, reference_logits = reference_run
    model = model_with(name)
    with torch.inference_mode():
        logits = model(ids, all_positions=True)
    diff = (logits - reference_logits).abs()
    worst = diff.max().item()
    position = int(diff.amax(dim=-1).argmax().item())
    assert worst <= LOGITS_TOL, f"{name}: max |logit diff| {worst:.2e} at position {position} (tol {LOGITS_TOL})"


@pytest.mark.parametrize("name", OTHERS)
def test_greedy_tokens_match_reference(reference_run, model_with, name):
    """Same tokens as the reference, or a divergence at a near-tie of its logits (top-2
    gap within the logits tolerance), which is then printed."""
    _, prompt, reference_ids, _ = reference_run
    model = model_with(name)
    ids = greedy_generate(model, [prompt], HEADLINE_TOKENS)
    if torch.equal(ids, reference_ids):
        return
    first = int((ids != reference_ids).nonzero()[0, 1].item())
    model.set_attention(registry.get(REFERENCE).attention("cuda"))
    with torch.inference_mode():
        logits = model(reference_ids[:, :first])[0]  # the reference's logits for the diverging step
    top2 = logits.topk(2).values
    gap = (top2[0] - top2[1]).item()
    print(f"{name}: first divergence at token {first}, {REFERENCE}'s top-2 logit gap {gap:.2e}")
    assert gap <= LOGITS_TOL, (f"{name} diverges from {REFERENCE} at token {first} where the top-2 gap is "
                               f"{gap:.2e}, not a near-tie")


@pytest.fixture(scope="module")
def half_models(reference_run):
    """GPT-2 in each half dtype (the float32 weights cast once), with naive's mean logits error
    on float32 naive's sequence."""
    _, _, ids, reference_logits = reference_run
    models = {}
    for dtype in precision.HALF:
        model = build_model(resolve(None, "auto"), registry.get(REFERENCE).attention("cuda", dtype), "cuda",
                            precision.torch_dtype(dtype))
        with torch.inference_mode():
            naive_error = (model(ids, all_positions=True).float() - reference_logits).abs().mean().item()
        models[dtype] = (model, naive_error)
    return models


@pytest.mark.parametrize("name,dtype", HALF, ids=[f"{n}-{d}" for n, d in HALF])
def test_half_precision_logits_within_the_end_to_end_rule(reference_run, half_models, version_ops,
                                                         attention_or_skip, name, dtype):
    from harness.bench_e2e import LOGITS_FACTOR

    _, _, ids, reference_logits = reference_run
    model, naive_error = half_models[dtype]
    model.set_attention(attention_or_skip(name, dtype))
    registry.get(name).prepare_generation(model, ids.shape[1])
    try:
        with torch.inference_mode():
            error = (model(ids, all_positions=True).float() - reference_logits).abs().mean().item()
    finally:
        model.set_attention(registry.get(REFERENCE).attention("cuda", dtype))
    assert error <= LOGITS_FACTOR * naive_error, (
        f"{name} {dtype}: mean |logit - float32 naive's| {error:.3e}, more than {LOGITS_FACTOR} x "
        f"{REFERENCE}'s {naive_error:.3e}")
