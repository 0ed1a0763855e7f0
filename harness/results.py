"""CSV files of measurements under results/<gpu>/, written row by row so that an
interrupted sweep keeps every finished row and a rerun resumes where it stopped."""
from __future__ import annotations

import csv
import os
from pathlib import Path

from harness.environment import PROVENANCE_FIELDS, same_setup
from harness.registry import PROJECT_ROOT

# STUDY_RESULTS_ROOT / STUDY_PLOTS_ROOT redirect a trial run away from the committed folders.
RESULTS_ROOT = Path(os.environ.get("STUDY_RESULTS_ROOT", PROJECT_ROOT / "results"))
PLOTS_ROOT = Path(os.environ.get("STUDY_PLOTS_ROOT", PROJECT_ROOT / "plots"))


class ResultsFile:
    """One CSV with a fixed column order; `key_fields` identify a measurement."""

    def __init__(self, path: Path, fields: list[str], key_fields: list[str]) -> None:
        self.path = path
        self.fields = fields + [f for f in PROVENANCE_FIELDS if f not in fields]
        self.key_fields = key_fields

    def rows(self) -> list[dict[str, str]]:
        if not self.path.exists():
            return []
        with self.path.open(newline="") as f:
            return list(csv.DictReader(f))

    def key(self, row: dict) -> tuple[str, ...]:
        return tuple(str(row[k]) for k in self.key_fields)

    def done(self, provenance: dict) -> dict[tuple[str, ...], dict[str, str]]:
        """Rows already measured on this setup (same GPU, driver, CUDA, torch, commit)."""
        return {self.key(r): r for r in self.rows() if same_setup(r, provenance)}

    def append(self, row: dict) -> None:
        """Append one row and push it to disk before returning."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists() or self.path.stat().st_size == 0
        with self.path.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.fields, extrasaction="raise")
            if new:
                writer.writeheader()
            writer.writerow({k: _format(row.get(k)) for k in self.fields})
            f.flush()
            os.fsync(f.fileno())


def _format(value: object) -> object:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else value


def kernels_file(slug: str) -> ResultsFile:
    return ResultsFile(RESULTS_ROOT / slug / "kernels.csv",
                       ["backend", "B", "H", "T", "d", "status", "reps", "us_median", "us_min", "us_max",
                        "tflops", "ratio_to_sdpa_efficient", "fp32_peak_tflops", "fraction_of_fp32_peak"],
                       ["backend", "B", "H", "T"])


def e2e_file(slug: str) -> ResultsFile:
    return ResultsFile(RESULTS_ROOT / slug / "e2e.csv",
                       ["backend", "tokens", "status", "runs", "seconds_median", "seconds_min", "seconds_max",
                        "tokens_per_second", "peak_memory_bytes", "same_tokens_as_naive",
                        "attention_gpu_share", "weights"],
                       ["backend", "tokens"])


def correctness_file(slug: str) -> ResultsFile:
    return ResultsFile(RESULTS_ROOT / slug / "correctness.csv",
                       ["backend", "B", "T", "C", "rel_err", "max_abs_err", "passed"],
                       ["backend", "B", "T", "C"])


def gpu_slugs(root: Path = RESULTS_ROOT) -> list[str]:
    """GPUs with results under `root`, one folder each."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir())
