"""Which shapes the kernel benchmark measures for which backend.

Every backend is measured at the study's shapes (harness/study.py KERNEL_SHAPES, or the quick
sweep's); the prefill grid (GRID_SHAPES: B 1-64 x T 64-1024 at GPT-2 small's heads, and the
wider heads of GPT-2 medium, large and xl) only for PyTorch's kernels and the last version of
each prefill track, both found in the registry (registry.baseline_names, registry.last_versions):
so the sweep grows by the grid times (baselines + 2), not times every version. An earlier
version keeps the study's shapes.
"""
from __future__ import annotations

from dataclasses import dataclass

from backends import registry
from backends.registry import Backend
from harness.study import GRID_SHAPES, KERNEL_SHAPES, QUICK_KERNEL_SHAPES, Shape


def on_grid(backend: Backend) -> bool:
    """Whether the grid is measured for `backend`: one of PyTorch's prefill kernels, or the
    last version of a prefill track."""
    if backend.is_version:
        return any(backend is last for last in registry.last_versions(registry.PREFILL))
    return backend.name in registry.baseline_names(registry.PREFILL)


@dataclass(frozen=True)
class KernelPlan:
    """every: the shapes every backend is measured at; grid: the shapes measured only for the
    backends on_grid() takes (a shape in both is measured for every backend)."""

    every: tuple[Shape, ...]
    grid: tuple[Shape, ...] = ()

    def shapes(self) -> tuple[Shape, ...]:
        """Every shape of the plan, each once, in the order the benchmark measures them: the
        shapes of every backend, then the grid's others."""
        return tuple(dict.fromkeys((*self.every, *self.grid)))

    def measures(self, backend: Backend, shape: Shape) -> bool:
        return shape in self.every or (shape in self.grid and on_grid(backend))

    def shapes_for(self, backend: Backend) -> tuple[Shape, ...]:
        """The shapes `backend` is measured at, in the plan's order."""
        grid = on_grid(backend)  # once: it asks the registry
        return tuple(s for s in self.shapes() if s in self.every or (grid and s in self.grid))


FULL = KernelPlan(KERNEL_SHAPES, GRID_SHAPES)  # python -m harness bench-kernels
QUICK = KernelPlan(QUICK_KERNEL_SHAPES)  # --quick: no grid (the quick sweep must stay within minutes)
GRID_ONLY = KernelPlan((), GRID_SHAPES)  # --grid-only
