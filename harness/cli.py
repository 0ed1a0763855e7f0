"""`python -m harness <command>`: the study's steps, each usable on its own."""
from __future__ import annotations

import argparse
import sys

from harness import registry

BACKENDS_HELP = "comma-separated backend names, or 'all' (default); see `python -m harness list`"


def _shown(path) -> str:
    """A path relative to the project when it lies inside it."""
    try:
        return str(path.relative_to(registry.PROJECT_ROOT))
    except ValueError:
        return str(path)


def cmd_list(args: argparse.Namespace) -> int:
    for b in registry.BACKENDS:
        notes = []
        if b.build_flags:
            notes.append("flags: " + " ".join(b.build_flags))
        if b.is_version:
            notes.append("inputs: " + ("any row/batch strides" if b.strided_inputs else "contiguous"))
        if b.unavailable:
            notes.append(b.unavailable)
        print(f"{b.name:15s} {b.description}" + (f"  [{'; '.join(notes)}]" if notes else ""))
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from harness.build import build_all
    from harness.extension import set_build_environment

    set_build_environment()
    results = build_all(registry.select(args.backends), jobs=args.jobs)
    failed = [r.name for r in results if not r.ok]
    print(f"built {len(results) - len(failed)}/{len(results)} versions" +
          (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def cmd_compile_check(args: argparse.Namespace) -> int:
    from harness.compile_check import run_compile_check

    return run_compile_check(registry.select(args.backends), args.arch)


def cmd_sanitize_workload(args: argparse.Namespace) -> int:
    from harness.sanitize import run_workload

    return run_workload([b for b in registry.select(args.backends) if b.is_version])


def _require_cuda(args: argparse.Namespace) -> None:
    """Refuse early and clearly: unknown backend names first, then a missing GPU."""
    import torch

    registry.select(args.backends)
    if not torch.cuda.is_available():
        raise CommandError("no CUDA device is available; this step needs a GPU "
                           "(./run_all.sh --plots-only works without one)")


def _gated(args: argparse.Namespace, required: str) -> list[registry.Backend]:
    """The selected backends, with `required` (the reference the step compares against)
    added if missing, that pass the correctness gate; plus the unavailable ones (listed
    in the results as such). The reference is gated like any other backend."""
    from harness.correctness import passing

    selected = registry.select(args.backends)
    if required not in {b.name for b in selected}:
        selected = [registry.get(required), *selected]
    if args.skip_gate:
        return selected
    passed = {b.name for b in passing(selected)}
    return [b for b in selected if b.name in passed or b.unavailable]


def cmd_check(args: argparse.Namespace) -> int:
    from harness.correctness import run_gate

    _require_cuda(args)
    selected = registry.select(args.backends)
    passed = run_gate(selected)
    runnable = [b for b in selected if not b.unavailable]
    return 0 if len(passed) == len(runnable) else 1


def cmd_bench_kernels(args: argparse.Namespace) -> int:
    from harness import bench_kernels

    _require_cuda(args)
    backends = _gated(args, bench_kernels.REFERENCE_BACKEND)
    shapes = bench_kernels.QUICK_SHAPES if args.quick else bench_kernels.GENERATION_SHAPES + bench_kernels.THROUGHPUT_SHAPES
    bench_kernels.run(backends, shapes, reps=args.reps, resume=not args.fresh)
    return 0


def cmd_bench_e2e(args: argparse.Namespace) -> int:
    from harness import bench_e2e

    _require_cuda(args)
    backends = _gated(args, "naive")  # the token comparison refers to naive
    tokens = bench_e2e.QUICK_TOKEN_COUNTS if args.quick else bench_e2e.TOKEN_COUNTS
    bench_e2e.run(backends, tokens, repeats=args.repeats, resume=not args.fresh, profile=not args.quick)
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from harness.plots import plot_all

    written = plot_all()
    for path in written:
        print(f"wrote {_shown(path)}")
    if not written:
        print("no results to plot under results/")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report import update_files

    for path in update_files():
        print(f"updated {_shown(path)}")
    return 0


class CommandError(Exception):
    """A step that cannot run here: one line on stderr, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="list the backends in the registry")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("build", help="build the CUDA versions in parallel (only what changed)")
    p.add_argument("--backends", default="all", help=BACKENDS_HELP)
    p.add_argument("--jobs", type=int, default=None, help="versions built at once (default: cores / 2)")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("compile-check", help="compile every attention.cu with nvcc alone (no GPU) and "
                                             "report registers, shared memory and spills")
    p.add_argument("--backends", default="all", help=BACKENDS_HELP)
    p.add_argument("--arch", action="append", default=None,
                   help="SM architecture, repeatable (default: sm_90 and sm_75)")
    p.set_defaults(func=cmd_compile_check)

    p = sub.add_parser("check", help="correctness gate: every backend against float64 (GPU)")
    p.add_argument("--backends", default="all", help=BACKENDS_HELP)
    p.set_defaults(func=cmd_check)

    for name, func, help_text in (("bench-kernels", cmd_bench_kernels, "time the attention op of every backend (GPU)"),
                                  ("bench-e2e", cmd_bench_e2e, "time GPT-2 generation with every backend (GPU)")):
        p = sub.add_parser(name, help=help_text + "; rows go to results/<gpu>/ and a rerun resumes")
        p.add_argument("--backends", default="all", help=BACKENDS_HELP)
        p.add_argument("--quick", action="store_true", help="a few shapes / token counts only")
        p.add_argument("--fresh", action="store_true",
                       help="measure again even what this setup (GPU, driver, torch, commit) already has")
        p.add_argument("--skip-gate", action="store_true",
                       help="time without the correctness gate (by default a backend is timed only if it "
                            "passed the gate on this setup; the gate runs for those not yet checked)")
        if name == "bench-kernels":
            p.add_argument("--reps", type=int, default=50, help="timed repetitions per shape (default: 50)")
        else:
            p.add_argument("--repeats", type=int, default=3, help="timed runs per length (default: 3)")
        p.set_defaults(func=func)

    p = sub.add_parser("plot", help="redraw plots/<gpu>/ from results/<gpu>/*.csv (no GPU needed)")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("report", help="regenerate the README tables and each version's measured effect")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("sanitize-workload", help="small workload for compute-sanitizer (tools/sanitize.sh)")
    p.add_argument("--backends", default="all", help=BACKENDS_HELP)
    p.set_defaults(func=cmd_sanitize_workload)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (registry.UnknownBackendError, CommandError) as err:
        print(f"python -m harness: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\npython -m harness: interrupted; every finished row is kept under results/, and the same "
              "command resumes where this one stopped", file=sys.stderr)
        return 130
