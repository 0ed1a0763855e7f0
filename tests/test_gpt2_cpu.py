"""Our GPT-2 against Hugging Face transformers on a small randomly initialised GPT-2
saved with save_pretrained (CPU, runs in CI)."""
from __future__ import annotations

import pytest
import torch

from backends import registry
from gpt2.modes import greedy_generate
from gpt2.weights import RandomWeights, SnapshotWeights, build_model, resolve

transformers = pytest.importorskip("transformers")

LOGITS_TOL = 1e-4  # float32 through 3 small layers: observed differences are ~1e-6
CPU_BACKENDS = [b.name for b in registry.BACKENDS if not b.requires_cuda and b.accepts("float32")]


@pytest.fixture(scope="module")
def hf_model_dir(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=3, n_head=4, n_embd=256, n_positions=128, vocab_size=50257)
    model = transformers.GPT2LMHeadModel(config).eval()
    directory = tmp_path_factory.mktemp("tiny-gpt2")
    model.save_pretrained(directory, safe_serialization=True)
    return directory, model


def ours(directory, backend: str):
    return build_model(resolve(str(directory)), registry.get(backend).attention("cpu"), "cpu")


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_logits_match_transformers(hf_model_dir, backend):
    directory, hf = hf_model_dir
    ids = torch.randint(0, 50257, (2, 37), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        expected = hf(ids).logits  # (2, 37, vocab)
        got = ours(directory, backend)(ids, all_positions=True)
    diff = (got - expected).abs().max().item()
    assert diff <= LOGITS_TOL, f"{backend}: max |logit diff| {diff:.2e} > {LOGITS_TOL}"


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_last_position_head_matches_full_head(hf_model_dir, backend):
    directory, _ = hf_model_dir
    model = ours(directory, backend)
    ids = torch.randint(0, 50257, (1, 20), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        assert torch.allclose(model(ids), model(ids, all_positions=True)[:, -1], atol=1e-6)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_greedy_continuation_matches_transformers(hf_model_dir, backend):
    directory, hf = hf_model_dir
    prompt = [15496, 11, 314, 1101, 257, 3303, 2746, 11]
    total = 40
    with torch.inference_mode():
        expected = hf.generate(torch.tensor([prompt]), max_new_tokens=total - len(prompt),
                               min_new_tokens=total - len(prompt), do_sample=False, eos_token_id=None,
                               pad_token_id=0)
    got = greedy_generate(ours(directory, backend), [prompt], total)
    assert got.shape == (1, total)
    assert got.tolist() == expected.tolist(), "greedy tokens differ from transformers'"


def test_random_weights_are_seeded():
    """The same seed gives the same weights, another seed others (on a 2-layer model for speed)."""
    from gpt2.config import GPT2Config
    from gpt2.model import GPT2
    from gpt2.weights import _init_random

    def weights(seed: int) -> torch.Tensor:
        model = GPT2(GPT2Config(n_layer=2, n_head=2, n_embd=128), registry.get("naive").attention("cpu"))
        _init_random(model, "cpu", seed)
        return model.h[1].mlp.c_fc.weight

    assert torch.equal(weights(7), weights(7))
    assert not torch.equal(weights(7), weights(8))
    assert RandomWeights("small", seed=7).describe() == "random:small:seed7"


def test_weights_sources_are_typed(hf_model_dir):
    directory, _ = hf_model_dir
    source = resolve(str(directory))
    assert isinstance(source, SnapshotWeights) and source.directory == directory
    assert source.describe() == f"dir:{directory}"
    assert source.config().n_layer == 3
    assert resolve(None, "random", "medium") == RandomWeights("medium")
