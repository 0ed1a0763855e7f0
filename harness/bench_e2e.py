"""End-to-end benchmark: GPT-2 greedy generation with every backend at several lengths."""
from __future__ import annotations

import torch
from tqdm import tqdm

from gpt2.generate import greedy_generate, time_generation
from gpt2.model import GPT2
from gpt2.tokenizer import PROMPT, load_tokenizer
from gpt2.weights import build_model, resolve
from harness import environment
from harness.attention import AttentionFn, attention_fn
from harness.registry import Backend, get
from harness.results import e2e_file

TOKEN_COUNTS = [32, 64, 128, 256, 512]
QUICK_TOKEN_COUNTS = [32, 128]
PROFILE_EVERY = 8  # the profiler records one generation step in this many


def attention_gpu_share(model: GPT2, attention: AttentionFn, prompt: list[int], tokens: int) -> float:
    """Share of GPU time spent inside attention over one generation, from torch.profiler.

    The profiler records every PROFILE_EVERY-th step (steps of all lengths, so the
    sample spans the run) and the attention calls are wrapped in a named range.
    """
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    def profiled(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
        with record_function("attention_backend"):
            return attention(q, k, v, num_heads)

    model.set_attention(profiled)
    try:
        # acc_events: keep the events of every recorded cycle, not only the last one.
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     schedule=schedule(wait=PROFILE_EVERY - 2, warmup=1, active=1), acc_events=True) as prof:
            greedy_generate(model, prompt, tokens, on_step=prof.step)
            torch.cuda.synchronize()
    finally:
        model.set_attention(attention)
    events = prof.key_averages()
    total = sum(e.self_device_time_total for e in events)
    inside = sum(e.device_time_total for e in events if e.key == "attention_backend")
    return inside / total if total else float("nan")


def run(backends: list[Backend], token_counts: list[int], *, repeats: int = 3, resume: bool = True,
        profile: bool = True) -> None:
    """Time generation for every backend and length; one CSV row per (backend, length)."""
    provenance = environment.collect()
    results = e2e_file(environment.gpu_slug(provenance["gpu"]))
    done = results.done(provenance) if resume else {}
    prompt = load_tokenizer().encode(PROMPT)
    source, directory = resolve(None, "auto")
    model = build_model(source, directory, attention_fn(get("naive")), "cuda")
    naive_tokens: dict[int, list[int]] = {}
    # naive first: the others' tokens are compared with its tokens.
    order = sorted(backends, key=lambda b: b.name != "naive")
    longest = max(token_counts)
    progress = tqdm(total=len(order) * len(token_counts), desc="end-to-end", unit="run")
    for backend in order:
        base = {"backend": backend.name, "weights": source.describe(), **provenance}
        todo = [n for n in token_counts if (backend.name, str(n)) not in done]
        if backend.unavailable:
            for n in todo:
                results.append({**base, "tokens": n, "status": backend.unavailable})
            progress.update(len(token_counts))
            continue
        if not todo:
            progress.update(len(token_counts))
            continue
        attention = attention_fn(backend)
        model.set_attention(attention)
        greedy_generate(model, prompt, longest)  # warm-up at the longest length
        for n in token_counts:
            progress.update()
            if n not in todo:
                continue
            timing = time_generation(model, prompt, n, repeats=repeats, warmup=0)
            if backend.name == "naive":
                naive_tokens[n] = timing.token_ids
            share = attention_gpu_share(model, attention, prompt, n) if profile and n == longest else None
            results.append({**base, "tokens": n, "status": "ok", "runs": repeats,
                            "seconds_median": timing.median, "seconds_min": min(timing.seconds),
                            "seconds_max": max(timing.seconds), "tokens_per_second": n / timing.median,
                            "peak_memory_bytes": timing.peak_memory_bytes,
                            "same_tokens_as_naive": (timing.token_ids == naive_tokens[n]) if n in naive_tokens
                            else None,
                            "attention_gpu_share": share})
            progress.set_postfix_str(f"{backend.name} N={n}: {timing.median:.3f} s")
    progress.close()
