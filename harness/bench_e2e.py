"""End-to-end benchmark: GPT-2 greedy generation with every backend in each of its dtypes,
every length at once.

Per backend and dtype (the model's weights cast once to the dtype, activations in it), one
generation of the longest length gives every reported length (gpt2/timing.py): eager times
from EAGER_RUNS runs with CUDA events at the step boundaries, and GPU times from replays of
the whole generation captured once as one CUDA graph (one warm-up replay, then timed ones
within GRAPH_BUDGET_S of GPU time, at most GRAPH_REPLAYS). The graph's tokens are checked
against the eager run's.

Accuracy, on every row:
- tokens: a digest of the generated ids (so a resumed sweep still compares with rows
  measured earlier), whether they equal the same-dtype naive run's, and the fraction of
  generated positions that do (token_agreement). Greedy tokens of different half-precision
  kernels may legitimately part after a near-tie, so in half precision agreement is reported,
  not required.
- logits: teacher-forced on the float32 naive run's longest sequence, the backend's logits
  at every position in its dtype against float32 naive's: max and mean absolute error.
- accuracy_check: in float32, the tokens equal float32 naive's (exact); in half precision,
  the mean logits error is at most 1.25x the same-dtype naive's (LOGITS_FACTOR). The mean is
  the criterion: it weighs every position and vocabulary entry, where the max is one entry of
  25 million and moves with a single near-tie; the max is reported beside it.

Attention share: the same graph captured once per dtype with attention replaced by a stand-in
of negligible cost (an uninitialised output of the right shape: no kernel) is the
non-attention floor per length; share = 1 - floor / GPU time.

On a CPU (tests) the sweep is eager only, timed by the host clock, and says so per row.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
from tqdm import tqdm

from backends import precision, registry
from backends.environment import Provenance, collect
from backends.registry import Backend, BackendUnavailableError, Target
from gpt2.config import GPT2Config
from gpt2.generate import greedy_generate
from gpt2.model import GPT2, AttentionFn
from gpt2.timing import EagerTiming, GenerationPlan, GraphTiming, Spread, time_eager, time_graph
from gpt2.tokenizer import PROMPT, load_tokenizer
from gpt2.weights import WeightsSource, build_model
from harness.results import E2E, OK, E2ERow, done

# Eager runs are host-bound at these sizes (the GPU waits for Python) and shown beside the GPU
# time, the study's measure, which comes from the graph replays. One run: a second cost about
# 2.7 s per backend on an H100 (measured, sweeps e2660f9 and 095c78e), over two minutes of a
# three-dtype sweep, for a spread the tables could only call noisy (up to 25% between two runs).
EAGER_RUNS = 1
# GPU time: one warm-up replay (the first replay of a graph ran up to 1.5% slower than the next,
# measured in experiments/tools/sweep_time_profile.py's run on an H100), then timed replays until
# their GPU time reaches GRAPH_BUDGET_S, at most GRAPH_REPLAYS: two for a half-precision
# generation (0.4-0.6 s), one for a float32 one (1.5-4.7 s). Timed replays of one graph
# differed by at most 0.2% in that run, so a second float32 replay (42 s of a sweep) would
# add nothing but time.
GRAPH_REPLAYS = 2
GRAPH_BUDGET_S = 0.8
WARMUP_TOKENS = 8  # a short generation per backend before timing (loads its kernels)
LOGITS_FACTOR = 1.25  # half precision: mean logits error at most this times the same-dtype naive's
EAGER_ONLY_ON_CPU = "eager only: CUDA graphs need a CUDA device"


@dataclass(frozen=True)
class ModelSource:
    """How to build the model for the sweep (tests pass a tiny one)."""

    build: Callable[[AttentionFn, torch.device, torch.dtype], GPT2]
    weights: str  # described on every row
    config: GPT2Config  # the model's shape, on every row


def gpt2_model(weights: WeightsSource) -> ModelSource:
    return ModelSource(lambda attention, device, dtype: build_model(weights, attention, device, dtype),
                       weights.describe(), weights.config())


def no_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
    """The floor's stand-in: an output of the right shape and layout, and no kernel."""
    return torch.empty_like(q, memory_format=torch.contiguous_format)  # (B, T, C), uninitialised


def token_digest(ids: Sequence[int]) -> str:
    """A short fingerprint of a token sequence (compared across runs and resumes)."""
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class LogitsError:
    max_abs: float
    mean_abs: float


class Sweep:
    """One run of the end-to-end benchmark: the models, the plan and what is already known."""

    def __init__(self, source: ModelSource, plan: GenerationPlan, device: torch.device, results_dir: Path,
                 resume: bool) -> None:
        self.source = source
        self.plan = plan
        self.device = device
        self.provenance: Provenance = collect(device)
        self.path = E2E.path(results_dir, self.provenance.slug)
        self.previous = done(E2E, self.path, self.provenance) if resume else {}
        self._models: dict[str, GPT2] = {}
        self._reference_tokens: dict[str, tuple[int, ...]] = {}  # dtype -> the naive run's tokens
        self._reference_logits: torch.Tensor | None = None  # float32 naive's, on its own sequence
        self._floor: dict[str, dict[int, float] | str] = {}  # dtype -> per length, or why not

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"

    def model(self, dtype: str) -> GPT2:
        """The model in `dtype` (built once: drawn or loaded in float32, then cast)."""
        if dtype not in self._models:
            naive = registry.get(registry.TOKENS_REFERENCE).attention(self.device, dtype)
            self._models[dtype] = self.source.build(naive, self.device, precision.torch_dtype(dtype))
        return self._models[dtype]

    def todo(self, backend: Backend, dtype: str) -> list[int]:
        return [n for n in self.plan.token_counts if (backend.name, dtype, n) not in self.previous]

    def stored(self, name: str, dtype: str) -> E2ERow | None:
        """A row of this setup for `name` in `dtype` (its longest length), if one is stored."""
        return self.previous.get((name, dtype, self.plan.total))

    # -- references -------------------------------------------------------------------
    def _naive_tokens(self, dtype: str) -> tuple[int, ...]:
        """The same-dtype naive run's tokens (generated now, untimed, unless this run has them)."""
        if dtype not in self._reference_tokens:
            model = self.model(dtype)
            model.set_attention(registry.get(registry.TOKENS_REFERENCE).attention(self.device, dtype))
            ids = greedy_generate(model, self.plan.prompt_ids, self.plan.total)
            self._reference_tokens[dtype] = tuple(ids[0].tolist())
        return self._reference_tokens[dtype]

    def reference_logits(self) -> torch.Tensor:
        """float32 naive's logits (1, total, vocab) on its own longest sequence."""
        if self._reference_logits is None:
            sequence = torch.tensor([self._naive_tokens(precision.FLOAT32)], device=self.device)
            model = self.model(precision.FLOAT32)
            model.set_attention(registry.get(registry.TOKENS_REFERENCE).attention(self.device, precision.FLOAT32))
            with torch.inference_mode():
                self._reference_logits = model(sequence, all_positions=True).float()
        return self._reference_logits

    def logits_error(self, dtype: str) -> LogitsError:
        """The current attention's teacher-forced logits in `dtype` against float32 naive's."""
        sequence = torch.tensor([self._naive_tokens(precision.FLOAT32)], device=self.device)
        with torch.inference_mode():
            logits = self.model(dtype)(sequence, all_positions=True).float()  # (1, total, vocab)
            diff = (logits - self.reference_logits()).abs()
            return LogitsError(max_abs=diff.max().item(), mean_abs=diff.mean().item())

    def floor(self, dtype: str) -> dict[int, float] | str:
        """GPU time per length without attention, measured once per dtype (or why not)."""
        if dtype not in self._floor:
            model = self.model(dtype)
            previous_attention = model.attention
            model.set_attention(no_attention)
            try:
                timing = time_graph(model, self.plan, replays=GRAPH_REPLAYS, budget_s=GRAPH_BUDGET_S)
                self._floor[dtype] = {n: s.median for n, s in timing.seconds.items()}
            except Exception as err:  # noqa: BLE001 -- reported on every row instead of a share
                self._floor[dtype] = f"no attention share: the floor could not be captured ({err})"
            finally:
                model.set_attention(previous_attention)
        return self._floor[dtype]

    # -- measuring --------------------------------------------------------------------
    def measure(self, backend: Backend, dtype: str) -> tuple[EagerTiming, GraphTiming | None, str | None]:
        model = self.model(dtype)
        model.set_attention(backend.attention(self.device, dtype))
        backend.prepare_generation(model, self.plan.total)
        greedy_generate(model, self.plan.prompt_ids, self.plan.prompt_len + WARMUP_TOKENS)
        eager = time_eager(model, self.plan, runs=EAGER_RUNS)
        if backend.name == registry.TOKENS_REFERENCE:
            self._reference_tokens[dtype] = eager.token_ids
        if not self.on_cuda:
            return eager, None, EAGER_ONLY_ON_CPU
        try:
            return eager, time_graph(model, self.plan, replays=GRAPH_REPLAYS, budget_s=GRAPH_BUDGET_S), None
        except Exception as err:  # noqa: BLE001 -- any capture failure is reported on the row
            first_line = (str(err).strip().splitlines() or [""])[0]
            return eager, None, f"not capturable ({type(err).__name__}: {first_line}): eager time only"

    def _naive_logits_mean(self, dtype: str, own: LogitsError, backend: Backend) -> float | None:
        """The same-dtype naive's mean logits error: its stored row, or its own when it is naive."""
        if backend.name == registry.TOKENS_REFERENCE:
            return own.mean_abs
        row = self.stored(registry.TOKENS_REFERENCE, dtype)
        return row.logits_mean_abs_err if row else None

    def rows(self, backend: Backend, dtype: str, eager: EagerTiming, graph: GraphTiming | None,
             note: str | None) -> list[E2ERow]:
        notes = [note] if note else []
        match = None
        if graph is not None:
            match = graph.token_ids == eager.token_ids
            if not match:
                notes.append("the graph's tokens DIFFER from the eager run's")
                tqdm.write(f"WARNING {backend.name} ({dtype}): the replayed graph generated other tokens than "
                           "the eager run")
        floor = self.floor(dtype) if graph is not None else None
        if isinstance(floor, str):
            notes.append(floor)
            floor = None
        logits = self.logits_error(dtype)
        naive_mean = self._naive_logits_mean(dtype, logits, backend)
        reference = self._naive_tokens(dtype)
        rows = []
        for n in self.todo(backend, dtype):
            digest = token_digest(eager.token_ids[:n])
            positions = range(self.plan.prompt_len, n)
            same = eager.token_ids[:n] == reference[:n]
            agreement = sum(eager.token_ids[p] == reference[p] for p in positions) / len(positions)
            if precision.is_half(dtype):
                check = None if naive_mean is None else logits.mean_abs <= LOGITS_FACTOR * naive_mean
            else:
                check = same
            gpu = graph.seconds[n] if graph is not None else None
            rows.append(self._row(backend, dtype, n, OK, "; ".join(notes) or None, eager=eager, gpu=gpu,
                                  digest=digest, same=same, agreement=agreement, logits=logits, check=check,
                                  match=match, floor=floor[n] if floor and gpu else None))
        return rows

    def _row(self, backend: Backend, dtype: str, n: int, status: str, notes: str | None, *,
             eager: EagerTiming | None = None, gpu: Spread | None = None, digest: str | None = None,
             same: bool | None = None, agreement: float | None = None, logits: LogitsError | None = None,
             check: bool | None = None, match: bool | None = None, floor: float | None = None) -> E2ERow:
        config = self.source.config
        spread = eager.seconds[n] if eager else None
        return E2ERow(
            backend=backend.name, dtype=dtype, tokens=n, prompt_tokens=self.plan.prompt_len, status=status,
            notes=notes, n_layer=config.n_layer, n_head=config.n_head, n_embd=config.n_embd,
            replays=len(gpu.values) if gpu else None, eager_runs=EAGER_RUNS if eager else None,
            seconds_gpu_median=gpu.median if gpu else None, seconds_gpu_min=gpu.min if gpu else None,
            seconds_gpu_max=gpu.max if gpu else None,
            seconds_eager_median=spread.median if spread else None, seconds_eager_min=spread.min if spread else None,
            seconds_eager_max=spread.max if spread else None,
            tokens_per_second=self.plan.generated(n) / gpu.median if gpu else None,
            peak_memory_bytes=eager.peak_memory_bytes[n] if eager and eager.peak_memory_bytes else None,
            tokens_sha256=digest, same_tokens_as_naive=same, token_agreement=agreement,
            logits_max_abs_err=logits.max_abs if logits else None,
            logits_mean_abs_err=logits.mean_abs if logits else None, accuracy_check=check,
            graph_tokens_match_eager=match, seconds_floor_gpu=floor,
            attention_gpu_share=1.0 - floor / gpu.median if floor and gpu else None,
            weights=self.source.weights, provenance=self.provenance)

    def status_rows(self, backend: Backend, dtype: str, reason: str) -> list[E2ERow]:
        return [self._row(backend, dtype, n, reason, None) for n in self.todo(backend, dtype)]


def _print_last(backend: Backend, dtype: str, row: E2ERow) -> None:
    gpu = "–" if row.seconds_gpu_median is None else f"{row.seconds_gpu_median:.3f} s"
    tqdm.write(f"{backend.name} ({dtype}): {row.tokens} tokens, GPU {gpu}, eager {row.seconds_eager_median:.3f} s, "
               f"tokens as naive's: {row.token_agreement:.0%}, logits error mean {row.logits_mean_abs_err:.2e}")


def run(backends: Sequence[Backend], dtypes: Sequence[str], token_counts: Sequence[int], *, source: ModelSource,
        results_dir: Path, resume: bool = True, excluded: dict[tuple[str, str], str] | None = None,
        device: torch.device) -> Path:
    """Time generation for every backend in each of `dtypes`; one CSV row per (backend, dtype,
    length); returns the file. In each dtype the tokens reference (naive) is measured first and
    the dtype's kernel reference (sdpa-efficient in float32, sdpa-cudnn in half precision: what
    the README's GPT-2 ratios divide by) next, each added if missing, unless their rows of this
    setup exist: a sweep of a few versions still has its ratios' reference in the same run, as
    the kernel benchmark does."""
    plan = GenerationPlan(tuple(load_tokenizer().encode(PROMPT)), tuple(sorted(token_counts)))
    sweep = Sweep(source, plan, device, results_dir, resume)
    excluded = excluded or {}
    for dtype in dtypes:
        order = registry.with_required(registry.with_required(backends, registry.kernel_reference(dtype)),
                                       registry.TOKENS_REFERENCE)
        _, reasons = registry.partition(order, Target.of(device), dtype)
        reasons.update({name: why for (name, d), why in excluded.items() if d == dtype})
        reasons.update({b.name: b.end_to_end for b in order if b.end_to_end and b.name not in reasons})
        pending = [b for b in order if sweep.todo(b, dtype)]
        progress = tqdm(pending, desc=f"end-to-end, {dtype}", unit="backend")
        for backend in progress:
            if backend.name in reasons:
                rows = sweep.status_rows(backend, dtype, reasons[backend.name])
            else:
                progress.set_postfix_str(backend.name)
                try:
                    measured = sweep.measure(backend, dtype)
                except (BackendUnavailableError, RuntimeError) as err:  # e.g. its build failed
                    reason = f"failed to run: {(str(err).strip().splitlines() or [''])[0]}"
                    tqdm.write(f"{backend.name} ({dtype}): {reason}")
                    rows = sweep.status_rows(backend, dtype, reason)
                else:
                    rows = sweep.rows(backend, dtype, *measured)
                    _print_last(backend, dtype, rows[-1])
            for row in rows:
                E2E.append(sweep.path, row)
            if backend.name == registry.TOKENS_REFERENCE:  # later rows compare with it
                sweep.previous.update({E2E.key(row): row for row in rows})
        progress.close()
    return sweep.path
