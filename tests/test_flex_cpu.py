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
