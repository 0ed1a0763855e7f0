"""The reference and the comparison every correctness check relies on can fail."""
import torch

from backends.baselines import naive_attention
from harness.reference import compare, random_qkv, reference_attention
from harness.study import Shape


def test_naive_matches_reference_on_cpu():
    q, k, v = random_qkv(Shape(2, 2, 37), seed=0, device="cpu")
    assert compare(naive_attention(q, k, v, 2), reference_attention(q, k, v, 2)).ok


def test_comparison_catches_errors():
    q, k, v = random_qkv(Shape(1, 2, 9), seed=1, device="cpu")
    ref = reference_attention(q, k, v, 2)
    good = ref.float()
    wrong_row = good.clone()
    wrong_row[0, 4] = good[0, 3]  # one row copied from its neighbour
    unwritten = good.clone()
    unwritten[0, 8, 64] = float("nan")
    # the same attention without the causal mask
    qh, kh, vh = (t.double().view(1, 9, 2, 64).transpose(1, 2) for t in (q, k, v))
    no_mask = (torch.softmax(qh @ kh.transpose(-1, -2) / 8, -1) @ vh).transpose(1, 2).reshape(1, 9, 128)
    assert compare(good, ref).ok
    for bad in (wrong_row, unwritten, no_mask.float()):
        assert not compare(bad, ref).ok
    assert compare(unwritten, ref).nonfinite == 1
