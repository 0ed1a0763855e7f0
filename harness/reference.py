"""The float64 reference, seeded inputs and the error measures every correctness check uses."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from harness.study import Shape

# float32 accumulation over up to a few thousand terms lands near 1e-6 relative error;
# the bounds leave a 10x margin yet catch any indexing or masking error (which shows up
# as O(1) errors).
REL_TOL = 1e-5
ABS_TOL = 1e-4


def random_qkv(shape: Shape, *, seed: int, device: torch.device | str,
               score_scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three (B, T, C) float32 tensors from N(0, 1); q and k are multiplied by
    sqrt(score_scale), so the scores q.k / sqrt(d) have standard deviation score_scale."""
    generator = torch.Generator(device=device).manual_seed(seed)
    q, k, v = (torch.randn(shape.B, shape.T, shape.C, device=device, generator=generator) for _ in range(3))
    factor = math.sqrt(score_scale)
    return q * factor, k * factor, v


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

    @property
    def ok(self) -> bool:
        return self.nonfinite == 0 and self.rel_err <= REL_TOL and self.max_abs_err <= ABS_TOL

    def describe(self) -> str:
        return (f"rel err {self.rel_err:.2e} (tol {REL_TOL:.0e}), max abs err {self.max_abs_err:.2e} "
                f"(tol {ABS_TOL:.0e}) at (b, t, c) = {self.worst_index}, non-finite elements: {self.nonfinite}")


def compare(out: torch.Tensor, ref: torch.Tensor) -> Comparison:
    diff = (out.double() - ref).abs()
    nonfinite = int((~torch.isfinite(out)).sum().item())
    diff = torch.nan_to_num(diff, nan=float("inf"))
    flat = int(diff.argmax().item())
    worst = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
    rel = (torch.linalg.vector_norm(diff) / torch.linalg.vector_norm(ref)).item()
    return Comparison(rel_err=rel, max_abs_err=diff.max().item(), worst_index=worst, nonfinite=nonfinite)
