"""GPU time of one attention call without host gaps, and the time a Python caller pays.

Device time: a CUDA graph of R x [L2 flush, call] and a graph of R x [L2 flush] alone
(the same flush: a write over max(2 x L2, 64 MiB)), replayed alternately with CUDA
events around each replay; per replay, the call's device time is
(t[flush + call] - median t[flush alone]) / R. Call time: CUDA events around one eager
call after a flush (launch overhead and Python included), the median of several.

R and the number of replays follow from a first timed call so that every measurement
costs about the same GPU time: R = REPLAY_TARGET_S / (call + flush), between 1 and
MAX_REPS; replays = MEASURE_BUDGET_S / (R x (call + flush)), between MIN_REPLAYS and
MAX_REPLAYS. A 10 us call gets R = 50 and 10 replays; a 265 ms call R = 1 and 3. A later
round of the same call reuses the first round's R and replays (DeviceTimer.time's `plan`),
and pooled() makes the rounds one measurement.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

import torch

from backends import precision

WARMUP_CALLS = 2
REPLAY_TARGET_S = 0.005  # GPU time of one replay of R calls
MEASURE_BUDGET_S = 0.040  # GPU time of the timed replays of one graph
MAX_REPS = 50
MIN_REPLAYS, MAX_REPLAYS = 3, 10
MIN_FLUSH_BYTES = 64 * 2**20

Call = Callable[[], object]
T = TypeVar("T")


@dataclass(frozen=True)
class Repetitions:
    reps: int  # calls per graph replay
    replays: int  # timed replays of each graph (and eager calls for the call time)


def repetitions(call_s: float, flush_s: float) -> Repetitions:
    """How many calls per replay and how many replays for a call of `call_s` seconds."""
    per_call = max(call_s + flush_s, 1e-9)
    reps = max(1, min(MAX_REPS, int(REPLAY_TARGET_S / per_call)))
    replays = max(MIN_REPLAYS, min(MAX_REPLAYS, int(MEASURE_BUDGET_S / (reps * per_call))))
    return Repetitions(reps, replays)


@dataclass(frozen=True)
class CallTiming:
    repetitions: Repetitions  # per round
    us_device: tuple[float, ...] | None  # one per timed replay; None when capture failed
    us_call: tuple[float, ...]  # one per eager call
    not_captured: str | None  # why there is no device time
    rounds: int = 1  # measurements pooled into this one (pooled())

    @property
    def us_call_median(self) -> float:
        return statistics.median(self.us_call)

    @property
    def us_device_median(self) -> float | None:
        return statistics.median(self.us_device) if self.us_device else None


def pooled(timings: Sequence[CallTiming]) -> CallTiming:
    """Several measurements of one call as one: every replay and eager call of each, so
    that the medians are over all of them. Device time only if every one has it."""
    if not timings:
        raise ValueError("pooled() needs at least one timing")
    devices = [t.us_device for t in timings]
    return CallTiming(repetitions=timings[0].repetitions,
                      us_device=None if any(d is None for d in devices) else tuple(x for d in devices for x in d),
                      us_call=tuple(x for t in timings for x in t.us_call),
                      not_captured=next((t.not_captured for t in timings if t.not_captured), None),
                      rounds=sum(t.rounds for t in timings))


def alternating(names: Sequence[T], round_index: int) -> list[T]:
    """The order of round `round_index` (0, 1, ...): as given, then reversed, and so on, so
    that no backend is always measured first or last (a GPU warming up over a round slows
    whichever comes late)."""
    return list(names) if round_index % 2 == 0 else list(reversed(names))


def _elapsed_us(start: torch.cuda.Event, end: torch.cuda.Event) -> float:
    return start.elapsed_time(end) * 1e3


class DeviceTimer:
    """Times calls on one CUDA device; owns the L2 flush buffer and a capture stream."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        l2_bytes = torch.cuda.get_device_properties(device).L2_cache_size
        flush_bytes = max(2 * l2_bytes, MIN_FLUSH_BYTES)
        self._flush_buffer = torch.empty(flush_bytes // 4, dtype=torch.float32, device=device)
        self._stream = torch.cuda.Stream(device)
        self._flush_graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.flush_s = statistics.median(self._eager_us(self.flush, 5, flush=False)) * 1e-6

    def flush(self) -> None:
        """Write over a buffer larger than L2: the next call starts with cold caches."""
        self._flush_buffer.zero_()

    def _eager_us(self, fn: Call, count: int, *, flush: bool = True) -> list[float]:
        """CUDA events around `count` eager calls, each after an L2 flush (outside the events)."""
        pairs = []
        for _ in range(count):
            if flush:
                self.flush()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize(self.device)
        return [_elapsed_us(s, e) for s, e in pairs]

    def _capture(self, fn: Call | None, reps: int) -> torch.cuda.CUDAGraph:
        """reps x [flush, fn()] (or the flushes alone) as one graph, on the side stream."""
        current = torch.cuda.current_stream(self.device)
        self._stream.wait_stream(current)
        with torch.cuda.stream(self._stream):  # warm-up where the capture will happen
            self.flush()
            if fn is not None:
                fn()
        current.wait_stream(self._stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self._stream):
            for _ in range(reps):
                self.flush()
                if fn is not None:
                    fn()  # its output is freed at once: the graph's pool reuses the block
        return graph

    def _flush_graph(self, reps: int) -> torch.cuda.CUDAGraph:
        if reps not in self._flush_graphs:
            self._flush_graphs[reps] = self._capture(None, reps)
        return self._flush_graphs[reps]

    def time(self, fn: Call, plan: Repetitions | None = None) -> CallTiming:
        """Device and call time of fn(); capture errors are caught and reported. `plan`:
        the repetitions of an earlier round of the same call (by default sized from a first
        timed call)."""
        for _ in range(WARMUP_CALLS):  # compiles, loads modules, fills caches
            fn()
        if plan is None:
            first_s = self._eager_us(fn, 1)[0] * 1e-6
            plan = repetitions(first_s, self.flush_s)
        us_call = tuple(self._eager_us(fn, plan.replays))
        try:
            graph = self._capture(fn, plan.reps)
        except Exception as err:  # noqa: BLE001 -- any capture failure is reported on the row
            torch.cuda.synchronize(self.device)
            first_line = (str(err).strip().splitlines() or [""])[0]
            return CallTiming(plan, None, us_call, f"not capturable ({type(err).__name__}: {first_line})")
        flush_graph = self._flush_graph(plan.reps)
        try:
            flush_graph.replay()  # warm-up replays
            graph.replay()
            events = []
            for _ in range(plan.replays):
                marks = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
                marks[0].record()
                flush_graph.replay()
                marks[1].record()
                graph.replay()
                marks[2].record()
                events.append(marks)
            torch.cuda.synchronize(self.device)
        finally:
            graph.reset()
        flush_us = statistics.median(_elapsed_us(m[0], m[1]) for m in events)
        us_device = tuple((_elapsed_us(m[1], m[2]) - flush_us) / plan.reps for m in events)
        return CallTiming(plan, us_device, us_call, None)


@dataclass(frozen=True)
class Peak:
    """A rate the kernels are compared with, measured in the same run."""

    name: str  # "float32 FMA", "bfloat16 tensor", "float16 tensor"
    tflops: float


def measure_peak(device: torch.device, dtype: str, n: int = 8192, reps: int = 10) -> Peak:
    """TFLOP/s of an n^3 matmul on seeded random data (never zeros, which run faster): in
    float32 with TF32 off, the CUDA cores' FMA rate; in bfloat16 or float16, the dense
    tensor-core rate of that type."""
    torch_dtype = precision.torch_dtype(dtype)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        generator = torch.Generator(device=device).manual_seed(0)
        a, b = (torch.randn(n, n, device=device, generator=generator).to(torch_dtype) for _ in range(2))
        for _ in range(3):
            a @ b
        pairs = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            a @ b
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize(device)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    seconds = statistics.median(s.elapsed_time(e) for s, e in pairs) * 1e-3
    kind = "FMA" if dtype == precision.FLOAT32 else "tensor"
    return Peak(f"{dtype} {kind}", 2.0 * n**3 / seconds / 1e12)


@dataclass(frozen=True)
class Bandwidth:
    """The HBM's rate as a large device-to-device copy reaches it, measured in the same run as
    the rows it is compared with."""

    gbps: float  # bytes read plus bytes written, over the copy's median time, in 10^9 bytes/s
    bytes_copied: int


COPY_BYTES = 2 * 2**30  # 2 GiB: far past any L2, a few ms per copy


def measure_bandwidth(device: torch.device, nbytes: int = COPY_BYTES, reps: int = 10) -> Bandwidth:
    """dst.copy_(src) of `nbytes` on the device, `reps` times after warm-up, CUDA events around
    each; the median's rate counts the bytes read and the bytes written."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    pairs = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize(device)
    seconds = statistics.median(s.elapsed_time(e) for s, e in pairs) * 1e-3
    return Bandwidth(gbps=2 * src.numel() * 4 / seconds / 1e9, bytes_copied=src.numel() * 4)
