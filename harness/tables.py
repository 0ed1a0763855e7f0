"""One GPU's results, loaded once for plots and tables: the latest row per measurement."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, TypeVar

from backends import registry
from harness.results import E2E, KERNELS, STAGES, E2ERow, KernelRow, ResultsFileError, StageRow, Table, gpu_slugs
from harness.study import Shape

R = TypeVar("R", KernelRow, E2ERow)


def backend_rank(name: str) -> int:
    """Registry order (baselines, then versions); unknown names last."""
    order = registry.names()
    return order.index(name) if name in order else len(order)


@dataclass
class GpuResults:
    slug: str
    gpu: str
    kernels: list[KernelRow]  # measured rows, latest per (backend, B, H, T), in registry order
    e2e: list[E2ERow]  # measured rows, latest per (backend, tokens), in registry order
    not_measured: dict[str, str] = field(default_factory=dict)  # backend -> why (status rows)
    problems: list[str] = field(default_factory=list)  # damaged rows that were skipped
    stages: list[StageRow] = field(default_factory=list)  # ./run_all.sh runs at the results' commits, by start

    @property
    def empty(self) -> bool:
        return not self.kernels and not self.e2e

    def kernel(self, backend: str, shape: Shape) -> KernelRow | None:
        return next((r for r in self.kernels if r.backend == backend and r.shape == shape), None)

    def kernel_rows(self, shape: Shape) -> list[KernelRow]:
        return [r for r in self.kernels if r.shape == shape]

    def kernel_shapes(self) -> list[Shape]:
        return sorted({r.shape for r in self.kernels})

    def end_to_end(self, backend: str, tokens: int) -> E2ERow | None:
        return next((r for r in self.e2e if r.backend == backend and r.tokens == tokens), None)

    def e2e_rows(self, tokens: int) -> list[E2ERow]:
        return [r for r in self.e2e if r.tokens == tokens]

    def backends(self, rows: Iterable[KernelRow | E2ERow]) -> list[str]:
        return sorted({r.backend for r in rows}, key=backend_rank)

    def notes(self) -> dict[str, str]:
        """backend -> its notes (e.g. not capturable), from the measured rows."""
        found: dict[str, str] = {}
        for row in [*self.kernels, *self.e2e]:
            if row.notes and row.backend not in found:
                found[row.backend] = row.notes
        return found

    def provenance_line(self) -> str:
        rows = [*self.kernels, *self.e2e]
        if not rows:
            return self.gpu
        commits = ", ".join(sorted({r.provenance.commit for r in rows}))
        dates = sorted(r.provenance.date[:10] for r in rows)
        when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
        last = max(rows, key=lambda r: r.provenance.date).provenance
        weights = sorted({r.weights for r in self.e2e})
        return (f"{self.gpu}, driver {last.driver}, CUDA {last.cuda}, torch {last.torch}, commit {commits}, {when}"
                + (f", weights {', '.join(weights)}" if weights else ""))


def _latest(rows: list[R], table: Table[R]) -> list[R]:
    newest: dict[tuple, R] = {}
    for row in sorted(rows, key=lambda r: r.provenance.date):
        newest[table.key(row)] = row
    return sorted(newest.values(), key=lambda r: backend_rank(r.backend))


def load(slug: str, results_dir: Path) -> GpuResults:
    """The results of one GPU folder. Raises ResultsFileError for a file of another schema
    or a folder that mixes GPUs."""
    problems: list[str] = []
    loaded = {}
    for table in (KERNELS, E2E):
        read = table.read(table.path(results_dir, slug))
        problems += read.problems
        loaded[table.file_name] = _latest(read.rows, table)
    kernels: list[KernelRow] = loaded[KERNELS.file_name]
    e2e: list[E2ERow] = loaded[E2E.file_name]
    gpus = sorted({r.provenance.gpu for r in [*kernels, *e2e]})
    if len(gpus) > 1:
        raise ResultsFileError(f"{results_dir / slug} mixes GPUs {gpus}: numbers from different GPUs never mix")
    not_measured: dict[str, str] = {}
    for row in [*kernels, *e2e]:
        reasons = not_measured.get(row.backend, "")
        if not row.measured and row.status not in reasons:
            not_measured[row.backend] = f"{reasons}; {row.status}" if reasons else row.status
    gpu = gpus[0] if gpus else slug
    commits = {r.provenance.commit for r in [*kernels, *e2e]}
    stages = STAGES.read(STAGES.path(results_dir, slug))
    problems += stages.problems
    runs = sorted((r for r in stages.rows if r.provenance.commit in commits and r.provenance.gpu == gpu),
                  key=lambda r: r.run)
    return GpuResults(slug, gpu, [r for r in kernels if r.measured], [r for r in e2e if r.measured], not_measured,
                      problems, runs)


def load_all(results_dir: Path) -> list[GpuResults]:
    """Every GPU folder under `results_dir` that holds results."""
    return [r for r in (load(slug, results_dir) for slug in gpu_slugs(results_dir)) if not r.empty or r.not_measured]
