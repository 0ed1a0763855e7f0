"""Every decode version, in each dtype, against the float64 reference computed from the same
inputs, and the decode contract's promises (versions/common/decode_launch.h): ragged lengths with
NaN in every cached row past each length, strided caches, out-of-range lengths, B = 256, two
concurrent streams, a captured graph replayed after its lengths changed, refusals.

Tolerances (harness/reference.py): float32 relative 1e-5 and absolute 1e-4 (a float32
accumulation over up to 16k rows lands near 1e-6; an indexing or masking error is O(1)); in
bfloat16 and float16 1.25x the better of sdpa-flash's and sdpa-cudnn's decode errors on the
same inputs (harness/decode_gate.py's bounds_for_decode).
"""
from __future__ import annotations

import functools
import random

import pytest
import torch

from backends import precision, registry
from harness.decode_gate import bounds_for_decode, vendor_decodes
from harness.decode_inputs import CONTIGUOUS, PACKED, random_decode_inputs
from harness.reference import LARGE_SCORE_STD, compare, reference_decode

pytestmark = pytest.mark.gpu

DECODE_VERSIONS = [v.name for v in registry.decode_versions()]
VERSION_DTYPES = [(v.name, d) for v in registry.decode_versions() for d in v.dtypes]
IDS = [f"{name}-{dtype}" for name, dtype in VERSION_DTYPES]
# Cache lengths: 1, around every power of two a tile or a piece could be (16 to 256 rows),
# and long ones off every tile.
CACHE_LENS = [1, 2, 15, 16, 17, 33, 63, 64, 65, 127, 129, 255, 256, 257, 1000, 4097]
WIDTHS = [(768, 12), (1024, 16)]  # (C, num_heads): GPT-2 small and medium


@functools.lru_cache(maxsize=None)
def vendors(dtype: str):
    return vendor_decodes(torch.device("cuda"), dtype) if precision.is_half(dtype) else []


@functools.lru_cache(maxsize=64)
def case(B: int, H: int, S: int, lengths: tuple[int, ...], dtype: str, layout: str = CONTIGUOUS,
         score_std: float = 1.0):
    """Seeded inputs (NaN past each length), their float64 reference and the bounds."""
    x = random_decode_inputs(B, H, S, lengths, seed=hash((B, H, S, lengths)) % 2**31, device="cuda",
                             dtype=precision.torch_dtype(dtype), layout=layout, poison_past_length=True)
    if score_std != 1.0:  # scores q . k / 8 of standard deviation score_std
        x.q.mul_(score_std)
    ref = reference_decode(x.q, x.k_cache, x.v_cache, x.host_lengths, H)
    return x, ref, bounds_for_decode(dtype, ref, x, H, vendors(dtype))


def call_on_poisoned_memory(op, x, H: int) -> torch.Tensor:
    """The op's output where the block it gets was NaN before: an element it never writes shows."""
    poison = torch.full(x.q.shape, float("nan"), device="cuda", dtype=x.q.dtype)
    address = poison.data_ptr()
    del poison
    out = op(*x.args(H))
    assert out.data_ptr() == address, "the output did not reuse the poisoned block: poisoning is void"
    return out


def check(out: torch.Tensor, ref: torch.Tensor, limits, where: str) -> None:
    result = compare(out, ref, limits)
    assert result.ok, f"{where}: {result.describe()}"


@pytest.mark.parametrize("B", [1, 3])
@pytest.mark.parametrize("C,H", WIDTHS)
@pytest.mark.parametrize("S", CACHE_LENS)
@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_full_caches_match_float64_reference(decode_ops, name, dtype, S, C, H, B):
    x, ref, limits = case(B, H, S, (S,) * B, dtype)
    out = call_on_poisoned_memory(decode_ops[name], x, H)
    assert out.shape == x.q.shape and out.is_contiguous() and out.dtype == x.q.dtype
    check(out, ref, limits, f"{name} {dtype} B={B} S={S} C={C}")


RAGGED = [  # (B, S, lengths): 1 and S, tile edges, a sequence of each size
    (7, 300, (1, 300, 17, 64, 65, 129, 256)),
    (4, 4097, (4097, 1, 2048, 4000)),
    (256, 513, tuple(random.Random(256).randint(1, 513) for _ in range(256))),
    # 288 heads (a wave of d09's 264 slots or more) and a cache of 2048 rows or more: d10's
    # tile blocks (tiles of 128 rows in 16-bit types, 64 in float32), lengths at their edges.
    (24, 2177, (2177, 1, 2, 63, 64, 65, 127, 128, 129, 255, 256, 257, 2048, 2049, 2176, 1000, 1500, 17,
                33, 700, 2100, 5, 900, 2177)),
]


@pytest.mark.parametrize("B,S,lengths", RAGGED, ids=[f"B{b}-S{s}" for b, s, _ in RAGGED])
@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_ragged_lengths_never_read_past_the_length(decode_ops, name, dtype, B, S, lengths):
    x, ref, limits = case(B, 12, S, lengths, dtype, PACKED)  # NaN in every row past each length
    out = call_on_poisoned_memory(decode_ops[name], x, 12)
    check(out, ref, limits, f"{name} {dtype} B={B} S={S} ragged lengths, packed views with NaN past each length")


@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_out_of_range_lengths(decode_ops, name, dtype):
    """The contract's rule: a length below 1 gives a zero row, a length past the cache reads
    the whole cache; nothing past the cache is read (the packed buffer's rows past S are NaN)."""
    S = 70
    lengths = (0, -5, S + 10, 2**31 - 1, S, 1)
    x, ref, limits = case(len(lengths), 12, S, lengths, dtype, PACKED)
    out = call_on_poisoned_memory(decode_ops[name], x, 12)
    assert torch.all(out[:2] == 0), f"{name} {dtype}: a length below 1 must give a zero row"
    check(out, ref, limits, f"{name} {dtype} out-of-range lengths {lengths}")


@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_large_scores_stay_finite_and_accurate(decode_ops, name, dtype):
    x, ref, limits = case(3, 12, 2049, (2049, 700, 1500), dtype, PACKED, LARGE_SCORE_STD)
    out = call_on_poisoned_memory(decode_ops[name], x, 12)
    check(out, ref, limits, f"{name} {dtype} scores of standard deviation {LARGE_SCORE_STD}")


@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_deterministic(decode_ops, name, dtype):
    x, _, _ = case(3, 12, 1025, (1025, 1000, 3), dtype, PACKED)
    first, second = decode_ops[name](*x.args(12)), decode_ops[name](*x.args(12))
    assert torch.equal(first, second), f"{name} {dtype}: two calls on the same inputs differ"


@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_graph_replays_after_lengths_change(decode_ops, name, dtype):
    """Lengths stay on the device: a captured call replays right after they change, and a
    replay equals an eager call bit for bit."""
    S, lengths = 1500, (1500, 3, 700, 1024)
    x, _, _ = case(len(lengths), 12, S, (S,) * len(lengths), dtype, PACKED)  # NaN only past S: lengths change
    op = decode_ops[name]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        op(*x.args(12))  # warm-up on the capture stream
    torch.cuda.current_stream().wait_stream(stream)
    lengths_now = x.lengths.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        out = op(x.q, x.k_cache, x.v_cache, lengths_now, 12)
    for new in (lengths, (1, 1500, 2, 999), (64, 65, 66, 67)):
        lengths_now.copy_(torch.tensor(new, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        eager = op(x.q, x.k_cache, x.v_cache, lengths_now, 12)
        assert torch.equal(out, eager), f"{name} {dtype}: the replay with lengths {new} differs from an eager call"
        ref = reference_decode(x.q, x.k_cache, x.v_cache, new, 12)
        limits = bounds_for_decode(dtype, ref, x.__class__(x.q, x.k_cache, x.v_cache, lengths_now, new), 12,
                                   vendors(dtype))
        check(out, ref, limits, f"{name} {dtype} graph replay with lengths {new}")
    graph.reset()


@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_two_streams_at_once(decode_ops, name, dtype):
    """Two calls in flight on two streams (each its own scratch memory) give each its answer."""
    op = decode_ops[name]
    cases = [case(8, 12, 2048, (2048,) * 8, dtype), case(5, 12, 777, (1, 777, 300, 64, 500), dtype, PACKED)]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs: list[list[torch.Tensor]] = [[], []]
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
    for _ in range(5):
        for i, (stream, (x, _, _)) in enumerate(zip(streams, cases)):
            with torch.cuda.stream(stream):
                outs[i].append(op(*x.args(12)))
    torch.cuda.synchronize()
    for (x, ref, limits), results in zip(cases, outs):
        for out in results:
            check(out, ref, limits, f"{name} {dtype} B={x.q.shape[0]} on two concurrent streams")


@pytest.mark.parametrize("name,dtype", VERSION_DTYPES, ids=IDS)
def test_opcheck(decode_ops, name, dtype):
    x, _, _ = case(3, 12, 129, (129, 5, 64), dtype, PACKED)
    torch.library.opcheck(getattr(torch.ops, registry.get(name).namespace).decode_attention, x.args(12))


def _x(*shape: int, dtype: torch.dtype = torch.float32, device: str = "cuda") -> torch.Tensor:
    return torch.randn(*shape, device=device).to(dtype)


def _lengths(B: int, value: int = 5, **kwargs) -> torch.Tensor:
    return torch.full((B,), value, dtype=kwargs.get("dtype", torch.int32), device=kwargs.get("device", "cuda"))


# (label, arguments, expected message)
BAD_INPUTS = [
    ("q on the CPU", lambda: (_x(2, 768, device="cpu"), _x(2, 9, 768), _x(2, 9, 768), _lengths(2), 12),
     "must be a CUDA tensor"),
    ("lengths on the CPU", lambda: (_x(2, 768), _x(2, 9, 768), _x(2, 9, 768), _lengths(2, device="cpu"), 12),
     "lengths must be on q's device"),
    ("lengths int64", lambda: (_x(2, 768), _x(2, 9, 768), _x(2, 9, 768), _lengths(2, dtype=torch.int64), 12),
     "lengths must be int32"),
    ("lengths of another batch", lambda: (_x(2, 768), _x(2, 9, 768), _x(2, 9, 768), _lengths(3), 12),
     "one entry per sequence"),
    ("q 3-D", lambda: (_x(2, 1, 768), _x(2, 9, 768), _x(2, 9, 768), _lengths(2), 12), "q must be 2-D"),
    ("cache 2-D", lambda: (_x(2, 768), _x(9, 768), _x(9, 768), _lengths(2), 12), "k_cache must be 3-D"),
    ("v shorter", lambda: (_x(2, 768), _x(2, 9, 768), _x(2, 8, 768), _lengths(2), 12), "same shape"),
    ("cache of another batch", lambda: (_x(2, 768), _x(3, 9, 768), _x(3, 9, 768), _lengths(2), 12),
     "q's B and C"),
    ("head dim 128", lambda: (_x(2, 768), _x(2, 9, 768), _x(2, 9, 768), _lengths(2), 6), "head dimension must be 64"),
    ("zero heads", lambda: (_x(2, 768), _x(2, 9, 768), _x(2, 9, 768), _lengths(2), 0), "num_heads must be at least 1"),
    ("mixed dtypes", lambda: (_x(2, 768), _x(2, 9, 768, dtype=torch.bfloat16), _x(2, 9, 768), _lengths(2), 12),
     "must have one dtype"),
    ("float64", lambda: (_x(2, 768, dtype=torch.float64), _x(2, 9, 768, dtype=torch.float64),
                         _x(2, 9, 768, dtype=torch.float64), _lengths(2), 12), "float32, float16 or bfloat16"),
    ("last dim strided", lambda: (_x(2, 768), _x(2, 768, 9).transpose(1, 2), _x(2, 9, 768), _lengths(2), 12),
     "stride 1 in its last dimension"),
    ("misaligned cache", lambda: (_x(2, 768), _x(2 * 9 * 768 + 1)[1:].view(2, 9, 768), _x(2, 9, 768), _lengths(2), 12),
     "16-byte aligned"),
]


@pytest.mark.parametrize("label,make_args,message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
@pytest.mark.parametrize("name", DECODE_VERSIONS)
def test_refuses_bad_input(decode_ops, name, label, make_args, message):
    with pytest.raises(RuntimeError, match=message):
        decode_ops[name](*make_args())


@pytest.mark.parametrize("name", DECODE_VERSIONS)
def test_empty_cache_and_empty_batch(decode_ops, name):
    out = decode_ops[name](_x(2, 768), _x(2, 0, 768), _x(2, 0, 768), _lengths(2), 12)
    assert out.shape == (2, 768) and torch.all(out == 0), "a cache of no rows gives zero rows"
    assert decode_ops[name](_x(0, 768), _x(0, 9, 768), _x(0, 9, 768), _lengths(0), 12).shape == (0, 768)


@pytest.mark.parametrize("name", [b.name for b in registry.BACKENDS
                                  if isinstance(b, registry.SdpaBaseline) and not b.accepts("float32")])
def test_half_only_sdpa_kernels_refuse_a_float32_decode(name):
    """The registry lists these as unavailable for float32 in decode too: check the claim."""
    from backends.baselines import sdpa_decode

    q, cache = torch.randn(2, 768, device="cuda"), torch.randn(2, 64, 768, device="cuda")
    with pytest.raises(RuntimeError):
        sdpa_decode(q, cache, cache, _lengths(2), 12, backend=registry.get(name).sdpa_backend)
