"""The flex-attention baseline's mask, layout and options against the float64 reference,
on the CPU through flex_attention's unfused path (compiling on a 2-core CPU takes
minutes; the compiled kernel is checked on the GPU in test_capture_gpu.py)."""
import pytest
import torch

from backends import registry
from backends.flex import KERNEL_OPTIONS, FlexAttention
from harness.reference import compare, random_qkv, reference_attention
from harness.study import Shape


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("shape", [Shape(1, 2, 1), Shape(2, 2, 37), Shape(1, 3, 130)], ids=lambda s: s.label())
def test_flex_attention_matches_the_reference(shape):
    flex = FlexAttention(torch.device("cpu"), compiled=False)
    q, k, v = random_qkv(shape, seed=shape.T, device="cpu")
    out = flex(q, k, v, shape.H)
    assert out.shape == q.shape and out.is_contiguous()
    result = compare(out, reference_attention(q, k, v, shape.H))
    assert result.ok, f"flex-attention {shape.describe()}: {result.describe()}"


def test_block_masks_are_built_once_per_length():
    flex = FlexAttention(torch.device("cpu"), compiled=False)
    assert flex.block_mask(37) is flex.block_mask(37)
    assert flex.block_mask(37) is not flex.block_mask(38)


def test_flex_attention_float32_is_three_tf32_products_and_half_is_native():
    """float32 as accurate as sdpa-efficient (3 x TF32, 'tf32x3'), not one TF32 product
    (1e-3 error) nor the CUDA cores ('ieee', 4.5-6.7x slower); half precision needs no option."""
    assert KERNEL_OPTIONS == {torch.float32: {"FLOAT32_PRECISION": "'tf32x3'"}}
    row = registry.get("flex-attention")
    assert row.requires_cuda and row.end_to_end is None and set(row.dtypes) == {"float32", "bfloat16", "float16"}


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_prepare_builds_every_length_before_a_generation():
    flex = FlexAttention(torch.device("cpu"), compiled=False)
    flex.prepare(20)
    masks = dict(flex._masks)
    assert sorted(masks) == list(range(1, 21))
    flex.block_mask(20)
    assert flex._masks == masks, "a prepared length built its mask again"


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_prepare_runs_the_kernel_at_every_length_of_a_generation_as_gpt2_lays_it_out(monkeypatch):
    """A timed generation must compile nothing: prepare_generation runs flex once per length,
    in the model's dtype, heads and width, on q, k, v views of one projection (GPT-2's layout).
    Without it, the first timed eager run recompiled mid-generation (about 8 s on an H100)."""
    from backends import flex as flex_module
    from gpt2.config import GPT2Config
    from gpt2.model import GPT2

    flex = FlexAttention(torch.device("cpu"), compiled=False)
    unfused, calls = flex._flex, []

    def recording(q, k, v, **kwargs):
        calls.append((tuple(q.shape), q.dtype, q.stride(), torch.is_inference_mode_enabled()))
        return unfused(q, k, v, **kwargs)

    flex._flex = recording
    monkeypatch.setattr(flex_module, "flex_attention_for", lambda device, dynamic=True: flex)
    config = GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2)
    model = GPT2(config, flex).to(torch.bfloat16)
    registry.get("flex-attention").prepare_generation(model, 12)
    assert sorted(flex._masks) == list(range(1, 13))
    assert [shape for shape, *_ in calls] == [(1, 2, T, 8) for T in range(1, 13)], "one call per length"
    assert {dtype for _, dtype, *_ in calls} == {torch.bfloat16}
    # generation runs under inference mode, and dynamo's guards include the grad mode
    assert all(inference for *_, inference in calls), "prepared outside inference mode: compiled for nothing"
    # (B, H, T, d) views of a (1, T, 3 C) projection: T's stride is 3 C, as in the model (from
    # T = 2: a dimension of size 1 has no meaningful stride)
    assert all(stride[2] == 3 * config.n_embd for (_, _, T, _), _, stride, _ in calls if T > 1), calls


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_kv_cache_generation_prepares_the_decode_op_at_every_cache_length(monkeypatch):
    """With a KV cache each new token calls the decode op at a new length: prepare_generation
    runs flex's decode once per length, at the generation's batch, on inputs laid out as the
    model passes them (q a view of the packed projection), and leaves the prefill op alone."""
    from torch.nn.attention.flex_attention import flex_attention

    from backends import flex as flex_module
    from backends.flex import FlexDecode
    from gpt2.config import GPT2Config
    from gpt2.model import GPT2

    decode, calls = FlexDecode(torch.device("cpu")), []

    def recording(q, k, v, **kwargs):
        calls.append((tuple(q.shape), tuple(k.shape), q.dtype, q.stride(), torch.is_inference_mode_enabled()))
        return flex_attention(q, k, v, **kwargs)  # unfused: compiling takes minutes on a CPU

    decode._flex = recording
    monkeypatch.setattr(flex_module, "flex_decode_for", lambda device, dynamic=True: decode)
    monkeypatch.setattr(flex_module, "flex_attention_for", lambda *args, **kwargs: pytest.fail("prefill prepared"))
    config = GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2)
    model = GPT2(config, decode).to(torch.bfloat16)
    registry.get("flex-attention").prepare_generation(model, 12, batch=3, kind=registry.DECODE)
    assert [(q, k) for q, k, *_ in calls] == [((3, 2, 1, 8), (3, 2, S, 8)) for S in range(1, 13)], "one call per length"
    assert {dtype for _, _, dtype, *_ in calls} == {torch.bfloat16}
    assert all(inference for *_, inference in calls), "prepared outside inference mode: compiled for nothing"
    assert all(stride[0] == 3 * config.n_embd for _, _, _, stride, _ in calls), "q laid out unlike the model's"
