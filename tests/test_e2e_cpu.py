"""The end-to-end sweep's logic on a CPU with a tiny GPT-2: timing every length from one
generation, interrupting and resuming, and comparing tokens with the reference's from
the CSV (the CPU path is eager only and says so on each row)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from backends import registry
from backends.baselines import naive_attention
from backends.registry import NaiveBaseline
from gpt2.modes import greedy_generate
from gpt2.timing import GenerationPlan, time_eager
from harness import bench_e2e
from harness.results import E2E
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
        bench_e2e.run(backends, ["float32"], COUNTS, source=TINY, results_dir=tmp_path, device=cpu)
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
    bench_e2e.run(backends, ["float32"], COUNTS, source=TINY, results_dir=tmp_path, device=cpu)
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
    bench_e2e.run(backends, ["float32", "bfloat16"], COUNTS, source=TINY, results_dir=tmp_path, device=cpu)
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
