"""Every CUDA version, in each of its dtypes, against the float64 reference computed from the
same inputs, and the op contract's refusals.

Tolerances (harness/reference.py): in float32 relative error 1e-5 and max absolute error
1e-4 (float32 accumulation over at most a few thousand terms stays near 1e-6, so these leave
a 10x margin while any indexing, masking or race error, O(1) errors, fails loudly); in
bfloat16 and float16 1.25x the better of sdpa-flash's and sdpa-cudnn's errors on the same
inputs (a masking or indexing error is 10^2-10^3 times that).
"""
from __future__ import annotations

import functools
import math

import pytest
import torch

from backends import precision, registry
from harness.correctness import vendor_functions
from harness.reference import (LARGE_SCORE_STD, bounds_for, compare, max_abs_score, random_qkv, reference_attention,
                               reference_attention_by_head)
from harness.study import Shape

pytestmark = pytest.mark.gpu

VERSIONS = [v.name for v in registry.versions()]
# Every version in each of its dtypes: ("v05", "float32"), ("h01", "bfloat16"), ...
VERSION_DTYPES = [(v.name, d) for v in registry.versions() for d in v.dtypes]
IDS = [f"{name}-{dtype}" for name, dtype in VERSION_DTYPES]


def first_dtype(name: str) -> torch.dtype:
    return precision.torch_dtype(registry.get(name).dtypes[0])


def bounds(dtype: str, ref: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, H: int):
    """What the output in `dtype` is held to on these inputs."""
    vendors = vendor_functions(torch.device("cuda"), dtype) if precision.is_half(dtype) else []
    return bounds_for(dtype, ref, vendors, q, k, v, H)
SEQ_LENS = [1, 2, 31, 32, 33, 47, 48, 49, 63, 64, 65, 127, 128, 129, 511, 512, 513, 1024, 2047]
# B=1, GPT-2 small (H=12): lengths where the small-call plans of the newer versions cut a
# row block's keys into pieces merged in the kernel (versions 24-28: 321-512; 28 also
# 193-320 and 513-576), none of them in SEQ_LENS but 511-513.
SMALL_CALL_SEQ_LENS = [200, 300, 449, 560]
WIDTHS = [(768, 12), (1024, 16)]  # (C, num_heads): GPT-2 small and medium
BATCHES = [1, 3]


@functools.lru_cache(maxsize=None)
def case(B: int, T: int, C: int, H: int, score_scale: float = 1.0, dtype: str = precision.FLOAT32):
    """Seeded inputs for one shape in one dtype (a different seed per shape), their float64
    reference and the bounds the output is held to."""
    seed = hash((B, T, C, score_scale)) % 2**31
    q, k, v = random_qkv(Shape(B, H, T), seed=seed, device="cuda", score_scale=score_scale,
                         dtype=precision.torch_dtype(dtype))
    ref = reference_attention(q, k, v, H)
    return q, k, v, ref, bounds(dtype, ref, q, k, v, H)


def call_on_poisoned_memory(op, q, k, v, H) -> torch.Tensor:
    """Call the op after filling the block its output will get with NaN, so an output
    element the kernel never writes shows up as NaN."""
    poison = torch.full(q.shape, float("nan"), device=q.device, dtype=q.dtype)
    address = poison.data_ptr()
    del poison  # back to torch's caching allocator, which hands it to the op's output
    out = op(q, k, v, H)
    assert out.data_ptr() == address, "the output did not reuse the poisoned block: poisoning is void"
    return out


def check(out: torch.Tensor, ref: torch.Tensor, limits, where: str) -> None:
    result = compare(out, ref, limits)
    assert result.ok, f"{where}: {result.describe()}"


@pytest.mark.parametrize("B", BATCHES)
@pytest.mark.parametrize("C,H", WIDTHS)
@pytest.mark.parametrize("T", SEQ_LENS)
@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_matches_float64_reference(version_ops, name, dtype, T, C, H, B):
    q, k, v, ref, limits = case(B, T, C, H, dtype=dtype)
    out = call_on_poisoned_memory(version_ops[name], q, k, v, H)
    assert out.shape == q.shape and out.is_contiguous() and out.dtype == q.dtype
    check(out, ref, limits, f"{name} {dtype} B={B} T={T} C={C}")


@pytest.mark.parametrize("T", SMALL_CALL_SEQ_LENS)
@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_small_call_plans_match_float64_reference(version_ops, name, dtype, T):
    C, H = WIDTHS[0]  # GPT-2 small: the plans' cut ranges above are for H=12
    q, k, v, ref, limits = case(1, T, C, H, dtype=dtype)
    out = call_on_poisoned_memory(version_ops[name], q, k, v, H)
    check(out, ref, limits, f"{name} {dtype} B=1 T={T} C={C}")


# The prefill grid's shapes (issue 43), where the last versions' plans differ from B=1-3's:
# batched short prompts (h24's short narrow blocks, two per SM: B=16 T=256, B=32 T=129,
# B=64 T=64; just past them, B=17 T=255 and B=64 T=257, 192-row blocks), and the heads of GPT-2
# medium, large and xl (C, H) = (1024, 16), (1280, 20), (1600, 25). Each track's last version.
GRID_CASES = [(16, 64, 768, 12), (64, 64, 768, 12), (32, 129, 768, 12), (16, 256, 768, 12), (17, 255, 768, 12),
              (64, 257, 768, 12), (16, 256, 1280, 20), (16, 65, 1600, 25), (3, 1024, 1600, 25)]
LAST_DTYPES = [(v.name, d) for v in registry.last_versions() for d in v.dtypes]


@pytest.mark.parametrize("B,T,C,H", GRID_CASES)
@pytest.mark.parametrize("name,dtype", LAST_DTYPES, ids=[f"{n}-{d}" for n, d in LAST_DTYPES])
def test_grid_shapes_match_float64_reference(version_ops, name, dtype, B, T, C, H):
    q, k, v, ref, limits = case(B, T, C, H, dtype=dtype)
    out = call_on_poisoned_memory(version_ops[name], q, k, v, H)
    check(out, ref, limits, f"{name} {dtype} B={B} T={T} C={C}")


@pytest.mark.parametrize("B", BATCHES)
@pytest.mark.parametrize("T", SEQ_LENS)
@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_large_scores_stay_finite_and_accurate(version_ops, name, dtype, T, B):
    C, H = 768, 12
    q, k, v, ref, limits = case(B, T, C, H, LARGE_SCORE_STD, dtype)
    if T >= 64:  # small T has too few pairs to reach the tail; the scale is the same
        assert max_abs_score(q.float(), k.float(), H) > 40, "inputs do not reach the intended score range"
    out = call_on_poisoned_memory(version_ops[name], q, k, v, H)
    reached = max_abs_score(q.float(), k.float(), H)
    check(out, ref, limits, f"{name} {dtype} B={B} T={T} C={C} scores up to {reached:.0f}")


JUMP_KEY = 600  # past the first key tile of every plan, so that rows meet it with m finite
JUMP_CASES = [(1, 700), (3, 1000)]  # (B, T): a narrow-kernel plan and a 192-row-block one


@functools.lru_cache(maxsize=None)
def jump_case(B: int, T: int, dtype: str):
    """Inputs where each row from JUMP_KEY on meets, at that key, a score about 150 above every
    earlier one (in each head q has a component 4 along the unit vector u = (1, ..., 1) / 8,
    and k at JUMP_KEY is 300 u): a running maximum that grows by far more than a lazy
    rescale lets P reach, and past where 2^(c s - c m) overflows float32 (c (s - m) >= 128,
    89 in the scores' units). Also returns the share of rows that reach 128."""
    C, H = WIDTHS[0]
    d = C // H
    q, k, v = random_qkv(Shape(B, H, T), seed=hash((B, T, JUMP_KEY)) % 2**31, device="cuda")  # ints: no salt
    q = q + 4 / d**0.5  # (B, T, C): + 4 u in every head
    k[:, JUMP_KEY, :] = 300 / d**0.5  # (C,): 300 u in every head
    q, k, v = (t.to(precision.torch_dtype(dtype)) for t in (q, k, v))
    scores = torch.einsum("bihd,bjhd->bhij", *(t.double().reshape(B, T, H, d) for t in (q, k))) / d**0.5
    before = scores[:, :, JUMP_KEY:, :JUMP_KEY].amax(-1)  # (B, H, T - JUMP_KEY): the max before it
    jump_log2 = (scores[:, :, JUMP_KEY:, JUMP_KEY] - before) / math.log(2)
    share = (jump_log2 >= 128).double().mean().item()
    ref = reference_attention(q, k, v, H)
    return q, k, v, ref, bounds(dtype, ref, q, k, v, H), share


@pytest.mark.parametrize("B,T", JUMP_CASES)
@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_score_far_above_the_running_maximum(version_ops, name, dtype, B, T):
    q, k, v, ref, limits, share = jump_case(B, T, dtype)
    H = WIDTHS[0][1]
    assert share > 0.5, f"only {share:.0%} of the rows past the jump reach 2^128: the case is void"
    out = call_on_poisoned_memory(version_ops[name], q, k, v, H)
    check(out, ref, limits, f"{name} {dtype} B={B} T={T}, key {JUMP_KEY} far above the rows' maxima "
          f"({share:.0%} of its rows by 2^128 or more)")


@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_deterministic(version_ops, name, dtype):
    q, k, v, _, _ = case(3, 513, 768, 12, dtype=dtype)
    first = version_ops[name](q, k, v, 12)
    second = version_ops[name](q, k, v, 12)
    assert torch.equal(first, second), f"{name} {dtype}: two calls on the same inputs differ"


STRIDED = [(name, dtype) for name, dtype in VERSION_DTYPES if registry.get(name).strided_inputs]


@pytest.mark.parametrize("name,dtype", STRIDED, ids=[f"{n}-{d}" for n, d in STRIDED])
def test_strided_versions_accept_packed_qkv_views(version_ops, name, dtype):
    B, T, C, H = 3, 129, 768, 12
    qkv = torch.randn(B, T, 3 * C, device="cuda", generator=torch.Generator("cuda").manual_seed(7))
    q, k, v = qkv.to(precision.torch_dtype(dtype)).split(C, dim=-1)  # row stride 3C, batch stride 3TC
    assert not q.is_contiguous()
    out = call_on_poisoned_memory(version_ops[name], q, k, v, H)
    ref = reference_attention(q, k, v, H)
    check(out, ref, bounds(dtype, ref, q, k, v, H), f"{name} {dtype} on packed qkv views")


@pytest.mark.parametrize("name,dtype", STRIDED, ids=[f"{n}-{d}" for n, d in STRIDED])
def test_strided_versions_accept_non_unit_batch_stride(version_ops, name, dtype):
    B, T, C, H = 3, 65, 1024, 16
    g = torch.Generator("cuda").manual_seed(8)
    cast = precision.torch_dtype(dtype)
    # batch stride (T + 7) C: every item is a window of a longer sequence
    q, k, v = (torch.randn(B, T + 7, C, device="cuda", generator=g).to(cast)[:, 3:3 + T] for _ in range(3))
    # and batch stride C, row stride B C: a (T, B, C) tensor seen as (B, T, C)
    q2, k2, v2 = (torch.randn(T, B, C, device="cuda", generator=g).to(cast).transpose(0, 1) for _ in range(3))
    for args, label in (((q, k, v), "windowed batch"), ((q2, k2, v2), "transposed (T, B, C)")):
        out = call_on_poisoned_memory(version_ops[name], *args, H)
        ref = reference_attention(*args, H)
        check(out, ref, bounds(dtype, ref, *args, H), f"{name} {dtype} on {label} views")


@pytest.mark.parametrize("name", [v.name for v in registry.versions() if not v.strided_inputs])
def test_contiguous_versions_refuse_strided_views(version_ops, name):
    qkv = torch.randn(1, 33, 3 * 768, device="cuda", dtype=first_dtype(name))
    q, k, v = qkv.split(768, dim=-1)
    with pytest.raises(RuntimeError, match="q must be contiguous"):
        version_ops[name](q, k, v, 12)


@pytest.mark.parametrize("name", VERSIONS)
def test_misaligned_pointer(version_ops, name):
    """A version whose row asks for more than one element's alignment (16-byte vector loads
    or copies) refuses a pointer one element past an aligned one; the others compute the
    right answer from it."""
    B, T, C, H = 1, 47, 768, 12
    dtype = registry.get(name).dtypes[0]
    cast = precision.torch_dtype(dtype)
    base = torch.randn(B * T * C + 1, device="cuda").to(cast)
    q = base[1:].view(B, T, C)  # contiguous, one element past an aligned address
    k, v = torch.randn(B, T, C, device="cuda").to(cast), torch.randn(B, T, C, device="cuda").to(cast)
    op = version_ops[name]
    alignment = registry.get(name).alignment_bytes
    if alignment > q.element_size():
        with pytest.raises(RuntimeError, match=f"{alignment}-byte aligned"):
            op(q, k, v, H)
    else:
        ref = reference_attention(q, k, v, H)
        check(op(q, k, v, H), ref, bounds(dtype, ref, q, k, v, H), f"{name} on a misaligned q")


@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_opcheck(version_ops, name, dtype):
    q, k, v = random_qkv(Shape(2, 12, 65), seed=3, device="cuda", dtype=precision.torch_dtype(dtype))
    torch.library.opcheck(getattr(torch.ops, registry.get(name).namespace).causal_attention, (q, k, v, 12))


def _x(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, device="cuda").to(dtype)


def _same(t: torch.Tensor, num_heads: int = 12) -> tuple:
    return (t, t, t, num_heads)


# (label, arguments built inside the test from the version's first dtype, expected message)
BAD_INPUTS = [
    ("cpu", lambda dt: _same(torch.randn(2, 33, 768).to(dt)), "must be a CUDA tensor"),
    ("2-D", lambda dt: _same(_x(33, 768, dtype=dt)), "must be 3-D"),
    ("4-D", lambda dt: _same(_x(1, 2, 33, 768, dtype=dt)), "must be 3-D"),
    ("head dim 128", lambda dt: _same(_x(2, 33, 768, dtype=dt), 6), "head dimension must be 64"),
    ("head dim 32", lambda dt: _same(_x(2, 33, 768, dtype=dt), 24), "head dimension must be 64"),
    ("zero heads", lambda dt: _same(_x(2, 33, 768, dtype=dt), 0), "num_heads must be at least 1"),
    ("k shorter", lambda dt: (_x(2, 33, 768, dtype=dt), _x(2, 32, 768, dtype=dt), _x(2, 33, 768, dtype=dt), 12),
     "same shape"),
    ("v wider", lambda dt: (_x(2, 33, 768, dtype=dt), _x(2, 33, 768, dtype=dt), _x(2, 33, 1024, dtype=dt), 12),
     "same shape"),
    ("last dim strided", lambda dt: _same(_x(2, 768, 33, dtype=dt).transpose(1, 2)), "stride 1 in its last dimension"),
]


@pytest.mark.parametrize("label,make_args,message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
@pytest.mark.parametrize("name", VERSIONS)
def test_refuses_bad_input(version_ops, name, label, make_args, message):
    with pytest.raises(RuntimeError, match=message):
        version_ops[name](*make_args(first_dtype(name)))


# Dtypes a version refuses, with the message: every study dtype it does not take, float64,
# and (for the half track) q and k of two different 16-bit types.
WRONG_DTYPES = [(v.name, d) for v in registry.versions() for d in (*precision.EVERY, "float64") if d not in v.dtypes]


@pytest.mark.parametrize("name,dtype", WRONG_DTYPES, ids=[f"{n}-{d}" for n, d in WRONG_DTYPES])
def test_refuses_other_dtypes(version_ops, name, dtype):
    version = registry.get(name)
    accepted = "float16 or bfloat16" if version.half_precision else "float32"
    x = _x(2, 33, 768, dtype=getattr(torch, dtype))
    with pytest.raises(RuntimeError, match=f"q must be {accepted}"):
        version_ops[name](*_same(x))


@pytest.mark.parametrize("name", [v.name for v in registry.versions() if v.half_precision])
def test_half_versions_refuse_mixed_dtypes(version_ops, name):
    q = _x(2, 33, 768, dtype=torch.bfloat16)
    k = _x(2, 33, 768, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="q, k and v must have one dtype"):
        version_ops[name](q, k, q, 12)


@pytest.mark.parametrize("name", [b.name for b in registry.BACKENDS
                                  if isinstance(b, registry.SdpaBaseline) and not b.accepts("float32")])
def test_unsupported_sdpa_kernels_refuse_float32(name):
    """The registry lists these as unavailable for float32: check the claim."""
    from backends.baselines import sdpa_attention

    q = torch.randn(1, 64, 768, device="cuda")
    with pytest.raises(RuntimeError):
        sdpa_attention(q, q, q, 12, backend=registry.get(name).sdpa_backend)


@functools.lru_cache(maxsize=len(precision.EVERY))
def long_case(dtype: str, T: int = 16385, C: int = 768, H: int = 12):
    """T past 16384 (the contract's minimum) and off every tile size; the float64
    reference is computed one head at a time to stay within a few GB."""
    q, k, v = random_qkv(Shape(1, H, T), seed=16385, device="cuda", dtype=precision.torch_dtype(dtype))
    ref = reference_attention_by_head(q, k, v, H)  # (1, T, C) float64
    return q, k, v, ref, bounds(dtype, ref, q, k, v, H)


@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_long_sequence(version_ops, name, dtype):
    q, k, v, ref, limits = long_case(dtype)
    out = call_on_poisoned_memory(version_ops[name], q, k, v, 12)
    check(out, ref, limits, f"{name} {dtype} B=1 T={q.shape[1]} C=768")
