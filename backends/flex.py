"""The flex-attention baseline: torch.nn.attention.flex_attention with a causal block mask,
compiled by torch.compile into a Triton kernel, at its best for the accuracy asked.

Precision: in float32, Inductor's flex template multiplies with `tl.dot(...,
input_precision=FLOAT32_PRECISION)`. We pass FLOAT32_PRECISION='tf32x3' in kernel_options
(it takes precedence over the process-wide matmul precision): three TF32 products per
float32 product, the method of sdpa-efficient and of versions 16-18, and as accurate as
they are (relative error 2.7e-7 against 2.8e-7 for 'ieee', measured on an H100), 4.5-6.7x
faster than 'ieee', which runs the products on the CUDA cores. In bfloat16 and float16 the
products run on the tensor cores in that type; no option is needed.

Compilation: the kernel benchmark times a static compilation per shape and dtype
(timed_attention: compilation is not what is timed, and a kernel specialised to its T is
flex at its best); the correctness gate and GPT-2 generation, which call it at many
lengths, use one dynamic-shape compilation per dtype (apart from torch's specialisation of
sizes 0 and 1). Block masks depend on T only (B and H broadcast) and are cached per T; a
generation builds every length's mask, and runs the kernel at every length, before it is
timed or captured (prepare).
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable, Iterator

import torch

from backends.baselines import merge_heads, split_heads

# Per dtype, the Triton template constants passed as kernel_options (quoted: they are pasted
# into the template's source).
KERNEL_OPTIONS: dict[torch.dtype, dict[str, str]] = {torch.float32: {"FLOAT32_PRECISION": "'tf32x3'"}}
# Dynamo's limit on compilations of flex_attention in one process. The static compilations
# (one per shape and dtype: the study's 10 shapes and the prefill grid's 41 others, x 3 dtypes,
# 153 in the kernel benchmark) and the dynamic ones (a few per dtype for the gate, a few for
# generation's lengths) all count against it, since they compile the same function (two
# torch.compile wrappers of it share the count, checked on a CPU). Each sweep stage, and each of
# precompile's per-dtype processes, stays under it (tests/test_flex_cpu.py holds the kernel
# benchmark to it); at 64, before the grid, one process doing the gate, the benchmark and
# generation in every dtype reached it (results/nvidia-h100-80gb-hbm3/experiments/
# 2026-11-24_9_sweep_time_profile.log). Below Dynamo's cap on a process's compilations of every
# function together (accumulated_recompile_limit, 256 in torch 2.13), which it leaves as it is.
RECOMPILE_LIMIT = 192
# Inductor's compile workers for flex: one, in this process. Measured on an H100 with empty
# compile caches: the gate's flex-attention compilations in all three dtypes 87 s instead of
# 105 s with the default pool (one worker per core), the kernel benchmark's ten float32 ones
# 57 s instead of 63 s.
COMPILE_THREADS = 1


def causal(batch: torch.Tensor, head: torch.Tensor, q_index: torch.Tensor, kv_index: torch.Tensor) -> torch.Tensor:
    """flex-attention mask_mod: a query sees the keys at or before its position."""
    return q_index >= kv_index


class FlexAttention:
    """fn(q, k, v, num_heads) -> (B, T, C) through flex_attention on one device."""

    def __init__(self, device: torch.device, *, compiled: bool = True, dynamic: bool = True) -> None:
        import torch._inductor.config  # noqa: F401 -- patched around each compiled call
        from torch.nn.attention.flex_attention import flex_attention

        self.device = device
        self.compiled = compiled
        self._flex: Callable = torch.compile(flex_attention, dynamic=dynamic) if compiled else flex_attention
        self._masks: dict[int, object] = {}

    def block_mask(self, T: int):
        """The causal BlockMask for sequence length T (built once per T)."""
        mask = self._masks.get(T)
        if mask is None:
            from torch.nn.attention.flex_attention import create_block_mask

            mask = create_block_mask(causal, B=None, H=None, Q_LEN=T, KV_LEN=T, device=self.device)
            self._masks[T] = mask
        return mask

    def prepare(self, max_tokens: int, *, dtype: torch.dtype | None = None, num_heads: int = 1,
                width: int = 64, batch: int = 1) -> None:
        """Before a timed or captured generation, which must neither build a mask nor compile:
        builds the block masks of every length up to max_tokens and, given the generation's
        dtype, heads, width and batch, runs the kernel once at each length on q, k, v laid out as
        GPT-2 passes them (views of one (B, T, 3 C) projection), so that every compilation the
        dynamic shapes need happens here. Without the second part (or with it outside inference
        mode, commit 2ad25ffc7cdd), the first timed eager generation recompiled between 128
        and 256 tokens: about 8 s of its eager time (rows of commits 829c0c03e8fa,
        095c78eba2e9 and 2ad25ffc7cdd, where the first eager run took 9-17 s against 3.3-3.6 s
        for a second one)."""
        for T in range(1, max_tokens + 1):
            self.block_mask(T)
            if dtype is not None:
                # Under inference mode, as generation runs: dynamo guards on the grad mode, so
                # calls outside it would compile variants the generation never uses.
                with torch.inference_mode():
                    qkv = torch.zeros(batch, T, 3 * width, device=self.device, dtype=dtype)  # (B, T, 3C)
                    self(*qkv.split(width, dim=2), num_heads)  # q, k, v: (B, T, C) views

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
        qh, kh, vh = (split_heads(t, num_heads) for t in (q, k, v))  # (B, H, T, d) views
        mask = self.block_mask(q.shape[1])
        options = KERNEL_OPTIONS.get(q.dtype, {})
        if not self.compiled:
            return merge_heads(self._flex(qh, kh, vh, block_mask=mask, kernel_options=options))
        with compiling():
            out = self._flex(qh, kh, vh, block_mask=mask, kernel_options=options)  # (B, H, T, d)
        return merge_heads(out)  # (B, T, C)


class FlexDecode:
    """fn(q, k_cache, v_cache, lengths, num_heads) -> (B, C) through flex_attention with a
    length-1 query and no block mask: every row of the cache it is given is visible (the
    decode baselines' rule, backends/baselines.py; `lengths` is not read). Inductor picks its
    decoding template for a query this short (flex-decoding: the keys split across blocks).
    Compiled with dynamic shapes for generation, whose cache grows by a row per step, or
    once per shape for the decode benchmark."""

    def __init__(self, device: torch.device, *, dynamic: bool = True) -> None:
        import torch._inductor.config  # noqa: F401 -- patched around each compiled call
        from torch.nn.attention.flex_attention import flex_attention

        self.device = device
        self._flex: Callable = torch.compile(flex_attention, dynamic=dynamic)

    def prepare(self, max_tokens: int, *, dtype: torch.dtype, num_heads: int, width: int, batch: int = 1) -> None:
        """Before a timed or captured generation, which must not compile: one call at each
        cache length up to max_tokens, under inference mode as generation runs, on inputs laid
        out as GPT-2 passes them (q a view of the packed (B, 3C) projection, the caches slices
        of a (B, max_tokens, C) buffer: gpt2/model.py)."""
        with torch.inference_mode():
            q = torch.zeros(batch, 3 * width, device=self.device, dtype=dtype)[:, :width]  # (B, C), row stride 3C
            cache = torch.zeros(batch, max_tokens, width, device=self.device, dtype=dtype)  # (B, S, C)
            lengths = torch.zeros(batch, device=self.device, dtype=torch.int32)
            for S in range(1, max_tokens + 1):
                self(q, cache[:, :S], cache[:, :S], lengths, num_heads)

    def __call__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lengths: torch.Tensor,
                 num_heads: int) -> torch.Tensor:
        B, C = q.shape
        qh = q.view(B, num_heads, 1, C // num_heads)  # (B, H, 1, d)
        kh, vh = (split_heads(t, num_heads) for t in (k_cache, v_cache))  # (B, H, S, d) views
        with compiling():
            out = self._flex(qh, kh, vh, kernel_options=KERNEL_OPTIONS.get(q.dtype, {}))  # (B, H, 1, d)
        return out.reshape(B, C)


@contextlib.contextmanager
def compiling() -> Iterator[None]:
    """Around a compiled flex_attention call. A recompilation past the limit must fail loudly
    rather than fall back to eager (an unfused implementation that would be timed as if it
    were the compiled kernel). Each compilation makes one or two Triton kernels, which
    Inductor compiles faster in this process than by starting its pool of compile workers
    (COMPILE_THREADS)."""
    with torch._dynamo.config.patch(_loud_recompile_limit()), \
            torch._inductor.config.patch(compile_threads=COMPILE_THREADS):
        yield


def _loud_recompile_limit() -> dict[str, object]:
    """Dynamo settings (by their torch 2.6+ names, older aliases where those are missing)."""
    config = torch._dynamo.config
    limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    loud = "fail_on_recompile_limit_hit" if hasattr(config, "fail_on_recompile_limit_hit") \
        else "fail_on_cache_limit_hit"
    return {limit: RECOMPILE_LIMIT, loud: True}


@functools.cache
def flex_attention_for(device: torch.device, dynamic: bool = True) -> FlexAttention:
    """The compiled flex-attention of `device` (dynamic shapes, or one compilation per shape),
    shared by every caller in the process."""
    return FlexAttention(device, dynamic=dynamic)



@functools.cache
def flex_decode_for(device: torch.device, dynamic: bool = True) -> FlexDecode:
    """The compiled flex-attention decode of `device` (dynamic shapes, or one compilation per
    shape), shared by every caller in the process."""
    return FlexDecode(device, dynamic=dynamic)
