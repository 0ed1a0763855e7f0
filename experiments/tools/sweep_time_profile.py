"""Where a full sweep's time goes: the correctness gate, the kernel benchmark and the
end-to-end benchmark run backend by backend in one process, each timed, with the
end-to-end phases (prepare, warm-up, eager run, capture, replays, logits) timed apiece and
every graph replay's time printed (is the first replay as fast as the others?).

    python experiments/tools/sweep_time_profile.py --results-dir /tmp/profile \
        --e2e naive,sdpa-cudnn,flex-attention,v01,v18,h04

Writes into --results-dir, a scratch folder (never results/). Needs a GPU and the built
versions (python -m harness build).
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator

import torch

from backends import arguments, precision, registry
from backends.registry import Target
from gpt2 import timing
from gpt2.weights import resolve
from harness import bench_e2e, bench_kernels, correctness
from harness.study import KERNEL_SHAPES, TOKEN_COUNTS

SECONDS: dict[str, float] = defaultdict(float)


@contextmanager
def timed(label: str) -> Iterator[None]:
    torch.cuda.synchronize()
    start = time.perf_counter()
    try:
        yield
    finally:
        torch.cuda.synchronize()
        SECONDS[label] += time.perf_counter() - start


def wrap(owner: object, name: str, label: str) -> None:
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        with timed(label):
            return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def main(argv: list[str] | None = None) -> None:
    parser = arguments.OneLineParser(prog="sweep_time_profile.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", type=arguments.path, required=True)
    parser.add_argument("--e2e", type=arguments.text, default="naive,sdpa-cudnn,flex-attention,v01,v18,h04",
                        help="backends whose end-to-end run is profiled (in each dtype they take)")
    parser.add_argument("--skip-kernels", action="store_true")
    args = parser.parse_args(argv)
    try:
        e2e = registry.select(args.e2e)
    except registry.UnknownBackendError as err:
        parser.error(f"--e2e: {err}")
    if not torch.cuda.is_available():
        parser.error("no CUDA device is available: the profile times a sweep on a GPU")
    device = torch.device("cuda")
    dtypes = list(precision.EVERY)
    everyone = registry.select("all")

    # The gate and the kernel benchmark, one backend at a time (the kernel reference first).
    for dtype in dtypes:
        runnable, _ = registry.partition(everyone, Target.of(device), dtype)
        with timed(f"gate {dtype}: cases (float64 references, vendor bounds)"):
            correctness.gate_cases(device, dtype)
        for b in runnable:
            with timed(f"gate {dtype}: {b.name}"):
                correctness.run_gate([b], [dtype], results_dir=args.results_dir, device=device)
        if args.skip_kernels:
            continue
        first = registry.get(registry.kernel_reference(dtype))
        for b in [first, *[b for b in runnable if b is not first]]:
            with timed(f"kernels {dtype}: {b.name}"):
                bench_kernels.run([b], [dtype], KERNEL_SHAPES, results_dir=args.results_dir, device=device)

    # End to end, phase by phase.
    original_graph = timing.time_graph

    def graph_all_replays(model, plan, **_):  # whatever the sweep asks: every replay, the first included
        result = original_graph(model, plan, replays=3, warmup_replays=0)
        longest = result.seconds[plan.total].values
        print(f"    replays of the {plan.total}-token graph, first included: "
              + ", ".join(f"{s:.4f}" for s in longest) + " s")
        return result

    bench_e2e.time_graph = graph_all_replays
    wrap(bench_e2e, "time_graph", "e2e graph (capture + 3 replays)")
    wrap(bench_e2e, "time_eager", "e2e eager run")
    wrap(bench_e2e, "greedy_generate", "e2e warm-up / reference generations")
    wrap(bench_e2e.Sweep, "logits_error", "e2e logits error")
    wrap(bench_e2e.Sweep, "floor", "e2e floor (once per dtype)")
    source = bench_e2e.gpt2_model(resolve(None, "auto"))
    # One sweep, as run_all.sh runs it; each backend's share is the time since the previous
    # backend's line (its measurement, its rows, and any reference it needed first).
    mark = {"time": time.perf_counter(), "seconds": dict(SECONDS)}
    print_last = bench_e2e._print_last

    def print_with_phases(name, dtype, plan, row):
        print_last(name, dtype, plan, row)
        now = time.perf_counter()
        phases = {k: SECONDS[k] - mark["seconds"].get(k, 0.0) for k in SECONDS if k.startswith("e2e")}
        total = now - mark["time"]
        print(f"e2e {dtype} {name}: {total:.1f} s: "
              + ", ".join(f"{k[4:]} {v:.1f}" for k, v in phases.items() if v > 0.05), flush=True)
        SECONDS[f"e2e {dtype}: {name}"] += total
        mark["time"], mark["seconds"] = time.perf_counter(), dict(SECONDS)

    bench_e2e._print_last = print_with_phases
    start = time.perf_counter()
    bench_e2e.run(e2e, dtypes, [bench_e2e.recompute_plan(TOKEN_COUNTS)], source=source,
                  results_dir=args.results_dir, device=device)
    SECONDS["e2e: all"] = time.perf_counter() - start

    print("\n== seconds, largest first")
    for label, seconds in sorted(SECONDS.items(), key=lambda kv: -kv[1]):
        print(f"{seconds:8.1f}  {label}")


if __name__ == "__main__":
    main()
