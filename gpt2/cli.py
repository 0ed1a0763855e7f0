"""`python -m gpt2`: time greedy GPT-2 generation with one attention backend."""
from __future__ import annotations

import argparse
import json
import sys

import torch

from gpt2.config import SIZES, ModelDirError
from gpt2.generate import time_generation
from gpt2.tokenizer import PROMPT, load_tokenizer
from gpt2.weights import build_model, load_config, resolve
from harness import registry
from harness.attention import BackendUnavailableError, attention_fn, check_runnable


class UsageError(Exception):
    """Bad input from the command line: printed as one line, exit status 2."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m gpt2",
        description=f"Greedy GPT-2 generation of exactly N tokens from the prompt {PROMPT!r} "
                    "(no KV cache, no stop at end-of-text), timed with the chosen attention backend.",
        epilog=f"backends: {', '.join(registry.names())}  (python -m harness list describes them)")
    parser.add_argument("--backend", default="naive", help="attention backend (default: naive)")
    parser.add_argument("--tokens", type=int, default=64, metavar="N",
                        help="total tokens including the 8-token prompt (default: 64)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None,
                        help="default: cuda when available, else cpu")
    parser.add_argument("--repeats", type=int, default=3, metavar="R",
                        help="timed runs after one warm-up run; the median is reported (default: 3)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--model-dir", metavar="DIR",
                        help="local Hugging Face snapshot: config.json + model.safetensors")
    source.add_argument("--weights", default="auto", metavar="random|auto|NAME",
                        help="'random': seeded random weights; 'auto' (default): the cached Hugging Face "
                             "snapshot if there is one, else random, never using the network; NAME: a hub "
                             "model such as gpt2, from the cache or the hub")
    parser.add_argument("--size", choices=sorted(SIZES), default="small",
                        help="model size for random or auto weights (default: small)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict:
    try:
        backend = registry.get(args.backend)
    except registry.UnknownBackendError as err:
        raise UsageError(str(err)) from None
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    try:
        check_runnable(backend, device)
    except BackendUnavailableError as err:
        raise UsageError(str(err)) from None
    if args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")

    tokenizer = load_tokenizer()
    prompt_ids = tokenizer.encode(PROMPT)
    try:
        source, directory = resolve(args.model_dir, args.weights, args.size)
        context = load_config(source, directory).n_positions
        if not len(prompt_ids) < args.tokens <= context:
            raise UsageError(f"--tokens must be larger than the prompt ({len(prompt_ids)} tokens) and at "
                             f"most the model's context ({context}), got {args.tokens}")
        model = build_model(source, directory, attention_fn(backend), device)
    except ModelDirError as err:
        raise UsageError(str(err)) from None

    timing = time_generation(model, prompt_ids, args.tokens, repeats=args.repeats)
    return {
        "backend": backend.name,
        "weights": source.describe(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "tokens": args.tokens,
        "repeats": args.repeats,
        "token_ids": timing.token_ids,
        "seconds_median": timing.median,
        "seconds_min": min(timing.seconds),
        "seconds_max": max(timing.seconds),
        "seconds_all": timing.seconds,
        "tokens_per_second": args.tokens / timing.median,
        "peak_memory_bytes": timing.peak_memory_bytes,
        "text": tokenizer.decode(timing.token_ids),
    }


def print_report(result: dict) -> None:
    peak = result["peak_memory_bytes"]
    print(f"backend        {result['backend']}")
    print(f"weights        {result['weights']}")
    print(f"device         {result['device']}")
    print(f"tokens         {result['tokens']} (prompt included), {result['repeats']} timed runs")
    print(f"wall time      median {result['seconds_median']:.3f} s  "
          f"(min {result['seconds_min']:.3f}, max {result['seconds_max']:.3f})")
    print(f"throughput     {result['tokens_per_second']:.1f} tokens/s")
    print(f"peak memory    {'n/a (cpu)' if peak is None else f'{peak / 2**20:.1f} MiB'}")
    print(f"text           {result['text']!r}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result = run(args)
    except UsageError as err:
        print(f"python -m gpt2: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
    else:
        print_report(result)
    return 0
