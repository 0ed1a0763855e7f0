"""Kernel benchmark: every backend on the same (B, H, T) shapes, timed with CUDA events.

Each repetition is preceded by a write over a buffer twice the size of L2, so every
call starts with cold caches, as inside the model where other layers run in between.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch
from tqdm import tqdm

from harness import environment
from harness.attention import attention_fn
from harness.reference import HEAD_DIM, random_qkv
from harness.registry import Backend
from harness.results import kernels_file

GENERATION_SHAPES = [(1, 12, T) for T in (64, 128, 256, 512, 1024)]  # GPT-2 small, batch 1
THROUGHPUT_SHAPES = [(8, 12, T) for T in (1024, 2048, 4096)]
QUICK_SHAPES = [(1, 12, 512), (8, 12, 4096)]
REFERENCE_BACKEND = "sdpa-efficient"


@dataclass(frozen=True)
class Timing:
    us: list[float]  # one per repetition

    @property
    def median(self) -> float:
        return statistics.median(self.us)


def attention_tflops(B: int, H: int, T: int, seconds: float, d: int = HEAD_DIM) -> float:
    """Throughput counted as 2 * B * H * T^2 * d (the convention for causal attention)."""
    return 2.0 * B * H * T * T * d / seconds / 1e12


def time_cuda(fn, *, warmup: int, reps: int, flush: torch.Tensor | None) -> Timing:
    """Median-ready timings of fn() in microseconds, CUDA events around each call."""
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends):
        if flush is not None:
            flush.zero_()  # evicts the inputs from L2
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return Timing([s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)])


def measure_fp32_peak(n: int = 8192, reps: int = 10) -> float:
    """TFLOP/s of an n^3 float32 matmul with TF32 off: the FMA peak we compare against."""
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        a, b = (torch.randn(n, n, device="cuda") for _ in range(2))
        timing = time_cuda(lambda: a @ b, warmup=3, reps=reps, flush=None)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return 2.0 * n**3 / (timing.median * 1e-6) / 1e12


def l2_flush_buffer() -> torch.Tensor:
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    return torch.empty(max(2 * l2_bytes, 64 * 2**20) // 4, dtype=torch.float32, device="cuda")


def run(backends: list[Backend], shapes: list[tuple[int, int, int]], *, reps: int = 50, warmup: int = 5,
        resume: bool = True) -> None:
    """Time every backend at every shape; append one row per measurement."""
    provenance = environment.collect()
    results = kernels_file(environment.gpu_slug(provenance["gpu"]))
    done = results.done(provenance) if resume else {}
    # sdpa-efficient first at every shape: the others' ratios refer to it.
    order = sorted(backends, key=lambda b: b.name != REFERENCE_BACKEND)
    flush = l2_flush_buffer()
    peak = measure_fp32_peak()
    print(f"float32 FMA peak (8192^3 matmul, TF32 off): {peak:.1f} TFLOP/s")
    functions = {b.name: attention_fn(b) for b in order if not b.unavailable}
    progress = tqdm(total=len(order) * len(shapes), desc="kernel benchmark", unit="run")
    for B, H, T in shapes:
        reference_us = None
        ref_key = (REFERENCE_BACKEND, str(B), str(H), str(T))
        if ref_key in done and done[ref_key]["us_median"]:
            reference_us = float(done[ref_key]["us_median"])
        q, k, v = random_qkv(B, T, H * HEAD_DIM, seed=B * 100003 + T, device="cuda")
        for backend in order:
            progress.update()
            key = (backend.name, str(B), str(H), str(T))
            if key in done:
                continue
            row = {"backend": backend.name, "B": B, "H": H, "T": T, "d": HEAD_DIM, **provenance,
                   "fp32_peak_tflops": peak}
            if backend.unavailable:
                results.append({**row, "status": backend.unavailable})
                continue
            fn = functions[backend.name]
            timing = time_cuda(lambda: fn(q, k, v, H), warmup=warmup, reps=reps, flush=flush)
            tflops = attention_tflops(B, H, T, timing.median * 1e-6)
            if backend.name == REFERENCE_BACKEND:
                reference_us = timing.median
            results.append({**row, "status": "ok", "reps": reps, "us_median": timing.median,
                            "us_min": min(timing.us), "us_max": max(timing.us), "tflops": tflops,
                            "ratio_to_sdpa_efficient": (timing.median / reference_us) if reference_us else None,
                            "fraction_of_fp32_peak": tflops / peak})
            progress.set_postfix_str(f"{backend.name} B={B} T={T}: {timing.median:.1f} us")
    progress.close()

