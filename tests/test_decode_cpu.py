"""The decode op's pieces that run without a GPU: the float64 reference and its rule for
out-of-range lengths, the baselines' decode ops (and the SDPA pitfall they avoid), how a
baseline is called on ragged lengths, the inputs' layouts, the benchmark's shapes and its
reference, and the registry's decode rows."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from backends import precision, registry
from backends.registry import DECODE, PREFILL, Target
from harness.bench_decode import fastest_baseline
from harness.decode_calls import call_decode
from harness.decode_inputs import CONTIGUOUS, PACKED, PACKED_ROW_PAD, random_decode_inputs
from harness.reference import FLOAT32_BOUNDS, compare, reference_decode
from harness.study import DECODE_SHAPES, FULL, RAMP, DecodeShape

HOPPER = Target("cuda", (9, 0))


def loop_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: list[int], H: int) -> torch.Tensor:
    """The same softmax written one head and one row at a time, in float64."""
    B, S, C = k.shape
    d = C // H
    out = torch.zeros(B, C, dtype=torch.float64)
    for b in range(B):
        n = min(max(lengths[b], 0), S)
        for h in range(H):
            cols = slice(h * d, (h + 1) * d)
            if n == 0:
                continue
            scores = [float(q[b, cols].double() @ k[b, j, cols].double()) / math.sqrt(d) for j in range(n)]
            top = max(scores)
            weights = [math.exp(s - top) for s in scores]
            total = sum(weights)
            out[b, cols] = sum(w / total * v[b, j, cols].double() for j, w in enumerate(weights))
    return out


def test_reference_matches_a_row_by_row_softmax_and_clamps_lengths():
    x = random_decode_inputs(4, 2, 9, (9, 3, 0, 40), seed=1, device="cpu")
    ref = reference_decode(x.q, x.k_cache, x.v_cache, x.host_lengths, 2)
    expected = loop_reference(x.q, x.k_cache, x.v_cache, list(x.host_lengths), 2)
    assert torch.allclose(ref, expected, rtol=1e-12, atol=1e-12), (ref - expected).abs().max()
    assert torch.all(ref[2] == 0), "a length of 0 gives a zero row"
    assert torch.equal(ref[3], reference_decode(x.q, x.k_cache, x.v_cache, [9] * 4, 2)[3]), "40 reads as S = 9"


@pytest.mark.parametrize("name", ["naive", "sdpa-math"])
def test_cpu_baselines_match_the_reference_on_ragged_packed_inputs(name):
    backend = registry.get(name)
    x = random_decode_inputs(5, 12, 37, (37, 1, 20, 36, 2), seed=2, device="cpu", layout=PACKED,
                             poison_past_length=True)
    fn = backend.decode_attention("cpu", precision.FLOAT32)
    out = call_decode(backend, fn, x.q, x.k_cache, x.v_cache, x.lengths, x.host_lengths, 12)
    result = compare(out, reference_decode(x.q, x.k_cache, x.v_cache, x.host_lengths, 12), FLOAT32_BOUNDS)
    assert result.ok, f"{name}: {result.describe()}"


def test_a_baseline_given_the_whole_poisoned_cache_shows_the_nan():
    """The check above can fail: a baseline called on the whole cache reads the NaN rows."""
    backend = registry.get("naive")
    x = random_decode_inputs(2, 12, 10, (10, 4), seed=3, device="cpu", poison_past_length=True)
    out = backend.decode_attention("cpu")(x.q, x.k_cache, x.v_cache, x.lengths, 12)
    assert torch.isnan(out[1]).any() and not torch.isnan(out[0]).any()


def test_sdpa_causal_with_one_query_row_sees_key_zero_only():
    """Why the SDPA baselines pass is_causal=False: SDPA aligns its causal mask to the top
    left, so a length-1 causal query attends to key 0 alone, a silent wrong answer."""
    g = torch.Generator().manual_seed(4)
    q, k, v = torch.randn(1, 1, 1, 64, generator=g), torch.randn(1, 1, 9, 64, generator=g), \
        torch.randn(1, 1, 9, 64, generator=g)
    causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(causal, v[:, :, :1]), "SDPA's causal length-1 query no longer sees key 0 only"
    from backends.baselines import sdpa_decode
    from torch.nn.attention import SDPBackend

    out = sdpa_decode(q.view(1, 64), k.view(1, 9, 64), v.view(1, 9, 64), torch.tensor([9], dtype=torch.int32), 1,
                      backend=SDPBackend.MATH)
    ref = reference_decode(q.view(1, 64), k.view(1, 9, 64), v.view(1, 9, 64), [9], 1)
    assert compare(out, ref).ok and not torch.allclose(out, causal.view(1, 64))


def test_call_decode_refuses_lengths_a_baseline_cannot_slice():
    x = random_decode_inputs(2, 12, 5, (5, 0), seed=5, device="cpu")
    backend = registry.get("naive")
    with pytest.raises(ValueError, match="1..5"):
        call_decode(backend, backend.decode_attention("cpu"), x.q, x.k_cache, x.v_cache, x.lengths, x.host_lengths, 12)


def test_packed_inputs_are_strided_views_with_nan_past_each_length():
    x = random_decode_inputs(3, 12, 20, (1, 20, 7), seed=6, device="cpu", dtype=torch.bfloat16, layout=PACKED,
                             poison_past_length=True)
    C = 768
    assert x.q.stride() == (3 * C, 1) and x.k_cache.stride(1) == 2 * C + PACKED_ROW_PAD
    assert x.k_cache.stride(0) == (20 + 3) * (2 * C + PACKED_ROW_PAD)
    assert x.k_cache.data_ptr() % 16 == 0 and x.v_cache.data_ptr() % 16 == 0 and (C * 2) % 16 == 0
    for b, n in enumerate((1, 20, 7)):
        assert torch.isnan(x.k_cache[b, n:]).all() and torch.isnan(x.v_cache[b, n:]).all()
        assert not torch.isnan(x.k_cache[b, :n]).any()
    assert x.lengths.dtype == torch.int32 and x.lengths.tolist() == [1, 20, 7]
    with pytest.raises(ValueError, match="2 lengths for a batch of 3"):
        random_decode_inputs(3, 12, 20, (1, 2), seed=6, device="cpu")
    assert random_decode_inputs(1, 1, 2, (2,), seed=6, device="cpu", layout=CONTIGUOUS).k_cache.is_contiguous()


def test_decode_shapes_and_their_bytes():
    ramp = DecodeShape(8, 12, 16384, RAMP)
    assert ramp.host_lengths() == [512 * (b + 1) for b in range(8)]
    assert ramp.bytes_read(2) == 2 * sum(ramp.host_lengths()) * 768 * 2
    assert DecodeShape(2, 12, 100).host_lengths() == [100, 100]
    with pytest.raises(ValueError, match="lengths must be"):
        DecodeShape(1, 12, 10, "ragged")
    grid = [s for s in DECODE_SHAPES if s.lengths == FULL]
    assert len(grid) == 20 and {s.B for s in grid} == {1, 8, 32, 64, 128} and {s.S for s in grid} == {256, 1024, 4096, 16384}


def test_the_decode_reference_is_the_fastest_baseline():
    assert fastest_baseline({"sdpa-cudnn": 9.0, "d01": 3.0, "naive": 20.0, "sdpa-flash": 8.5}) == ("sdpa-flash", 8.5)
    assert fastest_baseline({"d01": 3.0, "sdpa-math": None}) is None


def test_registry_decode_rows():
    decode = registry.decode_versions()
    assert [v.name for v in decode] == [f"d{i:02d}" for i in range(1, len(decode) + 1)]
    for v in decode:
        assert v.provides(DECODE) and not v.provides(PREFILL) and v.ragged_lengths and v.dtypes == precision.EVERY
        text = (v.source_dir / "attention.cu").read_text()
        assert "torch/" not in text and "ATen/" not in text and '#include "decode_launch.h"' in text, v.name
        assert (v.source_dir / "README.md").is_file(), v.name
        assert v.parent is None or registry.get(v.parent).provides(DECODE), v.name
    assert "provides no prefill op" in decode[0].why_unavailable(HOPPER, "float32", PREFILL)
    assert all(b.provides(DECODE) and not b.ragged_lengths for b in registry.BACKENDS
               if not b.is_version and not b.composite)
    assert [b.name for b in registry.providing(registry.BACKENDS, DECODE) if b.is_version] == [v.name for v in decode]


def test_the_study_pair_takes_each_tracks_last_version():
    pair = registry.get("study")
    assert pair.composite and pair.provides(PREFILL) and pair.provides(DECODE)
    last_decode = registry.decode_versions()[-1].name
    float32_prefill = [v for v in registry.versions() if v.accepts("float32")][-1].name
    assert pair.describe_parts("float32") == f"{float32_prefill} + {last_decode}"
    half_prefill = [v for v in registry.versions() if v.accepts("bfloat16")][-1].name
    assert pair.describe_parts("bfloat16") == f"{half_prefill} + {last_decode}"
    assert pair.why_unavailable(HOPPER, "float32") is None
    assert "needs a CUDA device" in pair.why_unavailable(Target("cpu"), "float32")
    assert pair not in registry.providing(registry.BACKENDS, PREFILL)
    assert pair in registry.providing(registry.BACKENDS, DECODE, composites=True)


class StandInTimer:
    """DeviceTimer's interface on the CPU: calls fn once and reports a fixed time per backend."""

    times = {"naive": 30.0, "sdpa-math": 20.0}

    def __init__(self, device: torch.device) -> None:
        self.calls: list[str] = []

    def time(self, fn, plan=None):
        from harness.device_timing import CallTiming, Repetitions

        out = fn()
        assert torch.isfinite(out).all(), "the benchmark's inputs must give finite outputs"
        us = StandInTimer.times[StandInTimer.current]
        return CallTiming(Repetitions(1, 1), (us,), (us + 5.0,), None)


def test_decode_benchmark_rows_reference_and_resume(monkeypatch, tmp_path):
    """The benchmark's bookkeeping with a stand-in timer: a row per backend and full shape,
    none for a baseline at a ragged shape, the reference the fastest baseline of the run, the
    rate against the copy's, and a rerun measures nothing again."""
    from harness import bench_decode
    from harness.device_timing import Bandwidth
    from harness.results import DECODE_TIMES
    from harness.study import FULL, RAMP

    monkeypatch.setattr(bench_decode, "DeviceTimer", StandInTimer)
    monkeypatch.setattr(bench_decode, "measure_bandwidth", lambda device: Bandwidth(gbps=1000.0, bytes_copied=1))
    timed: list[str] = []

    def in_rounds(names, rounds, time_one):
        out = {}
        for name in names:
            StandInTimer.current = name
            timed.append(name)
            out[name] = time_one(name, None)
        return out

    monkeypatch.setattr(bench_decode, "in_rounds", in_rounds)
    shapes = [DecodeShape(2, 12, 64), DecodeShape(2, 12, 64, RAMP)]
    path = bench_decode.run(registry.select("naive,sdpa-math,d01"), ["float32"], shapes, results_dir=tmp_path,
                            device=torch.device("cpu"), rounds=1)
    rows = {(r.backend, r.lengths): r for r in DECODE_TIMES.read(path).rows}
    assert set(rows) == {("naive", FULL), ("sdpa-math", FULL), ("d01", FULL), ("d01", RAMP)}
    assert "needs a CUDA device" in rows["d01", FULL].status  # the CPU cannot run it: a row says why
    naive, math_ = rows["naive", FULL], rows["sdpa-math", FULL]
    assert naive.reference == math_.reference == "sdpa-math" and naive.ratio_to_reference == pytest.approx(1.5)
    assert naive.bytes_read == 2 * 2 * 64 * 768 * 4
    assert naive.gbps == pytest.approx(naive.bytes_read / 30e-6 / 1e9)
    assert naive.fraction_of_hbm == pytest.approx(naive.gbps / 1000.0)
    assert timed == ["naive", "sdpa-math"]
    bench_decode.run(registry.select("naive,sdpa-math,d01"), ["float32"], shapes, results_dir=tmp_path,
                     device=torch.device("cpu"), rounds=1)
    assert timed == ["naive", "sdpa-math"] and len(DECODE_TIMES.read(path).rows) == 4, "a rerun measured again"


class _StubDecodeVersion:
    """A decode version for the sanitizer workload on the CPU: float64's answer rounded to the
    dtype (within the rounding bound), or one that ignores the lengths and reads the NaN past them."""

    def __init__(self, wrong: bool) -> None:
        self.name, self.dtypes, self.wrong = ("wrong" if wrong else "stub"), ("float32", "bfloat16"), wrong

    def decode_attention(self, device, dtype):
        def op(q, k_cache, v_cache, lengths, num_heads):  # (B, C), (B, S, C), (B, S, C), (B,) -> (B, C)
            used = [k_cache.shape[1]] * len(lengths) if self.wrong else lengths.tolist()
            return reference_decode(q, k_cache, v_cache, used, num_heads).to(q.dtype)
        return op


@pytest.mark.parametrize("wrong", [False, True], ids=["right", "wrong"])
def test_the_sanitizer_workload_checks_decode_versions_on_the_gate_cases(monkeypatch, capsys, wrong):
    """compute-sanitizer's workload (python -m harness sanitize-workload) runs a decode version on
    every decode gate case against float64, and fails on a wrong output."""
    from harness.decode_gate import GATE_CASES
    from harness.sanitize import run_decode_workload

    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    status = run_decode_workload([_StubDecodeVersion(wrong)], torch.device("cpu"), ["float32", "bfloat16"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 * len(GATE_CASES), lines
    assert status == (1 if wrong else 0)
    ragged = [line for line in lines if "ragged" in line]  # cases whose lengths stop short of S
    assert ragged and all(("WRONG" in line) == wrong for line in ragged), lines
    assert wrong or not any("WRONG" in line for line in lines), lines
