"""Timing greedy generation two ways, every reported length from one generation.

Generating N tokens is exactly the first N - prompt steps of generating the longest N,
so one generation of the longest length, with a clock read at the step where each
reported length is reached, times every length at once. The plan says what is generated:
B prompts of P tokens, in which generation mode (gpt2/modes.py).

- Eager: the generation run from Python, host included (what a user of the model waits
  for). On a GPU the clock is a CUDA event recorded at each boundary; the host starves
  the GPU at these sizes, so the event timeline follows the host. One synchronisation
  at the end of each run. On a CPU the clock is the host's.
- GPU (CUDA only): the whole generation captured once as one CUDA graph (prompts uploaded
  before capture, ids written on the device; a KV cache is allocated inside the capture,
  from the graph's memory pool), with timing events recorded at the
  boundaries inside the graph (torch.cuda.Event(external=True) becomes an event-record
  node), then replayed: the GPU's own time, without host gaps. Where torch lacks
  external events, one graph per length is captured and timed with events around each
  replay instead.
"""
from __future__ import annotations

import inspect
import statistics
import time
from dataclasses import dataclass

import torch

from gpt2.generate import StepCallback, model_device, prompt_buffer
from gpt2.model import GPT2
from gpt2.modes import RECOMPUTE, GenerationMode

SIDE_STREAM_WARMUP_STEPS = 2  # steps run on the capture stream before capturing (lazy init)
ONE_GRAPH = "one CUDA graph of the longest generation, events at the step boundaries"
GRAPH_PER_LENGTH = "one CUDA graph per length (this torch has no external events)"


@dataclass(frozen=True)
class GenerationPlan:
    """A greedy generation of B sequences from `prompts` (B rows of P token ids) in `mode`,
    timed at each of `token_counts` total tokens per sequence."""

    prompts: tuple[tuple[int, ...], ...]
    token_counts: tuple[int, ...]  # ascending, prompt included; the longest is generated
    mode: GenerationMode = RECOMPUTE

    def __post_init__(self) -> None:
        if not self.prompts or not all(isinstance(row, tuple) and row for row in self.prompts):
            raise ValueError(f"prompts must be one or more rows of token ids, got {self.prompts!r:.80}")
        if len({len(row) for row in self.prompts}) != 1:
            raise ValueError(f"every prompt must have the same length, got {sorted({len(r) for r in self.prompts})}")
        if not self.token_counts or list(self.token_counts) != sorted(set(self.token_counts)):
            raise ValueError(f"token counts must be distinct and ascending, got {self.token_counts}")
        if self.token_counts[0] <= self.prompt_len:
            raise ValueError(f"every token count must exceed the prompt's {self.prompt_len} tokens, "
                             f"got {self.token_counts}")

    @property
    def batch(self) -> int:
        return len(self.prompts)

    @property
    def prompt_len(self) -> int:
        return len(self.prompts[0])

    @property
    def total(self) -> int:
        return self.token_counts[-1]

    def generated(self, tokens: int) -> int:
        """Tokens generated (not given) per sequence in a run of `tokens` total tokens."""
        return tokens - self.prompt_len

    def generated_in_batch(self, tokens: int) -> int:
        """Tokens generated in all B sequences together (what tokens/s counts)."""
        return self.batch * self.generated(tokens)


@dataclass(frozen=True)
class Spread:
    """One measure over several runs, in seconds."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def min(self) -> float:
        return min(self.values)

    @property
    def max(self) -> float:
        return max(self.values)


@dataclass(frozen=True)
class EagerTiming:
    seconds: dict[int, Spread]  # per token count
    # per token count, CUDA only: the model's weights plus the most the generation itself had
    # allocated at once (the allocator's peak minus what was allocated before the run, so that
    # memory held by anything else in the process does not count)
    peak_memory_bytes: dict[int, int] | None
    token_ids: tuple[tuple[int, ...], ...]  # the longest generation, one row per sequence, prompt included


@dataclass(frozen=True)
class GraphTiming:
    seconds: dict[int, Spread]  # per token count
    token_ids: tuple[tuple[int, ...], ...]  # what the replays generated, one row per sequence, prompt included
    method: str


def rows_of(ids: torch.Tensor) -> tuple[tuple[int, ...], ...]:
    """A (B, T) id tensor as B tuples (one synchronisation)."""
    return tuple(tuple(row) for row in ids.tolist())


class _HostClock:
    def mark(self) -> float:
        return time.perf_counter()

    def seconds(self, start: float, end: float) -> float:
        return end - start

    def finish(self) -> None:
        pass


class _CudaClock:
    def __init__(self, device: torch.device) -> None:
        self.device = device

    def mark(self) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, start: torch.cuda.Event, end: torch.cuda.Event) -> float:
        return start.elapsed_time(end) / 1e3

    def finish(self) -> None:
        torch.cuda.synchronize(self.device)


def clock_for(device: torch.device) -> _HostClock | _CudaClock:
    """CUDA events on a GPU (read after finish()), the host's clock elsewhere."""
    return _CudaClock(device) if device.type == "cuda" else _HostClock()


class PeakMemory:
    """On CUDA, the model's weights plus the most a run had allocated at once (the allocator's
    peak minus what was allocated before the run, so that memory held by anything else in the
    process does not count); None elsewhere. Reading it is the allocator's host-side
    bookkeeping: no synchronisation."""

    def __init__(self, module: torch.nn.Module, device: torch.device) -> None:
        self.device = device
        self.weights = sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))
        self.before = 0

    def start(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self.before = torch.cuda.memory_allocated(self.device)

    def read(self) -> int | None:
        if self.device.type != "cuda":
            return None
        return self.weights + torch.cuda.max_memory_allocated(self.device) - self.before


def time_eager(model: GPT2, plan: GenerationPlan, *, runs: int, warmup_runs: int = 0,
               on_step: StepCallback | None = None) -> EagerTiming:
    """`warmup_runs` untimed then `runs` timed generations of plan.total tokens."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    device = model_device(model)
    ids = prompt_buffer(plan.prompts, plan.total, device)
    for _ in range(warmup_runs):
        plan.mode.generate_into(model, ids, plan.prompt_len, on_step)
    clock = clock_for(device)
    wanted = set(plan.token_counts)
    peaks: dict[int, int] = {}
    memory = PeakMemory(model, device)
    runs_marks = []
    for _ in range(runs):
        clock.finish()  # each run starts with an idle device
        memory.start()
        marks = {}

        def step(n: int) -> None:
            if n in wanted:
                marks[n] = clock.mark()
                peak = memory.read()
                if peak is not None:
                    peaks[n] = max(peaks.get(n, 0), peak)
            if on_step is not None:
                on_step(n)

        start = clock.mark()
        plan.mode.generate_into(model, ids, plan.prompt_len, step)
        runs_marks.append((start, marks))
    clock.finish()
    seconds = {n: Spread(tuple(clock.seconds(start, marks[n]) for start, marks in runs_marks))
               for n in plan.token_counts}
    return EagerTiming(seconds, peaks if device.type == "cuda" else None, rows_of(ids))


def external_events_supported() -> bool:
    """Whether torch.cuda.Event takes external=True (event-record nodes inside graphs)."""
    try:
        return "external" in inspect.signature(torch.cuda.Event.__new__).parameters
    except (TypeError, ValueError):
        return False


def time_graph(model: GPT2, plan: GenerationPlan, *, replays: int, warmup_replays: int = 1,
               budget_s: float | None = None) -> GraphTiming:
    """GPU time of the generation captured as a CUDA graph: `warmup_replays`, then up to
    `replays` timed, fewer where `budget_s` says: the timed replays stop once their GPU time
    adds up to budget_s (at least one is timed).

    Raises whatever capture raises when something in the generation cannot be captured.
    """
    if replays < 1:
        raise ValueError(f"replays must be at least 1, got {replays}")
    if budget_s is not None and budget_s <= 0:
        raise ValueError(f"budget_s must be positive, got {budget_s}")
    device = model_device(model)
    if device.type != "cuda":
        raise ValueError(f"CUDA graphs need a CUDA device, the model is on {device}")
    if external_events_supported():
        return _one_graph(model, plan, replays, warmup_replays, budget_s)
    return _graph_per_length(model, plan, replays, warmup_replays, budget_s)


def _enough(timed: list[float], replays: int, budget_s: float | None) -> bool:
    """Whether the timed replays so far (seconds each) are all that is wanted."""
    return len(timed) >= replays or (budget_s is not None and sum(timed) >= budget_s)


def _warm_up_on(stream: torch.cuda.Stream, model: GPT2, plan: GenerationPlan) -> None:
    """A few steps on the capture stream first (torch's advice: lazy initialisation such as
    cuBLAS workspaces then happens outside the capture)."""
    current = torch.cuda.current_stream(stream.device)
    stream.wait_stream(current)
    with torch.cuda.stream(stream):
        scratch = prompt_buffer(plan.prompts, plan.prompt_len + SIDE_STREAM_WARMUP_STEPS, stream.device)
        plan.mode.generate_into(model, scratch, plan.prompt_len)
    current.wait_stream(stream)


def _capture(model: GPT2, ids: torch.Tensor, plan: GenerationPlan, stream: torch.cuda.Stream,
             on_step: StepCallback | None = None, first: torch.cuda.Event | None = None) -> torch.cuda.CUDAGraph:
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        if first is not None:
            first.record()
        plan.mode.generate_into(model, ids, plan.prompt_len, on_step)
    return graph


def _one_graph(model: GPT2, plan: GenerationPlan, replays: int, warmup_replays: int,
               budget_s: float | None) -> GraphTiming:
    device = model_device(model)
    ids = prompt_buffer(plan.prompts, plan.total, device)  # uploaded before capture
    stream = torch.cuda.Stream(device)
    _warm_up_on(stream, model, plan)
    start = torch.cuda.Event(enable_timing=True, external=True)
    marks = {n: torch.cuda.Event(enable_timing=True, external=True) for n in plan.token_counts}
    for event in (start, *marks.values()):
        event.record()  # creates the CUDA event now rather than inside the capture
    torch.cuda.synchronize(device)

    def step(n: int) -> None:
        if n in marks:
            marks[n].record()  # recorded inside the capture: an event-record node

    graph = _capture(model, ids, plan, stream, step, first=start)
    seconds: dict[int, list[float]] = {n: [] for n in plan.token_counts}
    try:
        for _ in range(warmup_replays):
            graph.replay()
        while not _enough(seconds[plan.total], replays, budget_s):
            graph.replay()
            torch.cuda.synchronize(device)
            for n, mark in marks.items():
                seconds[n].append(start.elapsed_time(mark) / 1e3)
        token_ids = rows_of(ids)
    finally:
        graph.reset()
    return GraphTiming({n: Spread(tuple(s)) for n, s in seconds.items()}, token_ids, ONE_GRAPH)


def _graph_per_length(model: GPT2, plan: GenerationPlan, replays: int, warmup_replays: int,
                      budget_s: float | None) -> GraphTiming:
    device = model_device(model)
    stream = torch.cuda.Stream(device)
    _warm_up_on(stream, model, plan)
    seconds: dict[int, Spread] = {}
    token_ids: tuple[tuple[int, ...], ...] = ()
    for n in plan.token_counts:
        ids = prompt_buffer(plan.prompts, n, device)
        graph = _capture(model, ids, plan, stream)
        values: list[float] = []
        try:
            for _ in range(warmup_replays):
                graph.replay()
            while not _enough(values, replays, budget_s):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                graph.replay()
                end.record()
                torch.cuda.synchronize(device)
                values.append(start.elapsed_time(end) / 1e3)
            token_ids = rows_of(ids)
        finally:
            graph.reset()
        seconds[n] = Spread(tuple(values))
    return GraphTiming(seconds, token_ids, GRAPH_PER_LENGTH)
