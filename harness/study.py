"""The study's constants, each written once: shapes, token counts, headline measures."""
from __future__ import annotations

from dataclasses import dataclass

from backends import precision
from backends.registry import HEAD_DIM
from gpt2.config import SIZES
from gpt2.prompts import STUDY_PROMPT_TOKENS


@dataclass(frozen=True, order=True)
class Shape:
    """An attention call: B sequences of T tokens, H heads of HEAD_DIM (C = H * HEAD_DIM)."""

    B: int
    H: int
    T: int

    @property
    def C(self) -> int:
        return self.H * HEAD_DIM

    @property
    def d(self) -> int:
        return HEAD_DIM

    def flops(self) -> float:
        """2 * B * H * T^2 * d: the convention for causal attention's forward pass."""
        return 2.0 * self.B * self.H * self.T * self.T * HEAD_DIM

    def label(self) -> str:
        return f"B={self.B} T={self.T}"

    def describe(self) -> str:
        return f"B={self.B}, H={self.H}, T={self.T}, d={HEAD_DIM}"


GPT2_HEADS = SIZES["small"].n_head  # 12, GPT-2 small: the kernel benchmark's head count

# The README's kernel tables, the cross-GPU table and figure: GPT-2's batch-1 length and a
# throughput shape.
HEADLINE_SHAPES = (Shape(1, GPT2_HEADS, 512), Shape(8, GPT2_HEADS, 4096))
# Kernel benchmark: GPT-2's batch-1 lengths and throughput shapes.
KERNEL_SHAPES = tuple(sorted({*HEADLINE_SHAPES, *(Shape(1, GPT2_HEADS, T) for T in (64, 128, 256, 1024, 2048, 4096)),
                              *(Shape(8, GPT2_HEADS, T) for T in (1024, 2048))}))
QUICK_KERNEL_SHAPES = tuple(sorted({Shape(1, GPT2_HEADS, 64), *HEADLINE_SHAPES}))
# Kernel benchmark: rounds per shape, the order of the backends reversed every other round.
# Seven: at B=8, T=4096 three rounds read one kernel 4% apart in one sweep (h13 and h14, the
# same code there), seven put two builds of one kernel within 0.1-1.2% (results/README.md, "Rounds").
KERNEL_ROUNDS = 7
# The prefill grid (issue 43): every batch of prompts GPT-2 small prefills up to its context of 1024
# tokens, at its heads; and GPT-2 medium, large and xl's wider heads (16, 20, 25) at four points.
# The kernel benchmark measures it for PyTorch's kernels and each prefill track's last version
# alone (harness/kernel_plan.py); the other versions keep KERNEL_SHAPES. 7 x 5 + 3 x 2 x 2 = 47
# shapes, 6 of them in KERNEL_SHAPES too.
GRID_BATCHES = (1, 2, 4, 8, 16, 32, 64)
GRID_LENGTHS = (64, 128, 256, 512, 1024)
WIDE_MODELS = ("medium", "large", "xl")  # gpt2/config.py SIZES
WIDE_BATCHES = (1, 16)
WIDE_LENGTHS = (256, 1024)
GRID_SMALL_SHAPES = tuple(Shape(B, GPT2_HEADS, T) for B in GRID_BATCHES for T in GRID_LENGTHS)  # B-major
GRID_WIDE_SHAPES = tuple(Shape(B, SIZES[model].n_head, T) for model in WIDE_MODELS for B in WIDE_BATCHES
                         for T in WIDE_LENGTHS)
GRID_SHAPES = (*GRID_SMALL_SHAPES, *GRID_WIDE_SHAPES)
# Each version's "Measured" block in versions/*/README.md.
VERSION_NOTE_SHAPES = tuple(sorted({Shape(1, GPT2_HEADS, 64), Shape(1, GPT2_HEADS, 4096), *HEADLINE_SHAPES}))

# End to end, recompute mode (the original study's): total tokens (prompt included) of a greedy
# generation of one sequence from the study's prompt.
TOKEN_COUNTS = (32, 64, 128, 256, 512)
QUICK_TOKEN_COUNTS = (32, 64)
HEADLINE_TOKENS = TOKEN_COUNTS[-1]  # the README's end-to-end table and the cross-GPU table

# End to end with a KV cache: B sequences at once, prompts of P tokens (gpt2/prompts.py: the
# study's prompt alone, or long enough that prefill counts), a fixed number of tokens generated
# per sequence (P=512 then runs to 576 tokens).
KV_BATCHES = (1, 8, 64)
LONG_PROMPT_TOKENS = 512
KV_PROMPT_TOKENS = (STUDY_PROMPT_TOKENS, LONG_PROMPT_TOKENS)
KV_NEW_TOKENS = 64
QUICK_KV_BATCHES = (1, 8)
QUICK_KV_PROMPT_TOKENS = (STUDY_PROMPT_TOKENS,)
QUICK_KV_NEW_TOKENS = 32


@dataclass(frozen=True, order=True)
class KvPlan:
    """A KV-cache generation's batch and prompt (the rows of e2e.csv in mode kv-cache)."""

    batch: int
    prompt_tokens: int

    def label(self) -> str:
        return f"B={self.batch} P={self.prompt_tokens}"


# The README's KV-cache headline: a served batch of long prompts.
KV_HEADLINE = KvPlan(8, LONG_PROMPT_TOKENS)

# Correctness gate: T = 2, partial tiles of every tile size, B > 1, both GPT-2 widths. (T = 1
# is in the GPU tests of every version; here it would cost flex-attention a third compilation,
# ~30 s of the sweep, since torch specialises sizes of 1.)
GATE_SHAPES = (Shape(1, 12, 2), Shape(3, 12, 33), Shape(2, 16, 49), Shape(1, 12, 65), Shape(3, 16, 129),
               Shape(2, 12, 513), Shape(1, 12, 1024))


# -- decode (one query row per sequence against a KV cache) ----------------------------
FULL, RAMP = "full", "ramp"  # how a decode shape's lengths are laid out (DecodeShape.lengths)


@dataclass(frozen=True, order=True)
class DecodeShape:
    """A decode call: B sequences with caches of S rows, H heads of HEAD_DIM. lengths FULL:
    every sequence attends to all S rows (the benchmark's grid, generation); RAMP: sequence b
    attends to ceil(S / 4 * (b + 1) / B) rows, from S / (4 B) up to S / 4 (a server's batch
    of sequences at different steps in caches preallocated for the longest context)."""

    B: int
    H: int
    S: int
    lengths: str = FULL

    def __post_init__(self) -> None:
        if self.lengths not in (FULL, RAMP):
            raise ValueError(f"lengths must be {FULL!r} or {RAMP!r}, got {self.lengths!r}")

    @property
    def C(self) -> int:
        return self.H * HEAD_DIM

    def host_lengths(self) -> list[int]:
        """The rows each sequence attends to."""
        if self.lengths == FULL:
            return [self.S] * self.B
        return [self._ramp_length(b) for b in range(self.B)]

    def length_range(self) -> tuple[int, int]:
        """The fewest and the most rows a sequence attends to: host_lengths()' ends, without
        listing every sequence (a damaged row of a results file may give any B)."""
        if self.lengths == FULL:
            return self.S, self.S
        return self._ramp_length(0), self._ramp_length(self.B - 1)

    def _ramp_length(self, b: int) -> int:
        """Sequence b's rows in a ragged (RAMP) batch: ceil(S (b + 1) / 4B)."""
        return -(-self.S * (b + 1) // (4 * self.B))

    def bytes_read(self, element_size: int) -> int:
        """The K and V bytes a call must read: every attended row of both caches."""
        return 2 * sum(self.host_lengths()) * self.C * element_size

    def label(self) -> str:
        return f"B={self.B} L={self.S}" + ("" if self.lengths == FULL else " ragged")

    def describe(self) -> str:
        lengths = "" if self.lengths == FULL else f", lengths {self.lengths} up to {self.length_range()[1]}"
        return f"B={self.B}, H={self.H}, S={self.S}, d={HEAD_DIM}{lengths}"


# The decode benchmark's grid: batch x cache length, GPT-2 small's heads, every sequence at
# the cache's full length; and two ragged batches in caches of 16384 rows (the decode versions
# only: the baselines take ragged batches one sequence per call, which times the loop).
DECODE_BATCHES = (1, 8, 32, 64, 128)
DECODE_LENGTHS = (256, 1024, 4096, 16384)
DECODE_SHAPES = (*(DecodeShape(B, GPT2_HEADS, S) for B in DECODE_BATCHES for S in DECODE_LENGTHS),
                 DecodeShape(8, GPT2_HEADS, 16384, RAMP), DecodeShape(64, GPT2_HEADS, 16384, RAMP))
QUICK_DECODE_SHAPES = (DecodeShape(1, GPT2_HEADS, 1024), DecodeShape(8, GPT2_HEADS, 1024),
                       DecodeShape(64, GPT2_HEADS, 4096))
# Rounds per decode shape, the order reversed every other round: two, so that the grid (22
# shapes x 3 dtypes x 13 backends) takes about a minute and a half of an H200 (one round of 10
# backends took 40 s, log 2026-11-27_2).
DECODE_ROUNDS = 2
# Each decode version's "Measured" block in versions/d*/README.md: (dtype, shape), from latency
# (batch 1) to bandwidth (large batches, long caches), float32's largest, and a ragged batch.
DECODE_NOTE_SHAPES = (
    *((precision.BFLOAT16, DecodeShape(B, GPT2_HEADS, S)) for B, S in ((1, 1024), (1, 16384), (8, 1024), (64, 4096),
                                                                        (128, 16384))),
    (precision.FLOAT32, DecodeShape(128, GPT2_HEADS, 16384)),
    (precision.BFLOAT16, DecodeShape(8, GPT2_HEADS, 16384, RAMP)))
