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


def test_flex_attention_is_forced_to_full_float32_and_is_a_cuda_backend():
    assert KERNEL_OPTIONS == {"FLOAT32_PRECISION": "'ieee'"}
    row = registry.get("flex-attention")
    assert row.requires_cuda and row.end_to_end and "not measured end to end" in row.end_to_end
