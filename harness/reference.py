"""The float64 reference, seeded inputs and the error measures every correctness check uses.

Tolerances, per dtype (Bounds: relative Frobenius error and max absolute error, both must hold):

- float32: relative 1e-5, absolute 1e-4. float32 accumulation over up to a few thousand terms
  lands near 1e-6 relative error; the bounds leave a 10x margin yet catch any indexing or
  masking error (which shows up as O(1) errors).
- bfloat16 and float16 (the half-precision track): the output is compared with float64
  computed from the same 16-bit inputs, so what remains is the kernel's own error: the
  rounding of P to 16 bits for the P V product and of the output, float32 accumulation
  aside. A correctly rounded output alone has a relative Frobenius error of about u / sqrt(3),
  u the unit roundoff (bfloat16 2^-8, float16 2^-11): 2.3e-3 and 2.8e-4; FlashAttention-2
  and cuDNN measure 1.1-2.1e-3 and 1.4-2.6e-4 on our shapes (H100, both dtypes, T = 2 to
  4097). A backend passes when both its errors are at most 1.25x the better of sdpa-flash's
  and sdpa-cudnn's on the same inputs (half_precision_bounds), with a floor of 1e-6 relative
  and 1e-5 absolute for the cases where the vendors are exact (T = 1: the output is v). Where
  neither vendor kernel can run (cuDNN refuses T = 1; neither runs on a CPU), the bound is
  fixed from the rounding: relative u, absolute 4 u max|ref| (HALF_FALLBACK), about twice
  what the vendors reach.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable, Iterable

import torch

from backends import precision
from harness.study import Shape


@dataclass(frozen=True)
class Bounds:
    """What a correct output may differ from the float64 reference by."""

    rel: float  # ||out - ref|| / ||ref||
    abs: float  # max |out - ref|


FLOAT32_BOUNDS = Bounds(rel=1e-5, abs=1e-4)
REL_TOL, ABS_TOL = FLOAT32_BOUNDS.rel, FLOAT32_BOUNDS.abs
# The half-precision rule: at most this times the better vendor kernel's error ...
VENDOR_FACTOR = 1.25
# ... but never below this (the vendors are exact at T = 1).
HALF_FLOOR = Bounds(rel=1e-6, abs=1e-5)
# Unit roundoff of the 16-bit types: 2^-(mantissa bits + 1).
UNIT_ROUNDOFF = {precision.BFLOAT16: 2.0**-8, precision.FLOAT16: 2.0**-11}


# A score standard deviation that reaches about +-50 at the study's sizes: rows whose running
# maximum grows by far more than the first tiles show (the lazy rescale's rare path).
LARGE_SCORE_STD = 12.5


def random_qkv(shape: Shape, *, seed: int, device: torch.device | str, score_scale: float = 1.0,
               dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three (B, T, C) tensors from N(0, 1), drawn in float32 and cast to `dtype` (so a seed
    gives the same values in every dtype, up to rounding); q and k are multiplied by
    sqrt(score_scale) first, so the scores q.k / sqrt(d) have standard deviation score_scale."""
    generator = torch.Generator(device=device).manual_seed(seed)
    q, k, v = (torch.randn(shape.B, shape.T, shape.C, device=device, generator=generator) for _ in range(3))
    factor = math.sqrt(score_scale)
    return tuple(t.to(dtype) for t in (q * factor, k * factor, v))  # type: ignore[return-value]


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Causal softmax(q k^T / sqrt(d)) v in float64; returns (B, T, C) float64."""
    B, T, C = q.shape
    d = C // num_heads
    qh, kh, vh = (t.double().reshape(B, T, num_heads, d).transpose(1, 2) for t in (q, k, v))  # (B, H, T, d)
    scores = qh @ kh.transpose(-2, -1) / math.sqrt(d)  # (B, H, T, T)
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu_(1)
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return (weights @ vh).transpose(1, 2).reshape(B, T, C)  # (B, T, C)


def reference_attention_by_head(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                num_heads: int) -> torch.Tensor:
    """reference_attention one head at a time: at T = 16385 one head's float64 scores take
    2 GB, all twelve at once 26 GB. Returns (B, T, C) float64."""
    d = q.shape[-1] // num_heads
    return torch.cat([reference_attention(*(t[..., h * d:(h + 1) * d] for t in (q, k, v)), 1)
                      for h in range(num_heads)], dim=-1)  # (B, T, C)


def max_abs_score(q: torch.Tensor, k: torch.Tensor, num_heads: int) -> float:
    """The largest |q.k| / sqrt(d) over unmasked pairs (to show scaled inputs reach it)."""
    B, T, C = q.shape
    d = C // num_heads
    qh, kh = (t.reshape(B, T, num_heads, d).transpose(1, 2) for t in (q, k))
    scores = (qh @ kh.transpose(-2, -1)).abs() / math.sqrt(d)
    return scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu_(1), 0).max().item()


@dataclass(frozen=True)
class Comparison:
    rel_err: float  # ||out - ref|| / ||ref||
    max_abs_err: float
    worst_index: tuple[int, ...]  # where |out - ref| is largest (b, t, c)
    nonfinite: int  # NaN/inf elements in out
    bounds: Bounds = FLOAT32_BOUNDS

    @property
    def ok(self) -> bool:
        return self.nonfinite == 0 and self.rel_err <= self.bounds.rel and self.max_abs_err <= self.bounds.abs

    def describe(self) -> str:
        return (f"rel err {self.rel_err:.2e} (tol {self.bounds.rel:.2e}), max abs err {self.max_abs_err:.2e} "
                f"(tol {self.bounds.abs:.2e}) at (b, t, c) = {self.worst_index}, non-finite elements: "
                f"{self.nonfinite}")


def compare(out: torch.Tensor, ref: torch.Tensor, bounds: Bounds = FLOAT32_BOUNDS) -> Comparison:
    diff = (out.double() - ref).abs()
    nonfinite = int((~torch.isfinite(out)).sum().item())
    diff = torch.nan_to_num(diff, nan=float("inf"))
    flat = int(diff.argmax().item())
    worst = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
    rel = (torch.linalg.vector_norm(diff) / torch.linalg.vector_norm(ref)).item()
    return Comparison(rel_err=rel, max_abs_err=diff.max().item(), worst_index=worst, nonfinite=nonfinite,
                      bounds=bounds)


def fallback_bounds(dtype: str, ref: torch.Tensor) -> Bounds:
    """The half-precision bound when no vendor kernel ran: relative u, absolute 4 u max|ref|."""
    u = UNIT_ROUNDOFF[dtype]
    return Bounds(rel=u, abs=4 * u * ref.abs().max().item())


def half_precision_bounds(dtype: str, ref: torch.Tensor, vendor_outputs: Iterable[torch.Tensor]) -> Bounds:
    """The half-precision rule for one case: VENDOR_FACTOR x the better vendor output's errors
    (each measure on its own), floored at HALF_FLOOR; the fixed fallback when none ran."""
    errors = [compare(out, ref) for out in vendor_outputs]
    errors = [e for e in errors if e.nonfinite == 0]
    if not errors:
        return fallback_bounds(dtype, ref)
    return Bounds(rel=max(VENDOR_FACTOR * min(e.rel_err for e in errors), HALF_FLOOR.rel),
                  abs=max(VENDOR_FACTOR * min(e.max_abs_err for e in errors), HALF_FLOOR.abs))


VendorFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]


def call_quietly(fn: VendorFn, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
    """fn's output; a kernel that refuses these inputs raises RuntimeError (cuDNN refuses
    T = 1), without the UserWarning SDPA prints before it refuses."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fn(q, k, v, num_heads)


def vendor_outputs(vendors: Iterable[VendorFn], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   num_heads: int) -> list[torch.Tensor]:
    """The outputs of the vendor kernels that accept these inputs (cuDNN refuses T = 1)."""
    outputs = []
    for fn in vendors:
        try:
            outputs.append(call_quietly(fn, q, k, v, num_heads))
        except RuntimeError:
            continue
    return outputs


def bounds_for(dtype: str, ref: torch.Tensor, vendors: Iterable[VendorFn], q: torch.Tensor, k: torch.Tensor,
               v: torch.Tensor, num_heads: int) -> Bounds:
    """The bounds a backend's output in `dtype` is held to on these inputs."""
    if not precision.is_half(dtype):
        return FLOAT32_BOUNDS
    return half_precision_bounds(dtype, ref, vendor_outputs(vendors, q, k, v, num_heads))


# -- decode ---------------------------------------------------------------------------
def reference_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lengths: Iterable[int],
                     num_heads: int) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v in float64 for one query row per sequence, sequence b over
    its cached rows 0 .. lengths[b]-1 (host ints; a length below 1 gives a zero row, one past
    the cache is read as the cache's length: the decode contract's rule for out-of-range
    lengths). q (B, C), caches (B, S, C); returns (B, C) float64."""
    B, S, C = k_cache.shape
    d = C // num_heads
    out = torch.zeros(B, C, dtype=torch.float64, device=q.device)
    for b, length in enumerate(lengths):
        n = min(max(int(length), 0), S)
        if n == 0:
            continue
        qh = q[b].double().view(num_heads, 1, d)  # (H, 1, d)
        kh, vh = (t[b, :n].double().view(n, num_heads, d).transpose(0, 1) for t in (k_cache, v_cache))  # (H, n, d)
        weights = torch.softmax(qh @ kh.transpose(-2, -1) / math.sqrt(d), dim=-1)  # (H, 1, n)
        out[b] = (weights @ vh).reshape(C)
    return out
