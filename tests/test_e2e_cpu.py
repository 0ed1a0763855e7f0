"""The end-to-end sweep's logic on a CPU with a tiny GPT-2: timing every length from one
generation, interrupting and resuming, and comparing tokens with the reference's from
the CSV (the CPU path is eager only and says so on each row)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from backends import registry
from backends.baselines import naive_attention, naive_decode
from backends.registry import NaiveBaseline
from gpt2.modes import KV_CACHE, RECOMPUTE, greedy_generate
from gpt2.timing import GenerationPlan, time_eager
from harness import bench_e2e, hf_generate
from harness.results import E2E
from harness.study import KV_BATCHES, KV_NEW_TOKENS, KV_PROMPT_TOKENS, QUICK_TOKEN_COUNTS, TOKEN_COUNTS
from tests.tiny_gpt2 import TINY_CONFIG, tiny_model

PROMPT = (15496, 11, 314, 1101, 257, 3303, 2746, 11)
COUNTS = (10, 12, 13)


TINY = bench_e2e.ModelSource(tiny_model, "tiny:test", TINY_CONFIG)


@dataclass(frozen=True, kw_only=True)
class BrokenAttention(NaiveBaseline):
    """A test row whose attention ignores the keys: its tokens must differ from naive's."""

    def _load(self, device):
        return lambda q, k, v, num_heads: naive_attention(q, q, v, num_heads)


BROKEN = BrokenAttention(name="broken", description="ignores k", requires_cuda=False)


def test_eager_timing_gives_every_length_from_one_generation():
    model = tiny_model(registry.get("naive").attention("cpu"))
    plan = GenerationPlan((PROMPT,), COUNTS)
    timing = time_eager(model, plan, runs=2)
    assert timing.token_ids == (tuple(greedy_generate(model, [PROMPT], COUNTS[-1])[0].tolist()),)
    for shorter, longer in zip(COUNTS, COUNTS[1:]):
        assert all(a < b for a, b in zip(timing.seconds[shorter].values, timing.seconds[longer].values))
    assert timing.peak_memory_bytes is None  # CPU


def test_plan_refuses_lengths_within_the_prompt():
    with pytest.raises(ValueError, match="exceed the prompt"):
        GenerationPlan((PROMPT,), (8, 12))
    with pytest.raises(ValueError, match="ascending"):
        GenerationPlan((PROMPT,), (12, 10))


def test_interrupted_sweep_resumes_and_still_compares_tokens(tmp_path, monkeypatch):
    backends = [registry.get("naive"), registry.get("sdpa-math"), BROKEN, registry.get("v01")]
    calls: list[int] = []
    real = bench_e2e.time_eager

    def counted(model, plan, **kwargs):
        calls.append(1)
        if interrupt_at and len(calls) == interrupt_at:
            raise KeyboardInterrupt  # Ctrl-C while timing the second backend
        return real(model, plan, **kwargs)

    monkeypatch.setattr(bench_e2e, "time_eager", counted)
    cpu = torch.device("cpu")
    interrupt_at = 2
    with pytest.raises(KeyboardInterrupt):
        bench_e2e.run(backends, ["float32"], [bench_e2e.recompute_plan(COUNTS)], source=TINY, results_dir=tmp_path,
                      device=cpu)
    path = next(tmp_path.glob("*/e2e.csv"))
    # naive first, then the dtype's kernel reference (added although not asked for, so that the
    # README's ratios have it in the same run): on a CPU it cannot run, and its rows say so.
    reference = registry.kernel_reference("float32")
    stored = E2E.read(path).rows
    assert {(r.backend, r.dtype, r.tokens) for r in stored} == {
        (name, "float32", n) for name in ("naive", reference) for n in COUNTS}
    assert all(r.status != "ok" for r in stored if r.backend == reference)

    calls.clear()
    interrupt_at = 0
    bench_e2e.run(backends, ["float32"], [bench_e2e.recompute_plan(COUNTS)], source=TINY, results_dir=tmp_path,
                      device=cpu)
    assert len(calls) == 2, "the resumed sweep measures only what is missing (sdpa-math, broken)"
    rows = {(r.backend, r.tokens): r for r in E2E.read(path).rows if r.dtype == "float32"}
    assert len(rows) == (len(backends) + 1) * len(COUNTS)  # and the kernel reference
    model = tiny_model(registry.get("naive").attention("cpu"))
    for n in COUNTS:
        naive, math, broken = rows[("naive", n)], rows[("sdpa-math", n)], rows[("broken", n)]
        assert naive.same_tokens_as_naive is True and math.same_tokens_as_naive is True
        assert math.tokens_sha256 == naive.tokens_sha256
        model.set_attention(BROKEN.attention("cpu"))
        broken_ids = greedy_generate(model, [PROMPT], n)[0].tolist()
        model.set_attention(registry.get("naive").attention("cpu"))
        naive_ids = greedy_generate(model, [PROMPT], n)[0].tolist()
        assert broken_ids != naive_ids, "the test's broken backend should change the tokens"
        assert broken.same_tokens_as_naive is False
        for row in (naive, math, broken):
            assert row.status == "ok" and row.notes == bench_e2e.EAGER_ONLY_ON_CPU, row
            assert row.seconds_eager_min <= row.seconds_eager_median <= row.seconds_eager_max
            assert row.seconds_gpu_median is None and row.tokens_per_second is None
            assert (row.n_layer, row.n_head, row.n_embd, row.prompt_tokens) == (2, 2, 128, len(PROMPT))
        assert "needs a CUDA device" in rows[("v01", n)].status


def test_half_precision_rows_report_agreement_and_logits_error_and_the_check_can_fail(tmp_path):
    """bfloat16 on a CPU: naive in bfloat16 is the rule's yardstick (its own check passes), a
    backend that ignores the keys fails it; float32 naive is the logits reference itself."""
    backends = [registry.get("naive"), BROKEN]
    cpu = torch.device("cpu")
    bench_e2e.run(backends, ["float32", "bfloat16"], [bench_e2e.recompute_plan(COUNTS)], source=TINY,
                  results_dir=tmp_path, device=cpu)
    path = next(tmp_path.glob("*/e2e.csv"))
    rows = {(r.backend, r.dtype, r.tokens): r for r in E2E.read(path).rows}
    n = COUNTS[-1]
    reference = rows[("naive", "float32", n)]
    assert reference.logits_max_abs_err == 0.0 and reference.accuracy_check is True
    naive = rows[("naive", "bfloat16", n)]
    assert naive.logits_mean_abs_err > 0.0, "bfloat16 logits equal float32's: the comparison is void"
    assert naive.accuracy_check is True and naive.token_agreement == 1.0
    broken = rows[("broken", "bfloat16", n)]
    assert broken.logits_mean_abs_err > bench_e2e.LOGITS_FACTOR * naive.logits_mean_abs_err, broken
    assert broken.accuracy_check is False
    assert 0.0 <= broken.token_agreement < 1.0
    assert rows[("broken", "float32", n)].accuracy_check is False  # float32's rule: exact tokens


@dataclass(frozen=True, kw_only=True)
class BrokenDecode(NaiveBaseline):
    """A test row whose decode op ignores the cached keys: its KV-cache tokens must differ."""

    def _load_decode(self, device):
        return lambda q, k_cache, v_cache, lengths, num_heads: naive_decode(q, v_cache, v_cache, lengths, num_heads)


BROKEN_DECODE = BrokenDecode(name="broken-decode", description="decode ignores k", requires_cuda=False)
KV_PLANS = bench_e2e.kv_cache_plans((1, 2), (8,), 4)


def test_both_modes_write_rows_with_mode_and_batch_and_resume(tmp_path, monkeypatch):
    """Recompute over the rows with a prefill op, KV cache over those with both ops (the
    composite study row included, unavailable here); each row keyed by mode, batch and prompt;
    a resumed sweep measures only what is missing."""
    backends = [registry.get("naive"), registry.get("sdpa-math"), BROKEN_DECODE, registry.get("v01"),
                registry.get("study")]
    plans = [bench_e2e.recompute_plan(COUNTS[:1]), *KV_PLANS]
    calls: list[tuple[str, int]] = []
    real = bench_e2e.time_eager

    def counted(model, plan, **kwargs):
        calls.append((plan.mode.name, plan.batch))
        if len(calls) == interrupt_at:
            raise KeyboardInterrupt  # Ctrl-C in the second KV-cache plan
        return real(model, plan, **kwargs)

    monkeypatch.setattr(bench_e2e, "time_eager", counted)
    cpu = torch.device("cpu")
    interrupt_at = 7  # recompute: naive, sdpa-math, broken-decode; B=1: the same three; B=2: naive
    with pytest.raises(KeyboardInterrupt):
        bench_e2e.run(backends, ["float32"], plans, source=TINY, results_dir=tmp_path, device=cpu)
    calls.clear()
    interrupt_at = 0
    path = bench_e2e.run(backends, ["float32"], plans, source=TINY, results_dir=tmp_path, device=cpu)
    assert calls == [("kv-cache", 2)] * 3, "the resumed sweep measures only the second KV-cache plan"
    rows = {(r.backend, r.mode, r.batch): r for r in E2E.read(path).rows}
    reference = registry.kernel_reference("float32")
    assert set(rows) == {*((name, "recompute", 1) for name in ("naive", "sdpa-math", "broken-decode", "v01",
                                                                  reference)),
                         *((name, "kv-cache", b) for name in ("naive", "sdpa-math", "broken-decode", reference,
                                                              "study") for b in (1, 2))}
    for b in (1, 2):
        naive, math, broken = (rows[(name, "kv-cache", b)] for name in ("naive", "sdpa-math", "broken-decode"))
        assert (naive.prompt_tokens, naive.tokens, naive.status) == (8, 12, "ok")
        assert naive.same_tokens_as_naive and naive.logits_max_abs_err == 0.0 and naive.accuracy_check
        assert math.same_tokens_as_naive and math.tokens_sha256 == naive.tokens_sha256
        assert broken.same_tokens_as_naive is False and broken.accuracy_check is False
        assert broken.logits_mean_abs_err > 0
        assert "needs a CUDA device" in rows[("study", "kv-cache", b)].status
    assert rows[("broken-decode", "recompute", 1)].same_tokens_as_naive, "recomputing never calls the decode op"
    assert rows[("naive", "kv-cache", 2)].tokens_sha256 != rows[("naive", "kv-cache", 1)].tokens_sha256
    recomputed = greedy_generate(tiny_model(registry.get("naive").attention("cpu")), [PROMPT], 12)
    assert bench_e2e.token_digest(recomputed.tolist()) == rows[("naive", "kv-cache", 1)].tokens_sha256


def test_the_transformers_row_generates_naive_kv_cache_tokens(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    cpu = torch.device("cpu")
    path = bench_e2e.run([registry.get("naive")], ["float32"], KV_PLANS[1:], source=TINY, results_dir=tmp_path,
                         device=cpu, transformers=True)
    rows = {r.backend: r for r in E2E.read(path).rows}
    hf, naive = rows[hf_generate.NAME], rows["naive"]
    assert (hf.status, hf.mode, hf.batch, hf.tokens) == ("ok", "kv-cache", 2, 12), hf
    assert hf.tokens_sha256 == naive.tokens_sha256 and hf.same_tokens_as_naive and hf.accuracy_check, hf
    assert hf.notes == hf_generate.NOT_ONE_GRAPH and hf.seconds_eager_median > 0 and hf.seconds_gpu_median is None
    assert hf.logits_mean_abs_err is None and hf.token_agreement == 1.0

    monkeypatch.setattr(hf_generate, "why_unavailable", lambda: "transformers is not installed (test)")
    (row,) = bench_e2e.Sweep(TINY, cpu, tmp_path / "none", resume=False).transformers_rows("float32", KV_PLANS[1])
    assert row.status == "transformers is not installed (test)" and row.seconds_eager_median is None


def test_the_study_plans():
    full = bench_e2e.study_plans([RECOMPUTE, KV_CACHE])
    assert [(p.mode, p.batch, p.prompt_len, p.token_counts) for p in full] == [
        (RECOMPUTE, 1, 8, TOKEN_COUNTS),
        *((KV_CACHE, b, prompt, (prompt + KV_NEW_TOKENS,)) for prompt in KV_PROMPT_TOKENS for b in KV_BATCHES)]
    assert (1, 8, 512) == (min(KV_BATCHES), min(KV_PROMPT_TOKENS), max(KV_PROMPT_TOKENS))
    assert [p.mode for p in bench_e2e.study_plans([KV_CACHE], quick=True)] == [KV_CACHE] * 2
    assert bench_e2e.study_plans([RECOMPUTE], quick=True)[0].token_counts == QUICK_TOKEN_COUNTS
    assert bench_e2e.recompute_plan(COUNTS).prompts == (PROMPT,), "the original study's prompt"


def test_half_precision_kv_cache_rows_follow_the_same_rule(tmp_path):
    """bfloat16 with a KV cache, B=2: logits teacher-forced through prefill and decode steps
    against float32 naive's on the same path, held to 1.25x the bfloat16 naive's error."""
    path = bench_e2e.run([registry.get("naive"), BROKEN_DECODE], ["float32", "bfloat16"], KV_PLANS[1:], source=TINY,
                         results_dir=tmp_path, device=torch.device("cpu"))
    rows = {(r.backend, r.dtype): r for r in E2E.read(path).rows}
    naive, broken = rows[("naive", "bfloat16")], rows[("broken-decode", "bfloat16")]
    assert rows[("naive", "float32")].logits_max_abs_err == 0.0
    assert naive.logits_mean_abs_err > 0.0 and naive.accuracy_check is True and naive.batch == 2
    assert broken.logits_mean_abs_err > bench_e2e.LOGITS_FACTOR * naive.logits_mean_abs_err, broken
    assert broken.accuracy_check is False and broken.token_agreement < 1.0
