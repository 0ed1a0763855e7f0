"""`python -m gpt2`: time greedy GPT-2 generation with one attention backend."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass

import torch
from tqdm import tqdm

from backends import arguments, registry
from backends.environment import Provenance, collect
from backends.interrupts import describe, exit_status, stop_on_signals
from backends.precision import EVERY, FLOAT32, torch_dtype
from backends.registry import Backend, Target
from gpt2.config import SIZES, ModelDirError
from gpt2.modes import MODES, RECOMPUTE, by_name
from gpt2.prompts import STUDY_PROMPT_TOKENS, study_prompts
from gpt2.timing import GenerationPlan, Spread, time_eager, time_graph
from gpt2.tokenizer import PROMPT, load_tokenizer
from gpt2.weights import WeightsSource, build_model, resolve


MAX_REPEATS = 100  # --repeats: a mistyped 10**9 would run for years
MAX_BATCH = 1024  # --batch: sequences at once (the KV-cache sweep generates up to 64); a mistyped 10**9 never ends


class UsageError(Exception):
    """Bad input from the command line: printed as one line, exit status 2."""


@dataclass(frozen=True)
class Request:
    """What to run, checked: everything `run` needs and nothing it must still validate."""

    backend: Backend
    dtype: str  # backends/precision.py: the model's weights and activations
    device: torch.device
    weights: WeightsSource
    plan: GenerationPlan
    repeats: int
    graph: bool  # also time the generation as one CUDA graph (GPU time)
    progress: bool  # a progress bar on stderr


@dataclass(frozen=True)
class Result:
    backend: str
    dtype: str
    mode: str  # gpt2/modes.py
    batch: int
    weights: str
    tokens: int  # per sequence, prompt included
    prompt_tokens: int
    repeats: int
    token_ids: tuple[tuple[int, ...], ...]  # one row per sequence
    text: str  # of the first sequence
    eager: Spread
    gpu: Spread | None  # None on a CPU, with --no-graph, or when capture failed
    gpu_method: str | None
    graph_error: str | None  # why there is no GPU time although one was asked for
    graph_tokens_match_eager: bool | None
    peak_memory_bytes: int | None
    cache_bytes: int  # the KV cache of one generation (0 when recomputing), part of the peak
    provenance: Provenance

    @property
    def generated(self) -> int:
        """Per sequence."""
        return self.tokens - self.prompt_tokens

    @property
    def generated_in_batch(self) -> int:
        """In all sequences together: what tokens/s counts."""
        return self.batch * self.generated

    def to_json(self) -> dict:
        def spread(s: Spread | None) -> dict | None:
            return None if s is None else {"median": s.median, "min": s.min, "max": s.max, "all": list(s.values)}

        return {"backend": self.backend, "dtype": self.dtype, "mode": self.mode, "batch": self.batch,
                "weights": self.weights, "tokens": self.tokens, "prompt_tokens": self.prompt_tokens,
                "generated_tokens": self.generated, "generated_tokens_in_batch": self.generated_in_batch,
                "repeats": self.repeats, "token_ids": list(self.token_ids[0]),
                "token_ids_by_sequence": [list(row) for row in self.token_ids], "text": self.text,
                "seconds_eager": spread(self.eager), "seconds_gpu": spread(self.gpu), "gpu_method": self.gpu_method,
                "graph_error": self.graph_error, "graph_tokens_match_eager": self.graph_tokens_match_eager,
                "tokens_per_second_eager": self.generated_in_batch / self.eager.median,
                "tokens_per_second_gpu": None if self.gpu is None else self.generated_in_batch / self.gpu.median,
                "peak_memory_bytes": self.peak_memory_bytes, "cache_bytes": self.cache_bytes,
                "provenance": dataclasses.asdict(self.provenance)}


def add_weights_arguments(parser: argparse.ArgumentParser) -> None:
    """--model-dir, --weights and --size: where GPT-2's weights come from."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--model-dir", type=arguments.text, metavar="DIR",
                        help="local Hugging Face snapshot: config.json + model.safetensors (any GPT-2 size)")
    source.add_argument("--weights", type=arguments.text, default="auto", metavar="random|auto|NAME",
                        help="'random': seeded random weights; 'auto' (default): the cached Hugging Face "
                             "snapshot if there is one, else random, never using the network; NAME: a hub "
                             "model such as gpt2, from the cache or the hub")
    parser.add_argument("--size", choices=sorted(SIZES), default="small",
                        help="model size for random or auto weights (default: small)")


def weights_from_args(args: argparse.Namespace) -> WeightsSource:
    """The weights the arguments name; ModelDirError says what is wrong."""
    return resolve(args.model_dir, args.weights, args.size)


def build_parser() -> argparse.ArgumentParser:
    parser = arguments.OneLineParser(
        prog="python -m gpt2",
        description=f"Greedy GPT-2 generation of exactly N tokens per sequence from the prompt {PROMPT!r} "
                    "(no stop at end-of-text), timed with the chosen attention backend: eager (run from Python, "
                    "host included) and, on a GPU, as one replayed CUDA graph (the GPU's own time). By default "
                    "one sequence, recomputed at each step (no KV cache), as the original study measured.",
        epilog=f"backends: {', '.join(registry.names())}. Prompts of a batch: the first begins with the study's "
               "prompt, the rest of it and the other rows are seeded random token ids (one seed per row), so the "
               "rows differ and are the same in every run.")
    parser.add_argument("--backend", default=registry.TOKENS_REFERENCE,
                        help=f"attention backend (default: {registry.TOKENS_REFERENCE})")
    parser.add_argument("--mode", choices=[m.name for m in MODES], default=RECOMPUTE.name,
                        help="; ".join(f"{m.name}: {m.description}" for m in MODES)
                             + f" (default: {RECOMPUTE.name}); kv-cache needs a backend with a decode op")
    parser.add_argument("--batch", type=int, default=1, metavar="B",
                        help=f"sequences generated at once (default: 1, at most {MAX_BATCH})")
    parser.add_argument("--prompt-tokens", type=int, default=STUDY_PROMPT_TOKENS, metavar="P",
                        help=f"prompt length per sequence (default: {STUDY_PROMPT_TOKENS}, the study's prompt)")
    parser.add_argument("--tokens", type=int, default=64, metavar="N",
                        help="total tokens per sequence, the prompt included (default: 64)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None,
                        help="default: cuda when available, else cpu")
    parser.add_argument("--dtype", choices=EVERY, default=FLOAT32,
                        help="the model's weights (cast once) and activations (default: float32); the backend "
                             "must take it (python -m harness list)")
    parser.add_argument("--repeats", type=int, default=3, metavar="R",
                        help="timed runs (and graph replays) after one warm-up; the median is reported "
                             f"(default: 3, at most {MAX_REPEATS})")
    parser.add_argument("--no-graph", action="store_true",
                        help="skip the CUDA-graph timing (GPU time); eager timing only")
    add_weights_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (with provenance) instead of text; no progress bar")
    return parser


def make_request(args: argparse.Namespace) -> Request:
    """Check the arguments; UsageError says what is wrong with them."""
    try:
        backend = registry.get(args.backend)
    except registry.UnknownBackendError as err:
        raise UsageError(str(err)) from None
    mode = by_name(args.mode)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    missing = next(filter(None, (backend.kind_refusal(kind) for kind in mode.kinds)), None)
    if missing:
        raise UsageError(f"{backend.name}: {missing}; --mode {mode.name} needs one")
    reason = mode.why_unavailable(backend, Target.of(device), args.dtype)
    if reason and args.device is None and device.type == "cpu" and backend.accepts(args.dtype):
        on_cpu = ", ".join(b.name for b in registry.BACKENDS if not mode.why_unavailable(b, Target("cpu"), args.dtype))
        raise UsageError(f"{backend.name} needs a CUDA device and none is available (backends that run on a CPU: {on_cpu})")
    if reason:
        raise UsageError(f"{backend.name}: {reason}")
    problem = arguments.out_of_range("--repeats", args.repeats, 1, MAX_REPEATS,
                                     "each repeat is a whole generation (eager, and a graph replay on a GPU)")
    if problem:
        raise UsageError(problem)
    if args.batch < 1:
        raise UsageError(f"--batch must be at least 1, got {args.batch}")
    problem = arguments.out_of_range("--batch", args.batch, 1, MAX_BATCH,
                                     "every sequence's prompt, activations and cache are held at once")
    if problem:
        raise UsageError(problem)
    if args.prompt_tokens < 1:
        raise UsageError(f"--prompt-tokens must be at least 1, got {args.prompt_tokens}")
    try:
        weights = weights_from_args(args)
        context = weights.config().n_positions
    except ModelDirError as err:
        raise UsageError(str(err)) from None
    if not args.prompt_tokens < args.tokens <= context:
        raise UsageError(f"--tokens must be larger than the prompt ({args.prompt_tokens} tokens) and at "
                         f"most the model's context ({context}), got {args.tokens}")
    plan = GenerationPlan(study_prompts(args.batch, args.prompt_tokens), (args.tokens,), mode)
    return Request(backend=backend, dtype=args.dtype, device=device, weights=weights, plan=plan,
                   repeats=args.repeats, graph=device.type == "cuda" and not args.no_graph,
                   progress=not args.json and sys.stderr.isatty())


def run(request: Request) -> Result:
    plan = request.plan
    try:
        model = build_model(request.weights, request.backend.attention(request.device, request.dtype),
                            request.device, torch_dtype(request.dtype))
    except ModelDirError as err:
        raise UsageError(str(err)) from None
    plan.mode.attach(model, request.backend, request.device, request.dtype)
    plan.mode.prepare(request.backend, model, plan.batch, plan.total)
    steps = (1 + request.repeats) * plan.generated(plan.total)  # warm-up and timed runs
    with tqdm(total=steps, desc=f"{request.backend.name}, eager", unit="token", file=sys.stderr,
              disable=not request.progress, leave=False) as bar:
        eager = time_eager(model, plan, runs=request.repeats, warmup_runs=1, on_step=lambda _: bar.update())
    gpu = method = error = None
    if request.graph:
        if request.progress:
            print(f"capturing {plan.total} tokens as one CUDA graph and replaying it...", file=sys.stderr)
        try:
            graph = time_graph(model, plan, replays=request.repeats)
            gpu, method = graph.seconds[plan.total], graph.method
            match = graph.token_ids == eager.token_ids
        except RuntimeError as err:  # something in this backend cannot be captured
            error, match = f"{type(err).__name__}: {str(err).splitlines()[0]}", None
    else:
        match = None
    return Result(backend=request.backend.name, dtype=request.dtype, mode=plan.mode.name, batch=plan.batch,
                  weights=request.weights.describe(), tokens=plan.total, prompt_tokens=plan.prompt_len,
                  repeats=request.repeats, token_ids=eager.token_ids,
                  text=load_tokenizer().decode(list(eager.token_ids[0])), eager=eager.seconds[plan.total], gpu=gpu,
                  gpu_method=method, graph_error=error, graph_tokens_match_eager=match,
                  peak_memory_bytes=None if eager.peak_memory_bytes is None else eager.peak_memory_bytes[plan.total],
                  cache_bytes=plan.mode.cache_bytes(model.config, plan.batch, plan.total, torch_dtype(request.dtype)),
                  provenance=collect(request.device))


def _spread_line(spread: Spread, generated: int) -> str:
    return (f"median {spread.median:.3f} s (min {spread.min:.3f}, max {spread.max:.3f}), "
            f"{generated / spread.median:.1f} generated tokens/s")


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def print_report(result: Result) -> None:
    peak = result.peak_memory_bytes
    batch = f"{result.batch} sequences x " if result.batch > 1 else ""
    print(f"backend        {result.backend} ({result.dtype})")
    print(f"mode           {result.mode}")
    print(f"weights        {result.weights}")
    print(f"device         {result.provenance.gpu} (torch {result.provenance.torch}, commit {result.provenance.commit})")
    print(f"tokens         {batch}{result.tokens} ({result.prompt_tokens} prompt + {result.generated} generated), "
          f"{result.repeats} timed runs")
    if result.gpu is not None:
        print(f"GPU time       {_spread_line(result.gpu, result.generated_in_batch)}")
        print(f"               replays of {result.gpu_method}; "
              f"tokens {'equal' if result.graph_tokens_match_eager else 'DIFFER FROM'} the eager run's")
    elif result.graph_error:
        print(f"GPU time       not measured: the generation could not be captured ({result.graph_error})")
    print(f"eager time     {_spread_line(result.eager, result.generated_in_batch)}")
    memory = "n/a (cpu)" if peak is None else _size(peak)
    if result.cache_bytes:
        memory += f"; the KV cache takes {_size(result.cache_bytes)}" + ("" if peak is None else " of it")
    print(f"peak memory    {memory}")
    print(f"text           {result.text!r}" + (" (the first sequence)" if result.batch > 1 else ""))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with stop_on_signals():  # SIGTERM and SIGHUP end it as Ctrl-C does
        try:
            result = run(make_request(args))
            if args.json:
                print(json.dumps(result.to_json()))
            else:
                print_report(result)
        except UsageError as err:
            print(f"python -m gpt2: error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as stop:
            print(f"\npython -m gpt2: {describe(stop)}", file=sys.stderr)
            return exit_status(stop)
    return 0
