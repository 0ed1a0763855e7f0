"""`python -m harness <command>`: the study's steps, each usable on its own."""
from __future__ import annotations

import argparse
import sys

from harness import registry

BACKENDS_HELP = "comma-separated backend names, or 'all' (default); see `python -m harness list`"


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

    p = sub.add_parser("sanitize-workload", help="small workload for compute-sanitizer (tools/sanitize.sh)")
    p.add_argument("--backends", default="all", help=BACKENDS_HELP)
    p.set_defaults(func=cmd_sanitize_workload)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except registry.UnknownBackendError as err:
        print(f"python -m harness: error: {err}", file=sys.stderr)
        return 2
