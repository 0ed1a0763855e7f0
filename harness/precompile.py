"""Compile ahead: what the sweep's stages will compile, done in a process of its own while the
build and the correctness gate run, so that the stages find it in the on-disk caches.

flex-attention compiles at every new shape (torch.compile: Dynamo traces, Inductor writes
Triton kernels, Triton compiles them), one compilation after another on one CPU core. With
empty caches on an H100 that was about 220 s of a three-dtype sweep: the gate's dynamic
compilations, the kernel benchmark's ten static ones per dtype and generation's lengths.
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

from typing import Iterator, Sequence

import torch

from backends import precision, registry
from backends.registry import Backend, Inputs, Target
from gpt2.config import GPT2Config
from harness.bench_kernels import shape_seed
from harness.correctness import gate_inputs
from harness.reference import random_qkv
from harness.study import Shape


def bench_inputs(shapes: Sequence[Shape], device: torch.device, dtype: str) -> Iterator[Inputs]:
    """The kernel benchmark's inputs, shape by shape (made as it makes them: the same layout)."""
    for shape in shapes:
        q, k, v = random_qkv(shape, seed=shape_seed(shape), device=device, dtype=precision.torch_dtype(dtype))
        yield q, k, v, shape.H


def compilers(backends: Sequence[Backend], device: torch.device, dtype: str) -> list[Backend]:
    """The backends that compile and run here in `dtype`."""
    runnable, _ = registry.partition([b for b in backends if b.compiles], Target.of(device), dtype)
    return runnable


def run(backends: Sequence[Backend], dtype: str, *, shapes: Sequence[Shape], generation: tuple[GPT2Config, int],
        device: torch.device) -> list[str]:
    """Compile what the gate, the kernel benchmark (at `shapes`) and a generation of
    (config, max_tokens) will compile, for each backend that compiles; returns their names."""
    done = []
    for backend in compilers(backends, device, dtype):
        gate = ((q, k, v, shape.H) for shape, q, k, v in gate_inputs(device, dtype))
        backend.precompile(device, dtype, gate=gate, bench=bench_inputs(shapes, device, dtype),
                           generation=generation)
        done.append(backend.name)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return done
