"""CUDA graphs on the GPU: every backend replays a captured call to its eager output bit
for bit, the captured generation replays to the eager tokens, and the benchmarks write
complete rows."""
from __future__ import annotations

import pytest
import torch

from backends import precision, registry
from gpt2.config import GPT2Config
from gpt2.model import GPT2
from gpt2.modes import KV_CACHE
from gpt2.prompts import study_prompts
from gpt2.timing import GenerationPlan, external_events_supported, time_eager, time_graph
from gpt2.tokenizer import PROMPT, load_tokenizer
from harness import bench_e2e, bench_kernels
from harness.device_timing import DeviceTimer
from harness.kernel_plan import KernelPlan
from harness.reference import compare, random_qkv, reference_attention
from harness.results import E2E, KERNELS
from harness.study import GATE_SHAPES, Shape

pytestmark = pytest.mark.gpu

# Every backend in each of its dtypes.
RUNNABLE = [(b.name, d) for b in registry.BACKENDS for d in b.dtypes]
RUNNABLE_IDS = [f"{n}-{d}" for n, d in RUNNABLE]
SHAPES = [Shape(1, 12, 65), Shape(2, 12, 512)]



@pytest.mark.parametrize("shape", SHAPES, ids=[s.label() for s in SHAPES])
@pytest.mark.parametrize("name,dtype", RUNNABLE, ids=RUNNABLE_IDS)
def test_captured_call_replays_to_the_eager_output(version_ops, attention_or_skip, name, dtype, shape):
    fn = attention_or_skip(name, dtype)
    q, k, v = random_qkv(shape, seed=shape.T, device="cuda", dtype=precision.torch_dtype(dtype))
    eager = fn(q, k, v, shape.H).clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn(q, k, v, shape.H)  # warm-up on the capture stream
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        captured = fn(q, k, v, shape.H)
    captured.fill_(float("nan"))  # the replay must write every element
    graph.replay()
    torch.cuda.synchronize()
    differ = (captured != eager).sum().item()
    assert differ == 0, f"{name} {dtype} {shape.describe()}: {differ} elements of the replay differ from the eager call"


TINY_CONFIG = GPT2Config(n_layer=2, n_head=12, n_embd=768, n_positions=128)


def tiny_model(attention, dtype: torch.dtype = torch.float32) -> GPT2:
    with torch.device("cuda"):
        model = GPT2(TINY_CONFIG, attention)
    torch.manual_seed(0)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.02)
    return model.to(dtype).eval().requires_grad_(False)


@pytest.mark.parametrize("name,dtype", [(n, d) for n, d in RUNNABLE if not registry.get(n).end_to_end],
                         ids=[f"{n}-{d}" for n, d in RUNNABLE if not registry.get(n).end_to_end])
def test_generation_graph_replays_to_the_eager_tokens(version_ops, attention_or_skip, name, dtype):
    model = tiny_model(attention_or_skip(name, dtype), precision.torch_dtype(dtype))
    registry.get(name).prepare_generation(model, 40)
    plan = GenerationPlan((tuple(load_tokenizer().encode(PROMPT)),), (16, 24, 40))
    eager = time_eager(model, plan, runs=1)
    graph = time_graph(model, plan, replays=2)
    assert graph.token_ids == eager.token_ids, f"{name}: the replayed graph generated other tokens"
    for n in plan.token_counts:
        assert all(s > 0 for s in graph.seconds[n].values), (n, graph.seconds[n])
    longest = plan.token_counts[-1]
    assert graph.seconds[16].median < graph.seconds[longest].median, "the boundary events are out of order"
    assert eager.peak_memory_bytes and eager.peak_memory_bytes[16] <= eager.peak_memory_bytes[longest]


# Every backend with a decode op (composites included) in each of its dtypes.
CACHED = [(b.name, d) for b in registry.providing(registry.BACKENDS, registry.DECODE, composites=True) for d in b.dtypes]


@pytest.mark.parametrize("name,dtype", CACHED, ids=[f"{n}-{d}" for n, d in CACHED])
def test_kv_cache_generation_graph_replays_to_the_eager_tokens(version_ops, name, dtype):
    """A batch of 2 with a KV cache: prefill and every decode step in one graph; the cache is
    allocated by the generation (inside the capture, from the graph's pool), so the eager
    peak counts it."""
    backend = registry.get(name)
    reason = KV_CACHE.why_unavailable(backend, registry.Target.of("cuda"), dtype)
    if reason:
        pytest.skip(f"{name}: {reason}")
    model = tiny_model(backend.attention("cuda", dtype), precision.torch_dtype(dtype))
    KV_CACHE.attach(model, backend, torch.device("cuda"), dtype)
    KV_CACHE.prepare(backend, model, 2, 40)
    plan = GenerationPlan(study_prompts(2, 8), (16, 40), KV_CACHE)
    eager = time_eager(model, plan, runs=1)
    graph = time_graph(model, plan, replays=2)
    assert graph.token_ids == eager.token_ids, f"{name}: the replayed graph generated other tokens"
    assert graph.seconds[16].median < graph.seconds[40].median, "the boundary events are out of order"
    cache = KV_CACHE.cache_bytes(TINY_CONFIG, 2, 40, precision.torch_dtype(dtype))
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    assert eager.peak_memory_bytes[16] >= weights + cache, (eager.peak_memory_bytes, weights, cache)


def test_this_torch_has_external_events():
    """Not required (there is a fallback), but the one-graph method needs it."""
    assert external_events_supported(), f"torch {torch.__version__}: no external events; one graph per length"


def test_device_time_is_positive_and_below_the_call_time():
    timer = DeviceTimer(torch.device("cuda"))
    fn = registry.get(registry.KERNEL_REFERENCE).attention("cuda", precision.FLOAT32)
    q, k, v = random_qkv(Shape(1, 12, 512), seed=0, device="cuda")
    timing = timer.time(lambda: fn(q, k, v, 12))
    assert timing.not_captured is None, timing.not_captured
    assert timing.us_device and min(timing.us_device) > 0, timing
    assert min(timing.us_device) <= timing.us_call_median, timing


def test_flex_attention_float32_is_float32_accurate_dynamic_and_static(attention_or_skip):
    """3 x TF32 in both compilations: within the float32 bounds (TF32 alone would miss them by
    two orders of magnitude)."""
    dynamic = attention_or_skip("flex-attention", precision.FLOAT32)
    static = registry.get("flex-attention").timed_attention("cuda", precision.FLOAT32)
    for fn, kind in ((dynamic, "dynamic"), (static, "static")):
        for shape in GATE_SHAPES[:4]:
            q, k, v = random_qkv(shape, seed=shape.T, device="cuda")
            result = compare(fn(q, k, v, shape.H), reference_attention(q, k, v, shape.H))
            assert result.ok, f"flex-attention {kind} {shape.describe()}: {result.describe()}"


def test_benchmarks_write_complete_rows(tmp_path, version_ops):
    last_float32 = [v for v in registry.versions() if not v.half_precision][-1].name
    last_half = [v for v in registry.versions() if v.half_precision][-1].name
    names = ("naive", "sdpa-efficient", "sdpa-flash", "sdpa-cudnn", last_float32, last_half)
    backends = [registry.get(n) for n in names]
    device = torch.device("cuda")
    dtypes = [precision.FLOAT32, precision.BFLOAT16]
    path = bench_kernels.run(backends, dtypes, KernelPlan((Shape(1, 12, 64),)), results_dir=tmp_path, device=device)
    rows = {(r.backend, r.dtype): r for r in KERNELS.read(path).rows}
    assert rows["sdpa-flash", "float32"].status.startswith("not available for float32")
    assert rows[last_half, "float32"].status.startswith("not available for float32")
    assert rows[last_float32, "bfloat16"].status.startswith("not available for bfloat16")
    for name, dtype in (("naive", "float32"), ("sdpa-efficient", "float32"), (last_float32, "float32"),
                        ("naive", "bfloat16"), ("sdpa-cudnn", "bfloat16"), (last_half, "bfloat16")):
        row = rows[name, dtype]
        assert row.status == "ok" and row.notes is None, row
        assert row.us_device_median and row.us_call_median and row.tflops and row.ratio_to_reference, row
        assert row.us_device_min <= row.us_device_median <= row.us_device_max, row
        assert row.reference == registry.kernel_reference(dtype) and row.peak.startswith(dtype), row
    assert rows["sdpa-efficient", "float32"].ratio_to_reference == pytest.approx(1.0)
    assert rows["sdpa-cudnn", "bfloat16"].ratio_to_reference == pytest.approx(1.0)

    source = bench_e2e.ModelSource(lambda attention, device, dtype: tiny_model(attention, dtype), "tiny test model",
                                   TINY_CONFIG)
    plans = [bench_e2e.recompute_plan((16, 24)), *bench_e2e.kv_cache_plans((2,), (8,), 16)]
    path = bench_e2e.run(backends, dtypes, plans, source=source, results_dir=tmp_path, device=device)
    rows = {(r.backend, r.dtype, r.mode, r.tokens): r for r in E2E.read(path).rows}
    for name, dtype, mode in (("naive", "float32", "recompute"), ("sdpa-efficient", "float32", "recompute"),
                              ("naive", "bfloat16", "recompute"), ("sdpa-cudnn", "bfloat16", "recompute"),
                              (last_half, "bfloat16", "recompute"), ("naive", "float32", "kv-cache"),
                              ("sdpa-efficient", "float32", "kv-cache"), ("sdpa-cudnn", "bfloat16", "kv-cache")):
        row = rows[(name, dtype, mode, 24)]
        assert row.status == "ok" and row.graph_tokens_match_eager and row.same_tokens_as_naive is not None, row
        assert row.seconds_gpu_median and row.seconds_eager_median and row.seconds_floor_gpu, row
        assert -0.05 < row.attention_gpu_share < 1, row  # a 2-layer model: attention may cost little
        assert row.logits_mean_abs_err is not None and row.token_agreement is not None, row
        assert row.accuracy_check is True, row
        assert row.tokens_per_second == pytest.approx(row.batch * 16 / row.seconds_gpu_median), row
    assert (last_half, "bfloat16", "kv-cache", 24) not in rows, "a prefill version has no decode op"
