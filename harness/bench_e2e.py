"""End-to-end benchmark: GPT-2 greedy generation with every backend in each of its dtypes, in
both generation modes (gpt2/modes.py), one plan after another (gpt2/timing.py GenerationPlan;
the constants are in harness/study.py):

- recompute, the original study's: one sequence from the study's 8-token prompt, every length
  of TOKEN_COUNTS from one generation, over the rows that provide the prefill op;
- kv-cache: B sequences of KV_BATCHES with prompts of KV_PROMPT_TOKENS (gpt2/prompts.py), each
  generating KV_NEW_TOKENS, over the rows that provide both ops, the study's own pair (a
  composite row) included; and, where asked, Hugging Face transformers' own generate() on the
  same weights (harness/hf_generate.py), what a user runs without this study.

Per backend, dtype and plan (the model's weights cast once to the dtype, activations in it), one
generation of the longest length gives every reported length: eager times from EAGER_RUNS runs
with CUDA events at the step boundaries, and GPU times from replays of the whole generation
(prefill and every step) captured once as one CUDA graph (one warm-up replay, then timed ones
within GRAPH_BUDGET_S of GPU time, at most GRAPH_REPLAYS). The graph's tokens are checked against
the eager run's. tokens/s counts the generated tokens of every sequence.

Accuracy, on every row, against naive's run of the same mode, batch and prompt:
- tokens: a digest of the generated ids (so a resumed sweep still compares with rows
  measured earlier), whether they equal the same-dtype naive run's, and the fraction of
  generated positions of every sequence that do (token_agreement). Greedy tokens of different
  half-precision kernels may legitimately part after a near-tie, so in half precision agreement
  is reported, not required.
- logits: teacher-forced on the float32 naive run's tokens through the mode's own path
  (recompute: one pass over each whole sequence, every position; kv-cache: the prompts'
  prefill, then one decode step per token), the backend's logits in its dtype against float32
  naive's on the same path, computed in lockstep and accumulated step by step (never all
  positions of a batch at once): max and mean absolute error.
- accuracy_check: in float32, the tokens equal float32 naive's (exact); in half precision,
  the mean logits error is at most 1.25x the same-dtype naive's (LOGITS_FACTOR). The mean is
  the criterion: it weighs every position and vocabulary entry, where the max is one entry of
  millions and moves with a single near-tie; the max is reported beside it.

Attention share: the same graph captured once per dtype and plan with the attention ops (prefill
and decode) replaced by stand-ins of negligible cost (uninitialised outputs of the right shape:
no kernel) is the non-attention floor per length; share = 1 - floor / GPU time.

transformers-generate rows: eager time and peak memory of one generate() call (its dynamic cache
is not one CUDA graph), token agreement with the same-dtype naive kv-cache run; in float32 the
check is exact tokens, in half precision there is none (no logits are compared).

On a CPU (tests) the sweep is eager only, timed by the host clock, and says so per row.
"""
from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import torch
from tqdm import tqdm

from backends import precision, registry
from backends.environment import Provenance, collect
from backends.registry import Backend, BackendUnavailableError, Target
from gpt2.config import GPT2Config
from gpt2.model import GPT2, AttentionFn, DecodeFn
from gpt2.modes import KV_CACHE, RECOMPUTE, GenerationMode, by_name, greedy_generate
from gpt2.prompts import STUDY_PROMPT_TOKENS, study_prompts
from gpt2.timing import EagerTiming, GenerationPlan, GraphTiming, Spread, rows_of, time_eager, time_graph
from gpt2.weights import WeightsSource, build_model
from harness import hf_generate
from harness.results import E2E, OK, E2ERow, done
from harness.study import (KV_BATCHES, KV_NEW_TOKENS, KV_PROMPT_TOKENS, QUICK_KV_BATCHES, QUICK_KV_NEW_TOKENS,
                           QUICK_KV_PROMPT_TOKENS, QUICK_TOKEN_COUNTS, TOKEN_COUNTS)

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


def composite_parts(name: str, dtype: str) -> str | None:
    """'h23 + d08': the versions a composite backend runs in `dtype` now, recorded in its row
    (the registry's last versions change; the row must say what it measured). None otherwise."""
    row = registry.get(name) if name in registry.names() else None
    if not isinstance(row, registry.StudyPair):
        return None
    try:
        return row.describe_parts(dtype)
    except registry.BackendUnavailableError:
        return None


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
    """The floor's prefill stand-in: an output of the right shape and layout, and no kernel."""
    return torch.empty_like(q, memory_format=torch.contiguous_format)  # (B, T, C), uninitialised


def no_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lengths: torch.Tensor,
              num_heads: int) -> torch.Tensor:
    """The floor's decode stand-in: an output of the right shape and layout, and no kernel."""
    return torch.empty_like(q, memory_format=torch.contiguous_format)  # (B, C), uninitialised


# -- what is measured ------------------------------------------------------------------------
def recompute_plan(token_counts: Sequence[int]) -> GenerationPlan:
    """The original study's generation: the study's prompt, one sequence, recomputed at each step."""
    return GenerationPlan(study_prompts(1, STUDY_PROMPT_TOKENS), tuple(sorted(token_counts)), RECOMPUTE)


def kv_cache_plans(batches: Sequence[int], prompt_lengths: Sequence[int], new_tokens: int) -> list[GenerationPlan]:
    """One KV-cache plan per prompt length and batch: new_tokens generated per sequence."""
    return [GenerationPlan(study_prompts(batch, prompt), (prompt + new_tokens,), KV_CACHE)
            for prompt in prompt_lengths for batch in batches]


def study_plans(modes: Sequence[GenerationMode], *, quick: bool = False) -> list[GenerationPlan]:
    """The plans the study measures in `modes` (harness/study.py), or those of a quick sweep."""
    plans = []
    if RECOMPUTE in modes:
        plans.append(recompute_plan(QUICK_TOKEN_COUNTS if quick else TOKEN_COUNTS))
    if KV_CACHE in modes:
        plans += kv_cache_plans(*((QUICK_KV_BATCHES, QUICK_KV_PROMPT_TOKENS, QUICK_KV_NEW_TOKENS) if quick
                                  else (KV_BATCHES, KV_PROMPT_TOKENS, KV_NEW_TOKENS)))
    return plans


def parse_modes(spec: str) -> list[GenerationMode]:
    """'recompute,kv-cache' -> the modes; ValueError names a mode that does not exist."""
    modes = [by_name(part.strip()) for part in spec.split(",") if part.strip()]
    if not modes:
        raise ValueError("name at least one generation mode")
    return modes


def measured_rows(backends: Sequence[Backend], mode: GenerationMode) -> list[Backend]:
    """The rows `mode` measures: those providing every op it calls. A composite pairs rows of
    different kinds, so it is measured only by a mode that calls more than one (KV cache);
    recompute measures its parts alone."""
    composites = len(mode.kinds) > 1
    chosen = list(backends)
    for kind in mode.kinds:
        chosen = registry.providing(chosen, kind, composites=composites)
    return chosen


def plan_label(plan: GenerationPlan) -> str:
    """'' for the original setup, ' kv-cache B=8 P=512' otherwise (progress bars and lines)."""
    if plan.mode is RECOMPUTE and plan.batch == 1:
        return ""
    return f" {plan.mode.name} B={plan.batch} P={plan.prompt_len}"


def row_key(backend: str, dtype: str, plan: GenerationPlan, tokens: int) -> tuple:
    """The key (results.E2E) of `backend`'s row at `tokens` tokens of `plan` in `dtype`."""
    return backend, dtype, plan.mode.name, plan.batch, plan.prompt_len, tokens


# -- accuracy ------------------------------------------------------------------------------
def token_digest(rows: Sequence[Sequence[int]]) -> str:
    """A short fingerprint of B token sequences (compared across runs and resumes); for one
    sequence the same as before batches existed."""
    text = ";".join(",".join(map(str, row)) for row in rows)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def token_match(rows: Sequence[Sequence[int]], reference: Sequence[Sequence[int]], prompt_len: int,
                tokens: int) -> tuple[bool, float]:
    """(every sequence equal to the reference's up to `tokens`, the fraction of generated
    positions of every sequence that are)."""
    same = all(tuple(r[:tokens]) == tuple(ref[:tokens]) for r, ref in zip(rows, reference))
    equal = [r[p] == ref[p] for r, ref in zip(rows, reference) for p in range(prompt_len, tokens)]
    return same, sum(equal) / len(equal)


@dataclass(frozen=True)
class LogitsError:
    max_abs: float
    mean_abs: float


class ErrorSum:
    """|logits - reference| over chunks of positions, accumulated on the device (one
    synchronisation, at the end)."""

    def __init__(self) -> None:
        self.max: torch.Tensor | None = None
        self.total: torch.Tensor | None = None
        self.count = 0

    def add(self, logits: torch.Tensor, reference: torch.Tensor) -> None:
        diff = (logits.float() - reference.float()).abs()  # (B, n, vocab)
        largest, total = diff.max(), diff.sum(dtype=torch.float64)
        self.max = largest if self.max is None else torch.maximum(self.max, largest)
        self.total = total if self.total is None else self.total + total
        self.count += diff.numel()

    def result(self) -> LogitsError:
        if self.max is None or self.total is None:
            raise ValueError("no logits were compared")
        return LogitsError(max_abs=self.max.item(), mean_abs=(self.total / self.count).item())


@contextlib.contextmanager
def attached(model: GPT2, attention: AttentionFn, decode: DecodeFn | None) -> Iterator[GPT2]:
    """`model` with other ops for a while, its own given back after."""
    previous = model.attention, model.decode_attention
    model.set_attention(attention, decode)
    try:
        yield model
    finally:
        model.set_attention(*previous)


class Sweep:
    """One run of the end-to-end benchmark: the models and what is already known."""

    def __init__(self, source: ModelSource, device: torch.device, results_dir: Path, resume: bool) -> None:
        self.source = source
        self.device = device
        self.provenance: Provenance = collect(device)
        self.path = E2E.path(results_dir, self.provenance.slug)
        self.previous = done(E2E, self.path, self.provenance) if resume else {}
        self.naive = registry.get(registry.TOKENS_REFERENCE)
        self._models: dict[str, GPT2] = {}
        self._reference: GPT2 | None = None  # float32 naive, its own instance: the logits reference
        self._reference_tokens: dict[tuple[GenerationPlan, str], tuple[tuple[int, ...], ...]] = {}
        self._floor: dict[tuple[GenerationPlan, str], dict[int, float] | str] = {}  # per length, or why not

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"

    def model(self, dtype: str) -> GPT2:
        """The model in `dtype` (built once: drawn or loaded in float32, then cast)."""
        if dtype not in self._models:
            self._models[dtype] = self.source.build(self.naive.attention(self.device, dtype), self.device,
                                                    precision.torch_dtype(dtype))
        return self._models[dtype]

    def reference_model(self) -> GPT2:
        """float32 naive with both ops, apart from the model the backends run in: the logits
        reference, stepped in lockstep with the backend's teacher-forced run."""
        if self._reference is None:
            model = self.source.build(self.naive.attention(self.device, precision.FLOAT32), self.device,
                                      torch.float32)
            model.set_attention(self.naive.attention(self.device, precision.FLOAT32),
                                self.naive.decode_attention(self.device, precision.FLOAT32))
            self._reference = model
        return self._reference

    def todo(self, name: str, dtype: str, plan: GenerationPlan) -> list[int]:
        return [n for n in plan.token_counts if row_key(name, dtype, plan, n) not in self.previous]

    def stored(self, name: str, dtype: str, plan: GenerationPlan) -> E2ERow | None:
        """A row of this setup for `name` in `dtype` and `plan` (its longest length), if one is stored."""
        return self.previous.get(row_key(name, dtype, plan, plan.total))

    # -- references -------------------------------------------------------------------
    def naive_tokens(self, plan: GenerationPlan, dtype: str) -> tuple[tuple[int, ...], ...]:
        """The same-dtype naive run's tokens (generated now, untimed, unless this run has them)."""
        key = (plan, dtype)
        if key not in self._reference_tokens:
            naive = self.naive.attention(self.device, dtype), self.naive.decode_attention(self.device, dtype)
            with attached(self.model(dtype), *naive) as model:
                self._reference_tokens[key] = rows_of(greedy_generate(model, plan.prompts, plan.total, plan.mode))
        return self._reference_tokens[key]

    def logits_error(self, plan: GenerationPlan, dtype: str) -> LogitsError:
        """The current ops' teacher-forced logits in `dtype` against float32 naive's, through
        the plan's mode, on float32 naive's tokens."""
        ids = torch.tensor(self.naive_tokens(plan, precision.FLOAT32), device=self.device)  # (B, T)
        errors = ErrorSum()
        own = plan.mode.teacher_forced(self.model(dtype), ids, plan.prompt_len)
        reference = plan.mode.teacher_forced(self.reference_model(), ids, plan.prompt_len)
        for logits, expected in zip(own, reference, strict=True):  # (B, n, vocab) each
            errors.add(logits, expected)
        return errors.result()

    def floor(self, plan: GenerationPlan, dtype: str) -> dict[int, float] | str:
        """GPU time per length without attention, measured once per dtype and plan (or why not)."""
        key = (plan, dtype)
        if key not in self._floor:
            with attached(self.model(dtype), no_attention, no_decode) as model:
                try:
                    timing = time_graph(model, plan, replays=GRAPH_REPLAYS, budget_s=GRAPH_BUDGET_S)
                    self._floor[key] = {n: s.median for n, s in timing.seconds.items()}
                except Exception as err:  # noqa: BLE001 -- reported on every row instead of a share
                    self._floor[key] = f"no attention share: the floor could not be captured ({err})"
        return self._floor[key]

    # -- measuring --------------------------------------------------------------------
    def measure(self, backend: Backend, dtype: str,
                plan: GenerationPlan) -> tuple[EagerTiming, GraphTiming | None, str | None]:
        model = self.model(dtype)
        plan.mode.attach(model, backend, self.device, dtype)
        plan.mode.prepare(backend, model, plan.batch, plan.total)
        greedy_generate(model, plan.prompts, min(plan.total, plan.prompt_len + WARMUP_TOKENS), plan.mode)
        eager = time_eager(model, plan, runs=EAGER_RUNS)
        if backend.name == registry.TOKENS_REFERENCE:
            self._reference_tokens[(plan, dtype)] = eager.token_ids
        if not self.on_cuda:
            return eager, None, EAGER_ONLY_ON_CPU
        try:
            return eager, time_graph(model, plan, replays=GRAPH_REPLAYS, budget_s=GRAPH_BUDGET_S), None
        except Exception as err:  # noqa: BLE001 -- any capture failure is reported on the row
            first_line = (str(err).strip().splitlines() or [""])[0]
            return eager, None, f"not capturable ({type(err).__name__}: {first_line}): eager time only"

    def _naive_logits_mean(self, plan: GenerationPlan, dtype: str, own: LogitsError, name: str) -> float | None:
        """The same-dtype naive's mean logits error: its stored row, or its own when it is naive."""
        if name == registry.TOKENS_REFERENCE:
            return own.mean_abs
        row = self.stored(registry.TOKENS_REFERENCE, dtype, plan)
        return row.logits_mean_abs_err if row else None

    def rows(self, backend: Backend, dtype: str, plan: GenerationPlan, eager: EagerTiming, graph: GraphTiming | None,
             note: str | None) -> list[E2ERow]:
        notes = [note] if note else []
        match = None
        if graph is not None:
            match = graph.token_ids == eager.token_ids
            if not match:
                notes.append("the graph's tokens DIFFER from the eager run's")
                tqdm.write(f"WARNING {backend.name} ({dtype}{plan_label(plan)}): the replayed graph generated other "
                           "tokens than the eager run")
        floor = self.floor(plan, dtype) if graph is not None else None
        if isinstance(floor, str):
            notes.append(floor)
            floor = None
        logits = self.logits_error(plan, dtype)
        naive_mean = self._naive_logits_mean(plan, dtype, logits, backend.name)
        reference = self.naive_tokens(plan, dtype)
        rows = []
        for n in self.todo(backend.name, dtype, plan):
            same, agreement = token_match(eager.token_ids, reference, plan.prompt_len, n)
            if precision.is_half(dtype):
                check = None if naive_mean is None else logits.mean_abs <= LOGITS_FACTOR * naive_mean
            else:
                check = same
            gpu = graph.seconds[n] if graph is not None else None
            rows.append(self._row(backend.name, dtype, plan, n, OK, "; ".join(notes) or None, eager=eager.seconds[n],
                                  peak=eager.peak_memory_bytes[n] if eager.peak_memory_bytes else None, gpu=gpu,
                                  digest=token_digest([row[:n] for row in eager.token_ids]), same=same,
                                  agreement=agreement, logits=logits, check=check, match=match,
                                  floor=floor[n] if floor and gpu else None))
        return rows

    def transformers_rows(self, dtype: str, plan: GenerationPlan) -> list[E2ERow]:
        """transformers' generate() on this dtype's weights (harness/hf_generate.py)."""
        reason = hf_generate.why_unavailable()
        if reason:
            return self.status_rows(hf_generate.NAME, dtype, plan, reason)
        hf = hf_generate.hf_model(self.model(dtype))
        timing = hf_generate.time_generate(hf, plan, warmup_tokens=min(WARMUP_TOKENS, plan.generated(plan.total)))
        reference = self.naive_tokens(plan, dtype)
        rows = []
        for n in self.todo(hf_generate.NAME, dtype, plan):
            same, agreement = token_match(timing.token_ids, reference, plan.prompt_len, n)
            rows.append(self._row(hf_generate.NAME, dtype, plan, n, OK, hf_generate.NOT_ONE_GRAPH,
                                  eager=timing.seconds, peak=timing.peak_memory_bytes,
                                  digest=token_digest([row[:n] for row in timing.token_ids]), same=same,
                                  agreement=agreement, check=None if precision.is_half(dtype) else same))
        return rows

    def _row(self, name: str, dtype: str, plan: GenerationPlan, n: int, status: str, notes: str | None, *,
             eager: Spread | None = None, peak: int | None = None, gpu: Spread | None = None,
             digest: str | None = None, same: bool | None = None, agreement: float | None = None,
             logits: LogitsError | None = None, check: bool | None = None, match: bool | None = None,
             floor: float | None = None) -> E2ERow:
        config = self.source.config
        return E2ERow(
            backend=name, dtype=dtype, mode=plan.mode.name, batch=plan.batch, tokens=n,
            prompt_tokens=plan.prompt_len, status=status,
            notes=notes, parts=composite_parts(name, dtype), n_layer=config.n_layer, n_head=config.n_head, n_embd=config.n_embd,
            replays=len(gpu.values) if gpu else None, eager_runs=len(eager.values) if eager else None,
            seconds_gpu_median=gpu.median if gpu else None, seconds_gpu_min=gpu.min if gpu else None,
            seconds_gpu_max=gpu.max if gpu else None,
            seconds_eager_median=eager.median if eager else None, seconds_eager_min=eager.min if eager else None,
            seconds_eager_max=eager.max if eager else None,
            tokens_per_second=plan.generated_in_batch(n) / gpu.median if gpu else None,
            peak_memory_bytes=peak, tokens_sha256=digest, same_tokens_as_naive=same, token_agreement=agreement,
            logits_max_abs_err=logits.max_abs if logits else None,
            logits_mean_abs_err=logits.mean_abs if logits else None, accuracy_check=check,
            graph_tokens_match_eager=match, seconds_floor_gpu=floor,
            attention_gpu_share=1.0 - floor / gpu.median if floor and gpu else None,
            weights=self.source.weights, provenance=self.provenance)

    def status_rows(self, name: str, dtype: str, plan: GenerationPlan, reason: str) -> list[E2ERow]:
        return [self._row(name, dtype, plan, n, reason, None) for n in self.todo(name, dtype, plan)]


def _print_last(name: str, dtype: str, plan: GenerationPlan, row: E2ERow) -> None:
    gpu = "–" if row.seconds_gpu_median is None else f"{row.seconds_gpu_median:.3f} s"
    logits = "" if row.logits_mean_abs_err is None else f", logits error mean {row.logits_mean_abs_err:.2e}"
    tqdm.write(f"{name} ({dtype}{plan_label(plan)}): {row.tokens} tokens, GPU {gpu}, eager "
               f"{row.seconds_eager_median:.3f} s, tokens as naive's: {row.token_agreement:.0%}{logits}")


def _measure_plan(sweep: Sweep, backends: Sequence[Backend], dtype: str, plan: GenerationPlan,
                  excluded: dict[tuple[str, str], str], transformers: bool) -> None:
    """Every row of one dtype and plan, each written as soon as it is measured. The tokens
    reference (naive) comes first and the dtype's kernel reference next, each added if missing,
    unless their rows of this setup exist: a sweep of a few versions still has its ratios'
    reference in the same run, as the kernel benchmark does."""
    order = registry.with_required(registry.with_required(measured_rows(backends, plan.mode),
                                                          registry.kernel_reference(dtype)), registry.TOKENS_REFERENCE)
    target = Target.of(sweep.device)
    reasons = {b.name: why for b in order if (why := plan.mode.why_unavailable(b, target, dtype))}
    reasons.update({name: why for (name, d), why in excluded.items() if d == dtype})
    reasons.update({b.name: b.end_to_end for b in order if b.end_to_end and b.name not in reasons})
    pending: list[Backend | str] = [b for b in order if sweep.todo(b.name, dtype, plan)]
    if transformers and plan.mode is hf_generate.MODE and sweep.todo(hf_generate.NAME, dtype, plan):
        pending.append(hf_generate.NAME)
    progress = tqdm(pending, desc=f"end-to-end{plan_label(plan)}, {dtype}", unit="backend")
    for entry in progress:
        name = entry if isinstance(entry, str) else entry.name
        if name in reasons:
            rows = sweep.status_rows(name, dtype, plan, reasons[name])
        elif isinstance(entry, str):  # transformers' generate(), not a registry row
            progress.set_postfix_str(name)
            rows = sweep.transformers_rows(dtype, plan)
        else:
            progress.set_postfix_str(name)
            try:
                measured = sweep.measure(entry, dtype, plan)
            except (BackendUnavailableError, RuntimeError) as err:  # e.g. its build failed
                reason = f"failed to run: {(str(err).strip().splitlines() or [''])[0]}"
                tqdm.write(f"{name} ({dtype}{plan_label(plan)}): {reason}")
                rows = sweep.status_rows(name, dtype, plan, reason)
            else:
                rows = sweep.rows(entry, dtype, plan, *measured)
        if rows and rows[-1].measured:
            _print_last(name, dtype, plan, rows[-1])
        for row in rows:
            E2E.append(sweep.path, row)
        if name == registry.TOKENS_REFERENCE:  # later rows compare with it
            sweep.previous.update({E2E.key(row): row for row in rows})
    progress.close()


def run(backends: Sequence[Backend], dtypes: Sequence[str], plans: Sequence[GenerationPlan], *, source: ModelSource,
        results_dir: Path, resume: bool = True, excluded: dict[tuple[str, str], str] | None = None,
        device: torch.device, transformers: bool = False) -> Path:
    """Time generation for every backend in each of `dtypes` and each plan (study_plans), one
    CSV row per (backend, dtype, mode, batch, prompt, length); with `transformers`, also
    transformers' generate() in the KV-cache plans. Returns the file."""
    sweep = Sweep(source, device, results_dir, resume)
    for dtype in dtypes:
        for plan in plans:
            _measure_plan(sweep, backends, dtype, plan, excluded or {}, transformers)
    return sweep.path
