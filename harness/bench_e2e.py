"""End-to-end benchmark: GPT-2 greedy generation with every backend, every length at once.

Per backend, one generation of the longest length gives every reported length
(gpt2/timing.py): eager times from 3 runs with CUDA events at the step boundaries, and
GPU times from replays of the whole generation captured once as one CUDA graph. The
graph's tokens are checked against the eager run's, and every backend's tokens against
the tokens reference's (registry.TOKENS_REFERENCE) through a digest stored on each row,
so a resumed sweep still compares with rows measured earlier.

Attention share: the same graph captured once per sweep with attention replaced by a
stand-in of negligible cost (an uninitialised output of the right shape: no kernel) is
the non-attention floor per length; share = 1 - floor / GPU time.

On a CPU (tests) the sweep is eager only, timed by the host clock, and says so per row.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
from tqdm import tqdm

from backends import registry
from backends.environment import Provenance, collect
from backends.precision import FLOAT32
from backends.registry import Backend, BackendUnavailableError, Target
from gpt2.generate import greedy_generate
from gpt2.model import GPT2, AttentionFn
from gpt2.timing import EagerTiming, GenerationPlan, GraphTiming, Spread, time_eager, time_graph
from gpt2.tokenizer import PROMPT, load_tokenizer
from gpt2.weights import WeightsSource, build_model
from harness.results import E2E, OK, E2ERow, done

EAGER_RUNS = 3
GRAPH_REPLAYS = 3  # timed, after one warm-up replay
WARMUP_TOKENS = 8  # a short generation per backend before timing (loads its kernels)
EAGER_ONLY_ON_CPU = "eager only: CUDA graphs need a CUDA device"


@dataclass(frozen=True)
class ModelSource:
    """How to build the model for the sweep (tests pass a tiny one)."""

    build: Callable[[AttentionFn, torch.device], GPT2]
    weights: str  # described on every row


def gpt2_model(weights: WeightsSource) -> ModelSource:
    return ModelSource(lambda attention, device: build_model(weights, attention, device), weights.describe())


def no_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
    """The floor's stand-in: an output of the right shape and layout, and no kernel."""
    return torch.empty_like(q, memory_format=torch.contiguous_format)  # (B, T, C), uninitialised


def token_digest(ids: Sequence[int]) -> str:
    """A short fingerprint of a token sequence (compared across runs and resumes)."""
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()[:16]


class Sweep:
    """One run of the end-to-end benchmark: the model, the plan and what is already known."""

    def __init__(self, source: ModelSource, plan: GenerationPlan, device: torch.device, results_dir: Path,
                 resume: bool) -> None:
        self.source = source
        self.plan = plan
        self.device = device
        self.provenance: Provenance = collect(device)
        self.path = E2E.path(results_dir, self.provenance.slug)
        self.previous = done(E2E, self.path, self.provenance) if resume else {}
        self.model = source.build(registry.get(registry.TOKENS_REFERENCE).attention(device, FLOAT32), device)
        self.reference_digests = {n: row.tokens_sha256 for (name, _, n), row in self.previous.items()
                                  if name == registry.TOKENS_REFERENCE and row.tokens_sha256}
        self._floor: dict[int, float] | None = None
        self._floor_error: str | None = None

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"

    def todo(self, backend: Backend) -> list[int]:
        return [n for n in self.plan.token_counts if (backend.name, FLOAT32, n) not in self.previous]

    def floor(self) -> dict[int, float] | None:
        """GPU time per length without attention, measured once per sweep."""
        if self._floor is None and self._floor_error is None:
            previous_attention = self.model.attention
            self.model.set_attention(no_attention)
            try:
                timing = time_graph(self.model, self.plan, replays=GRAPH_REPLAYS)
                self._floor = {n: s.median for n, s in timing.seconds.items()}
            except Exception as err:  # noqa: BLE001 -- reported on every row instead of a share
                self._floor_error = f"no attention share: the floor could not be captured ({err})"
            finally:
                self.model.set_attention(previous_attention)
        return self._floor

    def measure(self, backend: Backend) -> tuple[EagerTiming, GraphTiming | None, str | None]:
        self.model.set_attention(backend.attention(self.device, FLOAT32))
        greedy_generate(self.model, self.plan.prompt_ids, self.plan.prompt_len + WARMUP_TOKENS)
        eager = time_eager(self.model, self.plan, runs=EAGER_RUNS)
        if not self.on_cuda:
            return eager, None, EAGER_ONLY_ON_CPU
        try:
            return eager, time_graph(self.model, self.plan, replays=GRAPH_REPLAYS), None
        except Exception as err:  # noqa: BLE001 -- any capture failure is reported on the row
            first_line = (str(err).strip().splitlines() or [""])[0]
            return eager, None, f"not capturable ({type(err).__name__}: {first_line}): eager time only"

    def rows(self, backend: Backend, eager: EagerTiming, graph: GraphTiming | None, note: str | None) -> list[E2ERow]:
        notes = [note] if note else []
        match = None
        if graph is not None:
            match = graph.token_ids == eager.token_ids
            if not match:
                notes.append("the graph's tokens DIFFER from the eager run's")
                tqdm.write(f"WARNING {backend.name}: the replayed graph generated other tokens than the eager run")
        floor = self.floor() if graph is not None else None
        if graph is not None and floor is None and self._floor_error:
            notes.append(self._floor_error)
        rows = []
        for n in self.todo(backend):
            digest = token_digest(eager.token_ids[:n])
            if backend.name == registry.TOKENS_REFERENCE:
                self.reference_digests[n] = digest
            reference = self.reference_digests.get(n)
            gpu = graph.seconds[n] if graph is not None else None
            rows.append(self._row(backend, n, OK, "; ".join(notes) or None, eager=eager, gpu=gpu, digest=digest,
                                  same=None if reference is None else digest == reference, match=match,
                                  floor=floor[n] if floor and gpu else None))
        return rows

    def _row(self, backend: Backend, n: int, status: str, notes: str | None, *, eager: EagerTiming | None = None,
             gpu: Spread | None = None, digest: str | None = None, same: bool | None = None, match: bool | None = None,
             floor: float | None = None) -> E2ERow:
        config = self.model.config
        spread = eager.seconds[n] if eager else None
        return E2ERow(
            backend=backend.name, dtype=FLOAT32, tokens=n, prompt_tokens=self.plan.prompt_len, status=status, notes=notes,
            n_layer=config.n_layer, n_head=config.n_head, n_embd=config.n_embd,
            replays=GRAPH_REPLAYS if gpu else None, eager_runs=EAGER_RUNS if eager else None,
            seconds_gpu_median=gpu.median if gpu else None, seconds_gpu_min=gpu.min if gpu else None,
            seconds_gpu_max=gpu.max if gpu else None,
            seconds_eager_median=spread.median if spread else None, seconds_eager_min=spread.min if spread else None,
            seconds_eager_max=spread.max if spread else None,
            tokens_per_second=self.plan.generated(n) / gpu.median if gpu else None,
            peak_memory_bytes=eager.peak_memory_bytes[n] if eager and eager.peak_memory_bytes else None,
            tokens_sha256=digest, same_tokens_as_naive=same, token_agreement=None, logits_max_abs_err=None,
            logits_mean_abs_err=None, accuracy_check=same, graph_tokens_match_eager=match,
            seconds_floor_gpu=floor, attention_gpu_share=1.0 - floor / gpu.median if floor and gpu else None,
            weights=self.source.weights, provenance=self.provenance)

    def status_rows(self, backend: Backend, reason: str) -> list[E2ERow]:
        return [self._row(backend, n, reason, None) for n in self.todo(backend)]


def _print_last(backend: Backend, row: E2ERow) -> None:
    gpu = "–" if row.seconds_gpu_median is None else f"{row.seconds_gpu_median:.3f} s"
    tqdm.write(f"{backend.name}: {row.tokens} tokens, GPU {gpu}, eager {row.seconds_eager_median:.3f} s")


def run(backends: Sequence[Backend], token_counts: Sequence[int], *, source: ModelSource, results_dir: Path,
        resume: bool = True, excluded: dict[str, str] | None = None,
        device: torch.device) -> Path:
    """Time generation for every backend; one CSV row per (backend, length); returns the file.

    The tokens reference is measured first (added if missing) unless its rows exist.
    """
    plan = GenerationPlan(tuple(load_tokenizer().encode(PROMPT)), tuple(sorted(token_counts)))
    sweep = Sweep(source, plan, device, results_dir, resume)
    order = registry.with_required(backends, registry.TOKENS_REFERENCE)
    _, reasons = registry.partition(order, Target.of(device), FLOAT32)
    reasons.update(excluded or {})
    reasons.update({b.name: b.end_to_end for b in order if b.end_to_end and b.name not in reasons})
    progress = tqdm(order, desc="end-to-end", unit="backend")
    for backend in progress:
        if not sweep.todo(backend):
            continue
        if backend.name in reasons:
            rows = sweep.status_rows(backend, reasons[backend.name])
        else:
            progress.set_postfix_str(backend.name)
            try:
                measured = sweep.measure(backend)
            except (BackendUnavailableError, RuntimeError) as err:  # e.g. its build failed
                reason = f"failed to run: {(str(err).strip().splitlines() or [''])[0]}"
                tqdm.write(f"{backend.name}: {reason}")
                rows = sweep.status_rows(backend, reason)
            else:
                rows = sweep.rows(backend, *measured)
                _print_last(backend, rows[-1])
        for row in rows:
            E2E.append(sweep.path, row)
    progress.close()
    return sweep.path
