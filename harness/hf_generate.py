"""Hugging Face transformers' own generate() with its KV cache, on the study's weights: what a
user runs without this study. Not an attention backend (it replaces the whole model), so it is
not in the registry; the end-to-end benchmark writes its rows under NAME, in KV-cache mode.

The model is transformers' GPT2LMHeadModel sharing our model's tensors (the same parameter
names under "transformer.", the same Conv1D layout; no copy), attention by SDPA, greedy, exactly
N new tokens per sequence (min_new_tokens = max_new_tokens = N, no end-of-text token, so nothing
stops early and every run does the same work), the same B prompts. Its cache grows in Python
step by step, so a generation is not one CUDA graph: eager time only (host included), timed as
gpt2/timing.py times an eager run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from gpt2.model import GPT2
from gpt2.modes import KV_CACHE
from gpt2.timing import GenerationPlan, PeakMemory, Spread, clock_for, rows_of
from gpt2.tokenizer import END_OF_TEXT

if TYPE_CHECKING:
    from transformers import PreTrainedModel

NAME = "transformers-generate"
DESCRIPTION = "Hugging Face transformers' GPT2LMHeadModel.generate() with its own KV cache, SDPA attention"
NOT_ONE_GRAPH = ("eager only: transformers' generate() grows its dynamic KV cache from Python, so the generation "
                 "is not one CUDA graph")
ATTENTION = "sdpa"  # transformers' attn_implementation
MODE = KV_CACHE  # the generation mode its rows carry: it runs with its own KV cache


def why_unavailable() -> str | None:
    """None if transformers imports, else why its row is not measured."""
    try:
        import transformers  # noqa: F401
    except ImportError as err:
        return f"transformers is not installed ({err})"
    return None


def hf_model(model: GPT2) -> PreTrainedModel:
    """transformers' GPT-2 LM holding `model`'s own tensors (device and dtype as they are)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    c = model.config
    config = GPT2Config(n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd, n_positions=c.n_positions,
                        vocab_size=c.vocab_size, layer_norm_epsilon=c.layer_norm_epsilon,
                        activation_function="gelu_new")  # GPT-2's tanh GELU, as gpt2/model.py
    config._attn_implementation = ATTENTION
    with torch.device("meta"):  # no memory, no initialisation: every tensor is ours
        hf = GPT2LMHeadModel(config)
    state = {f"transformer.{name}": tensor for name, tensor in model.state_dict().items()}
    missing, unexpected = hf.load_state_dict(state, strict=False, assign=True)
    if set(missing) != {"lm_head.weight"} or unexpected:  # the head is tied to wte below
        raise ValueError(f"transformers' GPT-2 does not take our weights: missing {missing}, unexpected {unexpected}")
    hf.tie_weights()
    return hf.eval().requires_grad_(False)


def generate(hf: PreTrainedModel, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """(B, P) prompts -> (B, P + new_tokens) ids, greedy, exactly new_tokens more per sequence."""
    from transformers import GenerationConfig

    config = GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                              eos_token_id=None, bos_token_id=None, pad_token_id=END_OF_TEXT)
    with torch.inference_mode():
        return hf.generate(prompts, attention_mask=torch.ones_like(prompts), generation_config=config)


@dataclass(frozen=True)
class HFTiming:
    seconds: Spread  # the whole generation, one run
    peak_memory_bytes: int | None  # CUDA only: weights plus the generation's own allocations
    token_ids: tuple[tuple[int, ...], ...]  # one row per sequence, prompt included


def time_generate(hf: PreTrainedModel, plan: GenerationPlan, *, warmup_tokens: int) -> HFTiming:
    """One warm-up generation of warmup_tokens new tokens, then one timed generation of the plan's
    length (one: generate() is timed as a whole, with no clock at the steps between)."""
    if len(plan.token_counts) != 1:
        raise ValueError(f"transformers' generate() is timed at one length per plan, got {plan.token_counts}")
    device = hf.device
    prompts = torch.tensor(plan.prompts, dtype=torch.long, device=device)  # (B, P)
    generate(hf, prompts, warmup_tokens)
    clock, memory = clock_for(device), PeakMemory(hf, device)
    clock.finish()
    memory.start()
    start = clock.mark()
    ids = generate(hf, prompts, plan.generated(plan.total))
    end = clock.mark()
    clock.finish()
    return HFTiming(Spread((clock.seconds(start, end),)), memory.read(), rows_of(ids))
