"""Every CUDA version against the float64 reference, and the op contract's refusals.

Tolerances (harness/reference.py): relative error 1e-5 and max absolute error 1e-4.
float32 accumulation over at most a few thousand terms stays near 1e-6, so these leave
a 10x margin while any indexing, masking or race error (O(1) errors) fails loudly.
"""
from __future__ import annotations

import functools

import pytest
import torch

from backends import registry
from harness.reference import compare, max_abs_score, random_qkv, reference_attention, reference_attention_by_head
from harness.study import Shape

pytestmark = pytest.mark.gpu

VERSIONS = [v.name for v in registry.versions()]
SEQ_LENS = [1, 2, 31, 32, 33, 47, 48, 49, 63, 64, 65, 127, 128, 129, 511, 512, 513, 1024, 2047]
WIDTHS = [(768, 12), (1024, 16)]  # (C, num_heads): GPT-2 small and medium
BATCHES = [1, 3]
SCORE_SCALE_LARGE = 12.5  # scores with std 12.5 reach about +-50 over these sizes


@functools.lru_cache(maxsize=None)
def case(B: int, T: int, C: int, H: int, score_scale: float = 1.0):
    """Seeded inputs for one shape (a different seed per shape) and their reference."""
    seed = hash((B, T, C, score_scale)) % 2**31
    q, k, v = random_qkv(Shape(B, H, T), seed=seed, device="cuda", score_scale=score_scale)
    return q, k, v, reference_attention(q, k, v, H)


def call_on_poisoned_memory(op, q, k, v, H) -> torch.Tensor:
    """Call the op after filling the block its output will get with NaN, so an output
    element the kernel never writes shows up as NaN."""
    poison = torch.full(q.shape, float("nan"), device=q.device)
    address = poison.data_ptr()
    del poison  # back to torch's caching allocator, which hands it to the op's output
    out = op(q, k, v, H)
    assert out.data_ptr() == address, "the output did not reuse the poisoned block: poisoning is void"
    return out


def check(out: torch.Tensor, ref: torch.Tensor, where: str) -> None:
    result = compare(out, ref)
    assert result.ok, f"{where}: {result.describe()}"


@pytest.mark.parametrize("B", BATCHES)
@pytest.mark.parametrize("C,H", WIDTHS)
@pytest.mark.parametrize("T", SEQ_LENS)
@pytest.mark.parametrize("name", VERSIONS)
def test_matches_float64_reference(version_ops, name, T, C, H, B):
    q, k, v, ref = case(B, T, C, H)
    out = call_on_poisoned_memory(version_ops[name], q, k, v, H)
    assert out.shape == q.shape and out.is_contiguous()
    check(out, ref, f"{name} B={B} T={T} C={C}")


@pytest.mark.parametrize("B", BATCHES)
@pytest.mark.parametrize("T", SEQ_LENS)
@pytest.mark.parametrize("name", VERSIONS)
def test_large_scores_stay_finite_and_accurate(version_ops, name, T, B):
    C, H = 768, 12
    q, k, v, ref = case(B, T, C, H, SCORE_SCALE_LARGE)
    if T >= 64:  # small T has too few pairs to reach the tail; the scale is the same
        assert max_abs_score(q, k, H) > 40, "inputs do not reach the intended score range"
    out = call_on_poisoned_memory(version_ops[name], q, k, v, H)
    check(out, ref, f"{name} B={B} T={T} C={C} scores up to {max_abs_score(q, k, H):.0f}")


@pytest.mark.parametrize("name", VERSIONS)
def test_deterministic(version_ops, name):
    q, k, v, _ = case(3, 513, 768, 12)
    first = version_ops[name](q, k, v, 12)
    second = version_ops[name](q, k, v, 12)
    assert torch.equal(first, second), f"{name}: two calls on the same inputs differ"


STRIDED = [v.name for v in registry.versions() if v.strided_inputs]


@pytest.mark.parametrize("name", STRIDED)
def test_strided_versions_accept_packed_qkv_views(version_ops, name):
    B, T, C, H = 3, 129, 768, 12
    qkv = torch.randn(B, T, 3 * C, device="cuda", generator=torch.Generator("cuda").manual_seed(7))
    q, k, v = qkv.split(C, dim=-1)  # row stride 3C, batch stride 3TC
    assert not q.is_contiguous()
    out = call_on_poisoned_memory(version_ops[name], q, k, v, H)
    check(out, reference_attention(q, k, v, H), f"{name} on packed qkv views")


@pytest.mark.parametrize("name", STRIDED)
def test_strided_versions_accept_non_unit_batch_stride(version_ops, name):
    B, T, C, H = 3, 65, 1024, 16
    g = torch.Generator("cuda").manual_seed(8)
    # batch stride (T + 7) C: every item is a window of a longer sequence
    q, k, v = (torch.randn(B, T + 7, C, device="cuda", generator=g)[:, 3:3 + T] for _ in range(3))
    # and batch stride C, row stride B C: a (T, B, C) tensor seen as (B, T, C)
    q2, k2, v2 = (torch.randn(T, B, C, device="cuda", generator=g).transpose(0, 1) for _ in range(3))
    for args, label in (((q, k, v), "windowed batch"), ((q2, k2, v2), "transposed (T, B, C)")):
        out = call_on_poisoned_memory(version_ops[name], *args, H)
        check(out, reference_attention(*args, H), f"{name} on {label} views")


@pytest.mark.parametrize("name", [v.name for v in registry.versions() if not v.strided_inputs])
def test_contiguous_versions_refuse_strided_views(version_ops, name):
    qkv = torch.randn(1, 33, 3 * 768, device="cuda")
    q, k, v = qkv.split(768, dim=-1)
    with pytest.raises(RuntimeError, match="q must be contiguous"):
        version_ops[name](q, k, v, 12)


@pytest.mark.parametrize("name", VERSIONS)
def test_misaligned_pointer(version_ops, name):
    """A version whose row asks for more than a float's alignment (16-byte vector loads)
    refuses a pointer 4 bytes past an aligned one; the others compute the right answer
    from it."""
    B, T, C, H = 1, 47, 768, 12
    base = torch.randn(B * T * C + 1, device="cuda")
    q = base[1:].view(B, T, C)  # contiguous, 4 bytes past an aligned address
    k, v = torch.randn(B, T, C, device="cuda"), torch.randn(B, T, C, device="cuda")
    op = version_ops[name]
    alignment = registry.get(name).alignment_bytes
    if alignment > 4:
        with pytest.raises(RuntimeError, match=f"{alignment}-byte aligned"):
            op(q, k, v, H)
    else:
        check(op(q, k, v, H), reference_attention(q, k, v, H), f"{name} on a misaligned q")


@pytest.mark.parametrize("name", VERSIONS)
def test_opcheck(version_ops, name):
    q, k, v = random_qkv(Shape(2, 12, 65), seed=3, device="cuda")
    torch.library.opcheck(getattr(torch.ops, registry.get(name).namespace).causal_attention, (q, k, v, 12))


def _x(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, device="cuda")


def _same(t: torch.Tensor, num_heads: int = 12) -> tuple:
    return (t, t, t, num_heads)


# (label, arguments built inside the test, expected message)
BAD_INPUTS = [
    ("float16", lambda: _same(_x(2, 33, 768).half()), "must be float32"),
    ("float64", lambda: _same(_x(2, 33, 768).double()), "must be float32"),
    ("cpu", lambda: _same(torch.randn(2, 33, 768)), "must be a CUDA tensor"),
    ("2-D", lambda: _same(_x(33, 768)), "must be 3-D"),
    ("4-D", lambda: _same(_x(1, 2, 33, 768)), "must be 3-D"),
    ("head dim 128", lambda: _same(_x(2, 33, 768), 6), "head dimension must be 64"),
    ("head dim 32", lambda: _same(_x(2, 33, 768), 24), "head dimension must be 64"),
    ("zero heads", lambda: _same(_x(2, 33, 768), 0), "num_heads must be at least 1"),
    ("k shorter", lambda: (_x(2, 33, 768), _x(2, 32, 768), _x(2, 33, 768), 12), "same shape"),
    ("v wider", lambda: (_x(2, 33, 768), _x(2, 33, 768), _x(2, 33, 1024), 12), "same shape"),
    ("last dim strided", lambda: _same(_x(2, 768, 33).transpose(1, 2)), "stride 1 in its last dimension"),
]


@pytest.mark.parametrize("label,make_args,message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
@pytest.mark.parametrize("name", VERSIONS)
def test_refuses_bad_input(version_ops, name, label, make_args, message):
    with pytest.raises(RuntimeError, match=message):
        version_ops[name](*make_args())


@pytest.mark.parametrize("name", [b.name for b in registry.BACKENDS if not b.accepts("float32")])
def test_unsupported_sdpa_kernels_refuse_float32(name):
    """The registry lists these as unavailable for float32: check the claim."""
    from backends.baselines import sdpa_attention

    q = torch.randn(1, 64, 768, device="cuda")
    with pytest.raises(RuntimeError):
        sdpa_attention(q, q, q, 12, backend=registry.get(name).sdpa_backend)


@functools.lru_cache(maxsize=1)
def long_case(T: int = 16385, C: int = 768, H: int = 12):
    """T past 16384 (the contract's minimum) and off every tile size; the float64
    reference is computed one head at a time to stay within a few GB."""
    q, k, v = random_qkv(Shape(1, H, T), seed=16385, device="cuda")
    return q, k, v, reference_attention_by_head(q, k, v, H)  # (1, T, C) float64


@pytest.mark.parametrize("name", VERSIONS)
def test_long_sequence(version_ops, name):
    q, k, v, ref = long_case()
    out = call_on_poisoned_memory(version_ops[name], q, k, v, 12)
    check(out, ref, f"{name} B=1 T={q.shape[1]} C=768")
