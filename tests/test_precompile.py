"""Compiling ahead (harness/precompile.py): which backends it asks, and with exactly the calls
the gate, the kernel benchmark and generation will make; and the graph replay budget."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pytest
import torch

from backends import precision, registry
from backends.registry import NaiveBaseline
from gpt2.config import GPT2Config
from gpt2.timing import _enough
from harness import precompile
from harness.kernel_plan import QUICK
from harness.study import GATE_SHAPES, QUICK_KERNEL_SHAPES


@dataclass(frozen=True, kw_only=True)
class RecordingCompiler(NaiveBaseline):
    """Runs anywhere and 'compiles': records what precompile asks of it."""

    compiles: ClassVar[bool] = True
    calls: dict = field(default_factory=dict, compare=False)

    def precompile(self, device, dtype, *, gate, bench, generation):
        self.calls[dtype] = ([(q.shape, q.dtype, h) for q, _, _, h in gate],
                             [(q.shape, q.dtype, h) for q, _, _, h in bench], generation)


CPU = torch.device("cpu")
COUNTS = (32, 64)


def shapes_of(shapes, dtype=torch.bfloat16):
    return [((s.B, s.T, s.C), dtype, s.H) for s in shapes]


def test_precompile_asks_only_the_backends_that_compile_with_the_stages_calls():
    compiler = RecordingCompiler(name="compiler", description="test", requires_cuda=False)
    config = GPT2Config()
    asked = precompile.run([compiler, registry.get("naive")], precision.BFLOAT16, plan=QUICK,
                           config=config, token_counts=COUNTS, device=CPU)
    assert asked == ["compiler"]
    gate, bench, generation = compiler.calls[precision.BFLOAT16]
    assert gate == shapes_of(GATE_SHAPES)
    assert bench == shapes_of(QUICK_KERNEL_SHAPES)
    assert generation == (config, COUNTS[-1])


def test_precompile_leaves_out_what_a_resumed_sweep_will_not_run():
    """Stored rows of this setup: the gate is done, one kernel shape is timed, generation is
    done; only the other kernel shapes are compiled, and nothing at all once every row is in."""
    name, dtype = "compiler", precision.BFLOAT16
    first, *rest = QUICK_KERNEL_SHAPES
    stored = precompile.Stored(correctness={(name, dtype, s.B, s.H, s.T) for s in GATE_SHAPES},
                               kernels={(name, dtype, first.B, first.H, first.T)},
                               e2e={(name, dtype, "recompute", 1, 8, n) for n in COUNTS})
    compiler = RecordingCompiler(name=name, description="test", requires_cuda=False)
    asked = precompile.run([compiler], dtype, plan=QUICK, config=GPT2Config(), token_counts=COUNTS,
                           device=CPU, stored=stored)
    assert asked == [name]
    assert compiler.calls[dtype] == ([], shapes_of(rest), None)

    everything = precompile.Stored(stored.correctness, {(name, dtype, s.B, s.H, s.T) for s in QUICK_KERNEL_SHAPES},
                                   stored.e2e)
    again = RecordingCompiler(name=name, description="test", requires_cuda=False)
    assert precompile.run([again], dtype, plan=QUICK, config=GPT2Config(), token_counts=COUNTS,
                          device=CPU, stored=everything) == []
    assert again.calls == {}


def test_precompile_skips_a_compiler_that_cannot_run_here():
    cuda_only = RecordingCompiler(name="compiler", description="test", requires_cuda=True)
    assert precompile.run([cuda_only], precision.FLOAT32, plan=QUICK, config=GPT2Config(),
                          token_counts=COUNTS, device=CPU) == []
    assert cuda_only.calls == {}


def test_only_flex_attention_compiles_and_it_says_how():
    compilers = [b for b in registry.select("all") if b.compiles]
    assert [b.name for b in compilers] == ["flex-attention"]
    assert all(type(b).precompile is not registry.Backend.precompile for b in compilers)


@pytest.mark.parametrize("timed, enough", [
    ([], False),  # at least one timed replay
    ([0.4], False),  # a half-precision generation: a second replay fits in the budget
    ([0.4, 0.41], True),  # at most GRAPH_REPLAYS
    ([1.5], True),  # a float32 generation: one replay fills the budget
])
def test_timed_replays_stop_at_the_budget_or_the_count(timed, enough):
    assert _enough(timed, replays=2, budget_s=0.8) is enough
    assert _enough(timed[:1], replays=1, budget_s=None) is bool(timed)
