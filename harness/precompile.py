"""Compile ahead: what the sweep's stages will compile, done in a process of its own while the
build and the correctness gate run, so that the stages find it in the on-disk caches.

flex-attention compiles at every new shape (torch.compile: Dynamo traces, Inductor writes
Triton kernels, Triton compiles them), one compilation after another on one CPU core. With
empty caches on an H100 that was about 220 s of a three-dtype sweep: the gate's dynamic
compilations, the kernel benchmark's ten static ones per dtype and generation's lengths. The
prefill grid (harness/kernel_plan.py; flex-attention is one of PyTorch's kernels, so it is
measured there) adds 41 static compilations per dtype, about 5-6 s each with empty caches.
Inductor's FX graph cache and Triton's kernel cache are on disk, so a stage that meets a
graph compiled here only traces it again (about a second) and loads the kernels.

run_all.sh starts one process per dtype in the background before the build and waits for
them before the kernel benchmark, so that nothing here runs on the GPU while anything is
timed. One process per dtype also keeps each under Dynamo's recompile limit
(backends/flex.py RECOMPILE_LIMIT): the static and dynamic compilations of one function in
one process count together. A failure here costs nothing but time: the stages compile what
they do not find.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import torch

from backends import precision, registry
from backends.environment import collect
from backends.registry import Backend, Inputs, Target
from gpt2.config import GPT2Config
from harness.bench_e2e import recompute_plan, row_key
from harness.bench_kernels import shape_seed
from harness.correctness import gate_inputs
from harness.kernel_plan import KernelPlan
from harness.reference import random_qkv
from harness.results import CORRECTNESS, E2E, KERNELS, done
from harness.study import GATE_SHAPES, Shape


@dataclass(frozen=True)
class Stored:
    """The keys of the rows this setup already has (a resumed sweep's stages skip them, so
    there is nothing to compile for them): correctness, kernel and end-to-end rows."""

    correctness: set = field(default_factory=set)
    kernels: set = field(default_factory=set)
    e2e: set = field(default_factory=set)

    @classmethod
    def read(cls, results_dir: Path, device: torch.device) -> Stored:
        provenance = collect(device)
        return cls(*(set(done(table, table.path(results_dir, provenance.slug), provenance))
                     for table in (CORRECTNESS, KERNELS, E2E)))

    def gate_done(self, name: str, dtype: str) -> bool:
        return all((name, dtype, s.B, s.H, s.T) in self.correctness for s in GATE_SHAPES)

    def shapes_to_time(self, name: str, dtype: str, shapes: Sequence[Shape]) -> list[Shape]:
        return [s for s in shapes if (name, dtype, s.B, s.H, s.T) not in self.kernels]

    def generation_done(self, name: str, dtype: str, token_counts: Sequence[int]) -> bool:
        """Whether the original setup's generation (recompute, batch 1) has every length."""
        plan = recompute_plan(token_counts)
        return all(row_key(name, dtype, plan, n) in self.e2e for n in token_counts)


def bench_inputs(shapes: Sequence[Shape], device: torch.device, dtype: str) -> Iterator[Inputs]:
    """The kernel benchmark's inputs, shape by shape (made as it makes them: the same layout)."""
    for shape in shapes:
        q, k, v = random_qkv(shape, seed=shape_seed(shape), device=device, dtype=precision.torch_dtype(dtype))
        yield q, k, v, shape.H


def compilers(backends: Sequence[Backend], device: torch.device, dtype: str) -> list[Backend]:
    """The backends that compile and run here in `dtype`."""
    runnable, _ = registry.partition([b for b in backends if b.compiles], Target.of(device), dtype)
    return runnable


def run(backends: Sequence[Backend], dtype: str, *, plan: KernelPlan, config: GPT2Config,
        token_counts: Sequence[int], device: torch.device, stored: Stored | None = None) -> list[str]:
    """Compile what the gate, the kernel benchmark (at the shapes `plan` gives each backend)
    and a generation of token_counts[-1] tokens by a model of `config` (none for no token
    counts) will compile, for each backend that compiles, leaving out what `stored` says those
    stages will not run; returns the names of the backends that had anything to compile."""
    stored = stored or Stored()
    asked = []
    for backend in compilers(backends, device, dtype):
        name = backend.name
        gate = not stored.gate_done(name, dtype)
        to_time = stored.shapes_to_time(name, dtype, plan.shapes_for(backend))
        generation = (None if not token_counts or stored.generation_done(name, dtype, token_counts)
                      else (config, token_counts[-1]))
        if not gate and not to_time and generation is None:
            continue
        gate_calls = ((q, k, v, shape.H) for shape, q, k, v in gate_inputs(device, dtype)) if gate else ()
        backend.precompile(device, dtype, gate=gate_calls, bench=bench_inputs(to_time, device, dtype),
                           generation=generation)
        asked.append(name)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return asked
