"""`python -m harness <command>`: the study's steps, each usable on its own.

Results and plots go where --results-dir and --plots-dir say (default: the committed
results/ and plots/ folders); `report` rewrites the README tables and each GPU's
page (results/<gpu>/README.md) only from the committed results/ folder, and writes
<results-dir>/report.md for any other.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import torch

from backends import arguments, precision, registry
from backends.extension import BuildSetupError
from backends.interrupts import describe, exit_status, stop_on_signals
from backends.registry import PROJECT_ROOT, Backend, Target
from gpt2.config import ModelDirError
from gpt2.modes import MODES
from harness import hf_generate, kernel_plan
from harness.kernel_plan import KernelPlan
from harness.results import ResultsFileError
from harness.study import (DECODE_ROUNDS, DECODE_SHAPES, GRID_SHAPES, HEADLINE_SHAPES, KERNEL_ROUNDS,
                           KERNEL_SHAPES, QUICK_DECODE_SHAPES, QUICK_TOKEN_COUNTS, TOKEN_COUNTS, Shape)

DTYPES_HELP = ("comma-separated dtypes among float32, bfloat16, float16, or 'all' (default); each backend is "
               "measured in each of them that it takes (python -m harness list says which)")
BACKENDS_HELP = ("comma-separated backend names, 'all' (default), or 'quick' (all but those a quick sweep "
                 "leaves out); see `python -m harness list`")
E2E_BACKENDS_HELP = (BACKENDS_HELP + f"; and {hf_generate.NAME}: Hugging Face transformers' own generate() with its "
                     "KV cache on the same weights (not a registry row; kv-cache mode only), measured with 'all' "
                     "and 'quick' or where the list names it")
GRID_ONLY_HELP = (f"only the prefill grid ({len(GRID_SHAPES)} shapes: B 1-64 x T 64-1024 at GPT-2 small's heads, "
                  "GPT-2 medium/large/xl's heads at B 1 and 16 x T 256 and 1024), for the backends it is measured "
                  "for: PyTorch's kernels and each prefill track's last version (by default the kernel benchmark "
                  "measures every backend at the study's shapes and those at the grid too)")
COMMITTED_RESULTS = PROJECT_ROOT / "results"
COMMITTED_PLOTS = PROJECT_ROOT / "plots"
REPORT_NAME = "report.md"
# Bounds of the numbers a command line gives, far above any use: a mistyped 10**9 is refused at
# once instead of running for days or failing deep inside.
MAX_ROUNDS = 50  # --rounds (the sweep's: KERNEL_ROUNDS)
MAX_JOBS = 256  # --jobs: compiler processes at once
MAX_CALLS = 10_000  # call --repeat
MAX_CALL_TOKENS = 2**21  # call --B x --T: q, k, v and out of 12 heads of 64 in float32 are 24 GiB
MAX_STAGE_SECONDS = 30 * 24 * 3600  # record-stages: a month, longer than any sweep
MAX_EXIT_STATUS = 255  # what a process's exit status can be
# What an interrupted command leaves, and what running it again does (None: nothing to say).
ROWS_KEPT = "every finished row is kept; to resume where this one stopped, run the same command again"
BUILDS_KEPT = "every finished build is kept; to build the rest, run the same command again"
NOTHING_MEASURED = ("it measures nothing and the results are untouched, but {what} may be left half done; "
                    "to write them all, run the same command again")


class CommandError(Exception):
    """A step that cannot run here: one line on stderr, exit status 2."""


# `try --shapes`: each choice's shapes and what its help says of them.
TRY_SHAPES: dict[str, tuple[tuple[Shape, ...], str]] = {
    "all": (KERNEL_SHAPES, "the kernel benchmark's shapes (default)"),
    "headline": (HEADLINE_SHAPES, "B=1 T=512 and B=8 T=4096"),
    "grid": (GRID_SHAPES, "the prefill grid (B 1-64 x T 64-1024 and the wider heads)"),
}


def _shown(path: Path) -> str:
    """A path relative to the project when it lies inside it."""
    try:
        return str(path.resolve().relative_to(PROJECT_ROOT))
    except (ValueError, OSError, RuntimeError):  # outside it; a symbolic link loop (RuntimeError, OSError)
        return str(path)


def _cuda(without_gpu: str = "./run_all.sh --plots-only works without one") -> torch.device:
    """The GPU the GPU steps run on; CommandError (saying what works without one) when there is none."""
    if not torch.cuda.is_available():
        raise CommandError(f"no CUDA device is available; this step needs a GPU ({without_gpu})")
    return torch.device("cuda", torch.cuda.current_device())


def cmd_list(args: argparse.Namespace) -> int:
    target = Target.of("cuda")
    here = (f"this machine: a GPU of compute capability {registry.capability_text(target.capability)} (cc)"
            if target.capability else "this machine: no CUDA GPU; cc: a GPU's compute capability")
    where_width = max(len(b.runs_on()) for b in registry.BACKENDS)
    print(f"{'backend':15s} {'runs on':{where_width}s} description  [{here}]")
    for b in registry.BACKENDS:
        notes = []
        if isinstance(b, registry.KernelVersion):
            if b.build_flags:
                notes.append("flags: " + " ".join(b.build_flags))
            notes.append(f"inputs: {b.input_layout}")
        if b.dtypes != precision.EVERY:
            notes.append("dtypes: " + ", ".join(b.dtypes) + (f" ({b.dtype_note})" if b.dtype_note else ""))
        notes.append("ops: " + ", ".join(k.name for k in b.kinds))
        reason = b.why_unavailable(target)
        if reason and target.capability:
            notes.append(f"not available: {reason}")
        if b.end_to_end:
            notes.append(b.end_to_end)
        quick = registry.quick_refusal(b)
        if quick:
            notes.append(quick)
        print(f"{b.name:15s} {b.runs_on():{where_width}s} {b.description}"
              + (f"  [{'; '.join(notes)}]" if notes else ""))
    return 0


def _in_range(name: str, value: int, low: int, high: int, why: str) -> None:
    """CommandError unless low <= value <= high (backends/arguments.py says how)."""
    problem = arguments.out_of_range(name, value, low, high, why)
    if problem:
        raise CommandError(problem)


def _check_jobs(args: argparse.Namespace) -> None:
    if args.jobs is not None and args.jobs < 1:
        raise CommandError(f"--jobs must be at least 1 (got {args.jobs}); leave it out for the default")
    if args.jobs is not None:
        _in_range("--jobs", args.jobs, 1, MAX_JOBS, "each job is a compiler process; leave it out for the default")


def cmd_build(args: argparse.Namespace) -> int:
    from harness.build import build_all

    _check_jobs(args)
    try:
        results = build_all(registry.select(args.backends), jobs=args.jobs)
    except BuildSetupError as err:
        raise CommandError(str(err)) from None
    failed = [r.name for r in results if not r.ok]
    skipped = [r.name for r in results if r.skipped]
    built = len(results) - len(failed) - len(skipped)
    print(f"built {built}/{len(results)} versions" + (f"; skipped: {', '.join(skipped)}" if skipped else "")
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def cmd_compile_check(args: argparse.Namespace) -> int:
    from harness.compile_check import arch_capability, run_compile_check

    _check_jobs(args)
    for arch in args.arch or ():
        try:
            arch_capability(arch)
        except ValueError as err:
            raise CommandError(f"--arch: {err}") from None
    repeated = arguments.repeated(args.arch or [])
    if repeated:  # each would be compiled twice
        raise CommandError(f"--arch {', '.join(repeated)} is given more than once: name each architecture once")
    return run_compile_check(registry.select(args.backends), args.arch, jobs=args.jobs)


def _dtypes(args: argparse.Namespace) -> list[str]:
    """The --dtypes selection, checked."""
    try:
        return precision.select(args.dtypes)
    except precision.UnknownDtypeError as err:
        raise CommandError(f"--dtypes: {err}") from None


def cmd_sanitize_workload(args: argparse.Namespace) -> int:
    from harness.sanitize import run_decode_workload, run_workload, workload_batches

    selected = registry.select(args.backends)
    dtypes = _dtypes(args)
    if args.batch is not None and args.batch not in workload_batches():
        raise CommandError(f"--batch: the workload has no shape of batch size {args.batch} "
                           f"(it has {', '.join(map(str, workload_batches()))})")
    device = _cuda()
    runnable, reasons = registry.partition([b for b in selected if isinstance(b, registry.KernelVersion)],
                                           Target.of(device))
    for name, reason in reasons.items():
        print(f"{name}: skipped ({reason})")
    prefill = [b for b in runnable if isinstance(b, registry.CudaVersion)]
    decode = [b for b in runnable if isinstance(b, registry.DecodeVersion)]
    return max(run_workload(prefill, device, dtypes, args.batch),  # type: ignore[arg-type]
               run_decode_workload(decode, device, dtypes))  # type: ignore[arg-type]


def _gated(args: argparse.Namespace, dtypes: list[str],
           selected: list[Backend] | None = None) -> tuple[list[Backend], dict[tuple[str, str], str]]:
    """The selected backends (by default those --backends names), and the (backend, dtype) pairs
    to leave out with why: failed the correctness gate or cannot run here."""
    from harness.correctness import run_gate

    selected = registry.select(args.backends) if selected is None else selected
    if args.skip_gate:
        return selected, {}
    return selected, run_gate(selected, dtypes, results_dir=args.results_dir, device=_cuda()).left_out


def cmd_check(args: argparse.Namespace) -> int:
    from harness.correctness import run_gate
    from harness.decode_gate import run_decode_gate

    selected = registry.select(args.backends)
    dtypes = _dtypes(args)
    _results_to_write(args)
    device = _cuda()
    gate = run_gate(selected, dtypes, results_dir=args.results_dir, resume=not args.fresh, device=device)
    decode_left_out = run_decode_gate(selected, dtypes, results_dir=args.results_dir, resume=not args.fresh,
                                      device=device)
    failed = 0
    for kind, left_out in ((registry.PREFILL, gate.left_out), (registry.DECODE, decode_left_out)):
        runnable = registry.providing(selected, kind)
        failed += sum(1 for dtype in dtypes for b in registry.partition(runnable, Target.of(device), dtype, kind)[0]
                      if (b.name, dtype) in left_out)
    return 0 if failed == 0 else 1


def _check_rounds(args: argparse.Namespace, sweep: int = KERNEL_ROUNDS) -> None:
    """--rounds within 1..MAX_ROUNDS; `sweep`: what the sweep takes."""
    _in_range("--rounds", args.rounds, 1, MAX_ROUNDS, f"every round times every backend at every shape again (the "
              f"sweep takes {sweep})")


def _kernel_plan(args: argparse.Namespace) -> KernelPlan:
    """The kernel benchmark's shapes for --quick / --grid-only (harness/kernel_plan.py)."""
    if args.quick and args.grid_only:
        raise CommandError("--quick and --grid-only exclude each other: a quick sweep measures no grid")
    return kernel_plan.QUICK if args.quick else kernel_plan.GRID_ONLY if args.grid_only else kernel_plan.FULL


def _planned(backends: list[Backend], plan: KernelPlan) -> list[Backend]:
    """The backends `plan` measures at any shape (--grid-only: PyTorch's kernels and each prefill
    track's last version), so that the gate checks no other."""
    kept = [b for b in backends if plan.shapes_for(b)]
    if not kept:
        raise CommandError("none of the selected backends is measured at these shapes (the grid is measured for "
                           "PyTorch's kernels and each prefill track's last version)")
    return kept


def cmd_bench_kernels(args: argparse.Namespace) -> int:
    from harness import bench_kernels

    selected = registry.select(args.backends)  # unknown names first
    _check_rounds(args)
    plan = _kernel_plan(args)
    planned = _planned(selected, plan)
    dtypes = _dtypes(args)
    _results_to_write(args)
    device = _cuda()
    backends, excluded = _gated(args, dtypes, planned)
    path = bench_kernels.run(backends, dtypes, plan, results_dir=args.results_dir, resume=not args.fresh,
                             excluded=excluded, device=device, rounds=args.rounds)
    print(f"rows in {_shown(path)}")
    return 0


def cmd_bench_decode(args: argparse.Namespace) -> int:
    from harness import bench_decode
    from harness.decode_gate import run_decode_gate

    selected = registry.select(args.backends)
    _check_rounds(args, DECODE_ROUNDS)
    dtypes = _dtypes(args)
    _results_to_write(args)
    device = _cuda()
    excluded = {} if args.skip_gate else run_decode_gate(selected, dtypes, results_dir=args.results_dir, device=device)
    path = bench_decode.run(selected, dtypes, QUICK_DECODE_SHAPES if args.quick else DECODE_SHAPES,
                            results_dir=args.results_dir, resume=not args.fresh, excluded=excluded, device=device,
                            rounds=args.rounds)
    print(f"rows in {_shown(path)}")
    return 0


def _e2e_selection(spec: str) -> tuple[list[Backend], bool]:
    """--backends of bench-e2e: the registry rows it names, and whether transformers' generate()
    (harness/hf_generate.py, not a registry row) is measured too: with 'all' and 'quick', or
    where the list names it."""
    names = [part.strip() for part in spec.split(",") if part.strip()]
    if hf_generate.NAME not in names:
        return registry.select(spec), spec.strip() in ("", "all", "quick")
    others = [name for name in names if name != hf_generate.NAME]
    if len(names) - len(others) > 1:
        raise registry.UnknownBackendError(f"{spec!r} names {hf_generate.NAME} more than once: name each backend once")
    return (registry.select(",".join(others)) if others else []), True


def cmd_bench_e2e(args: argparse.Namespace) -> int:
    from gpt2.cli import weights_from_args
    from harness import bench_e2e

    selected, transformers = _e2e_selection(args.backends)
    try:
        modes = bench_e2e.parse_modes(args.modes)
    except ValueError as err:
        raise CommandError(f"--modes: {err}") from None
    dtypes = _dtypes(args)
    _results_to_write(args)
    try:
        weights = weights_from_args(args)
        weights.check()  # before the GPU and the gate, not after them
        source = bench_e2e.gpt2_model(weights)
    except ModelDirError as err:
        raise CommandError(str(err)) from None
    device = _cuda()
    backends, excluded = _gated(args, dtypes, selected)
    path = bench_e2e.run(backends, dtypes, bench_e2e.study_plans(modes, quick=args.quick), source=source,
                         results_dir=args.results_dir, resume=not args.fresh, excluded=excluded, device=device,
                         transformers=transformers)
    print(f"rows in {_shown(path)}")
    return 0


def cmd_precompile(args: argparse.Namespace) -> int:
    from gpt2.cli import weights_from_args
    from harness import precompile

    selected = registry.select(args.backends)
    dtypes = _dtypes(args)
    plan = _kernel_plan(args)
    try:
        config = weights_from_args(args).config()
    except ModelDirError as err:
        raise CommandError(str(err)) from None
    device = _cuda()
    # --grid-only: the kernel benchmark's grid alone (and the gate it runs first), no generation
    token_counts = () if args.grid_only else QUICK_TOKEN_COUNTS if args.quick else TOKEN_COUNTS
    stored = precompile.Stored() if args.fresh else precompile.Stored.read(args.results_dir, device)
    for dtype in dtypes:
        start = time.perf_counter()
        names = precompile.run(selected, dtype, plan=plan, config=config, token_counts=token_counts,
                               device=device, stored=stored)
        print(f"precompile, {dtype}: " + (f"{', '.join(names)} in {time.perf_counter() - start:.0f} s" if names
                                          else "nothing to compile (no selected backend compiles, or its rows "
                                               "are all stored)"))
    return 0


def cmd_try(args: argparse.Namespace) -> int:
    from harness import try_variants, variants
    from harness.compile_check import arch_capability

    _check_rounds(args)
    log = _log_file(args.log)
    if not args.variants and not args.against:
        raise CommandError(f"name a variant ({variants.SPEC_FORM}) or backends to time with --against")
    try:
        specs = [variants.parse_spec(text) for text in args.variants]
    except variants.VariantError as err:
        raise CommandError(str(err)) from None
    decode = [spec.name for spec in specs if not spec.base.provides(registry.PREFILL)]
    if decode:
        raise CommandError(f"{', '.join(decode)}: try checks and times prefill variants; a decode version's variant "
                           "is built with `python -m harness call` and measured by the decode benchmark")
    names = [spec.name for spec in specs]
    repeated = arguments.repeated(names)
    if repeated:
        raise CommandError(f"each variant needs its own name; repeated: {', '.join(repeated)}")
    if args.compile_only:
        try:
            arch_capability(args.arch)
        except ValueError as err:
            raise CommandError(f"--arch: {err}") from None
    dtype = args.dtype
    # The variants' own versions, unless --against names others; the kernel reference is always timed.
    against = registry.select(args.against) if args.against else list({s.base.name: s.base for s in specs}.values())
    against = [b for b in against if b.name != registry.kernel_reference(dtype)]
    refusing = [f"{b.name} ({b.dtype_refusal(dtype)})" for b in [*(s.base for s in specs), *against]
                if b.dtype_refusal(dtype)]
    if refusing:
        raise CommandError(f"--dtype {dtype}: " + "; ".join(dict.fromkeys(refusing)))
    device = None if args.compile_only else _cuda("--compile-only works without one")
    try:
        rows = [variants.materialize(spec) for spec in specs]
    except variants.VariantError as err:
        raise CommandError(str(err)) from None
    log = try_variants.Log(log)
    try:
        if device is None:
            versions = [b for b in against if isinstance(b, registry.CudaVersion)] + rows
            return 0 if try_variants.compile_report(versions, args.arch, log) else 1
        shapes = TRY_SHAPES[args.shapes][0]
        return try_variants.run(rows, against, shapes, rounds=args.rounds, device=device, log=log, dtype=dtype)
    except (registry.BackendUnavailableError, BuildSetupError) as err:
        raise CommandError(str(err)) from None
    finally:
        log.close()


def _log_file(path: Path | None) -> Path | None:
    """--log FILE, checked before anything is built: a file (new or not) in a folder that exists
    and can be written, appended to; CommandError otherwise."""
    if path is None:
        return None
    if path.is_dir():
        raise CommandError(f"--log {_shown(path)} is a folder: name a file to append the log to")
    if not path.parent.is_dir():
        raise CommandError(f"--log {_shown(path)}: the folder {_shown(path.parent)} does not exist")
    existed = path.exists()
    try:
        with path.open("a"):
            pass
    except OSError as err:
        raise CommandError(f"--log {_shown(path)}: cannot write it ({err.strerror})") from None
    if not existed:
        path.unlink()  # the command creates it when it has something to say
    return path


def cmd_call(args: argparse.Namespace) -> int:
    from harness import variants
    from harness.reference import random_qkv
    from harness.study import GPT2_HEADS, Shape

    if min(args.B, args.T, args.repeat) < 1:
        raise CommandError("--B, --T and --repeat must be at least 1")
    _in_range("--repeat", args.repeat, 1, MAX_CALLS, "a profiler needs a few calls")
    _in_range("--B × --T", args.B * args.T, 1, MAX_CALL_TOKENS,
              "q, k, v and the output of 12 heads of 64 would not fit a GPU's memory")
    try:
        backend = (variants.materialize(variants.parse_spec(args.backend)) if "=" in args.backend
                   else registry.get(args.backend))
    except variants.VariantError as err:
        raise CommandError(str(err)) from None
    dtype = args.dtype or backend.dtypes[0]
    try:
        precision.torch_dtype(dtype)
    except precision.UnknownDtypeError as err:
        raise CommandError(f"--dtype: {err}") from None
    if backend.dtype_refusal(dtype):
        raise CommandError(f"--dtype {dtype}: {backend.name} ({backend.dtype_refusal(dtype)})")
    device = _cuda("nothing to profile without one")
    shape = Shape(args.B, GPT2_HEADS, args.T)
    try:
        fn = backend.attention(device, dtype)
    except (registry.BackendUnavailableError, BuildSetupError) as err:
        raise CommandError(str(err)) from None
    q, k, v = random_qkv(shape, seed=shape.T, device=device, dtype=precision.torch_dtype(dtype))
    for _ in range(args.repeat):
        fn(q, k, v, shape.H)
    torch.cuda.synchronize(device)
    print(f"{backend.name}: {args.repeat} call(s) at {shape.describe()}, {dtype}")
    return 0


def _stage(text: str) -> tuple[str, float, int]:
    """'NAME:SECONDS:EXIT_STATUS' (the name may hold spaces) -> its parts: a stage's wall time
    (a finite number of seconds, at least zero) and a process's exit status (0 to 255)."""
    name, sep, rest = text.rpartition(":")
    name, sep2, seconds = name.rpartition(":")
    try:
        if not (sep and sep2 and name.strip()):
            raise ValueError
        stage = name, float(seconds), int(rest)
    except ValueError:
        raise CommandError(f"cannot read the stage {text!r}: write NAME:SECONDS:EXIT_STATUS, "
                           "e.g. 'kernel benchmark:62:0'") from None
    if not (math.isfinite(stage[1]) and 0 <= stage[1] <= MAX_STAGE_SECONDS):
        raise CommandError(f"the stage {text!r}: its seconds must be a number from 0 to {MAX_STAGE_SECONDS:,} "
                           f"(got {seconds})")
    if not 0 <= stage[2] <= MAX_EXIT_STATUS:
        raise CommandError(f"the stage {text!r}: its exit status must be from 0 to {MAX_EXIT_STATUS} (got {rest})")
    return stage


def cmd_record_stages(args: argparse.Namespace) -> int:
    from backends.environment import collect
    from harness.results import STAGES, StageRow

    stages = [_stage(text) for text in args.stages]
    registry.select(args.backends)  # the run's selections, stored as given: a name it could not have run is refused
    _dtypes(args)
    _results_to_write(args)
    device = _cuda("the stage times are stored with the GPU's provenance")
    provenance = collect(device)
    path = STAGES.path(args.results_dir, provenance.slug)
    for name, seconds, status in stages:
        STAGES.append(path, StageRow(run=args.run, mode=args.mode, backends=args.backends, dtypes=args.dtypes,
                                     stage=name, seconds=seconds, exit_status=status, provenance=provenance))
    print(f"stage times in {_shown(path)}")
    return 0


def not_a_gpu_folder(path: Path, argument: str = "--results-dir") -> None:
    """CommandError if `path` holds one GPU's results files itself (results/nvidia-h200/, not
    results/): every command reads and writes <results-dir>/<gpu>/, one level below."""
    from harness.results import TABLES

    found = [table.file_name for table in TABLES if (path / table.file_name).exists()] if path.is_dir() else []
    if found:
        raise CommandError(f"{argument} {_shown(path)} holds one GPU's results itself ({', '.join(found)}): pass "
                           f"the folder above it, {_shown(path.parent)} (results go to <results-dir>/<gpu>/)")


def folder_to_read(path: Path, argument: str) -> Path:
    """`path`, the value of `argument`, as a folder results are read from: CommandError unless
    it exists, is a folder and can be read."""
    _no_link_to_nothing(path, f"{argument} {_shown(path)}")
    if not path.exists():
        raise CommandError(f"{argument} {_shown(path)} does not exist: name a folder of results (one subfolder "
                           "per GPU, as ./run_all.sh --results-dir DIR writes them)")
    if not path.is_dir():
        raise CommandError(f"{argument} {_shown(path)} is a file: name a folder of results")
    if not os.access(path, os.R_OK | os.X_OK):
        raise CommandError(f"{argument} {_shown(path)} cannot be read (permission denied)")
    return path


def folder_to_write(folder: Path, argument: str, value: Path | None = None, hint: str = "") -> Path:
    """`folder`, where the value of `argument` (`value`, default `folder`) has us write: created
    if missing; CommandError unless that works and a file can be written there."""
    named = f"{argument} {_shown(value or folder)}"
    _nearest_folder(folder, named, hint)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CommandError(f"{named}: cannot create the folder {_shown(folder)} ({err.strerror}){hint}") from None
    _can_write_in(folder, named, hint)
    return folder


def folder_to_write_later(folder: Path, argument: str) -> None:
    """`folder`, the value of `argument`, checked before a command that writes there later (rows
    measured on a GPU) begins, without making it: CommandError unless it, or the nearest of its
    parents that exists, is a folder a file can be written in."""
    nearest = no_file_in_the_way(folder, argument)
    if nearest is not None:
        _can_write_in(nearest, f"{argument} {_shown(folder)}")


def no_file_in_the_way(folder: Path, argument: str) -> Path | None:
    """The nearest of `folder` (the value of `argument`) and its parents that exists, where the
    folder is or will be made (None: none exists); CommandError if that is a file."""
    return _nearest_folder(folder, f"{argument} {_shown(folder)}")


def _nearest_folder(folder: Path, named: str, hint: str = "") -> Path | None:
    """The nearest of `folder` and its parents that exists (None: none does); CommandError if it
    is a file."""
    _no_link_to_nothing(folder, named, hint)
    nearest = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if nearest is not None and not nearest.is_dir():
        raise CommandError(f"{named}: {_shown(nearest)} is a file, not a folder{hint}")
    return nearest


def _no_link_to_nothing(path: Path, named: str, hint: str = "") -> None:
    """CommandError if `path` or a folder above it is a symbolic link that leads nowhere (a loop,
    or a target that is gone): it exists as a name but neither as a file nor as a folder."""
    broken = next((p for p in (path, *path.parents) if p.is_symlink() and not p.exists()), None)
    if broken is not None:
        raise CommandError(f"{named}: {_shown(broken)} is a symbolic link that leads nowhere (a loop, or its "
                           f"target is gone){hint}")


def _can_write_in(folder: Path, named: str, hint: str = "") -> None:
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise CommandError(f"{named}: cannot write in {_shown(folder)} ({err.strerror}){hint}") from None


def _results_to_write(args: argparse.Namespace) -> None:
    """--results-dir of a command that appends rows to <results-dir>/<gpu>/, checked before it
    asks for the GPU (the folder is made when the first row is written)."""
    folder_to_write_later(args.results_dir, "--results-dir")


@contextlib.contextmanager
def _writing() -> Iterator[None]:
    """An OSError while figures or tables are written (a read-only subfolder, a full disk)
    as one line that names the file."""
    try:
        yield
    except OSError as err:
        raise CommandError(f"cannot write {err.filename or 'a file'}: {err.strerror or err}") from None


def _load_results(args: argparse.Namespace) -> list:
    from harness.tables import load_all

    gpus = load_all(folder_to_read(args.results_dir, "--results-dir"))
    for r in gpus:
        for problem in r.problems:
            print(f"warning: {problem}", file=sys.stderr)
    if not gpus:
        print(f"no results under {_shown(args.results_dir)}/ (a GPU's sweep writes them: ./run_all.sh)")
    return gpus


def cmd_plot(args: argparse.Namespace) -> int:
    from harness.plots import plot_all, skipped

    gpus = _load_results(args)
    if gpus:
        folder_to_write(args.plots_dir, "--plots-dir")
    with _writing():
        written = plot_all(gpus, args.plots_dir)
    for path in written:  # outside _writing: a closed stdout is not a file that cannot be written
        print(f"wrote {_shown(path)}")
    for line in (line for r in gpus for line in skipped(r)):
        print(line)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report import update_readmes, write_report
    from harness.results import TABLES

    if args.output is not None and args.output.name in {table.file_name for table in TABLES}:
        raise CommandError(f"--output {_shown(args.output)} is named as a results file: name the report's own file, "
                           f"e.g. {REPORT_NAME} (a results file would be overwritten)")
    _nearest_folder(args.plots_dir, f"--plots-dir {_shown(args.plots_dir)}", ": name the folder of the figures the "
                    "report links to")
    gpus = _load_results(args)
    committed = args.results_dir.resolve() == COMMITTED_RESULTS.resolve()
    if args.output is None and committed:
        with _writing():
            updated = update_readmes(gpus, args.plots_dir)
        for path in updated:
            print(f"updated {_shown(path)}")
        if not updated:
            print("README.md, results/ and versions/*/README.md unchanged: their tables already match the results")
        return 0
    output = args.output or args.results_dir / REPORT_NAME
    if args.output is None:
        folder_to_write(args.results_dir, "--results-dir", hint="; write the report elsewhere with --output FILE")
    elif output.is_dir():
        raise CommandError(f"--output {_shown(output)} is a folder: name the file to write")
    else:
        _no_link_to_nothing(output, f"--output {_shown(output)}")
        folder_to_write(output.parent, "--output", output)
    with _writing():
        path = write_report(gpus, args.plots_dir, args.results_dir, output)
    print(f"wrote {_shown(path)} (the README and the GPUs' pages come from {_shown(COMMITTED_RESULTS)}/ only)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from gpt2.cli import add_weights_arguments

    parser = arguments.OneLineParser(prog="python -m harness", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def results_dir(p: argparse.ArgumentParser) -> None:
        p.add_argument("--results-dir", type=arguments.path, default=COMMITTED_RESULTS, metavar="DIR",
                       help=f"where results/<gpu>/*.csv are (default: {_shown(COMMITTED_RESULTS)}/)")

    def plots_dir(p: argparse.ArgumentParser) -> None:
        p.add_argument("--plots-dir", type=arguments.path, default=COMMITTED_PLOTS, metavar="DIR",
                       help=f"where plots/<gpu>/*.png go (default: {_shown(COMMITTED_PLOTS)}/)")

    p = sub.add_parser("list", help="list the backends, where each runs, and what is unavailable here")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("build", help="build the CUDA versions in parallel (only what changed); without a GPU, "
                                     "set TORCH_CUDA_ARCH_LIST (e.g. 9.0)")
    p.add_argument("--backends", type=arguments.text, default="all", help=BACKENDS_HELP)
    p.add_argument("--jobs", type=int, default=None, help="versions built at once (default: cores / 2)")
    p.set_defaults(func=cmd_build, on_stop=BUILDS_KEPT)

    p = sub.add_parser("compile-check", help="compile every attention.cu with nvcc alone (no GPU): registers, "
                                             "shared memory, spills, and the launch configuration")
    p.add_argument("--backends", type=arguments.text, default="all", help=BACKENDS_HELP)
    p.add_argument("--arch", action="append", default=None,
                   help="SM architecture, repeatable (default: sm_90 and sm_75)")
    p.add_argument("--jobs", type=int, default=None, help="nvcc processes at once (default: cores)")
    p.set_defaults(func=cmd_compile_check)

    p = sub.add_parser("check", help="correctness gates: every backend's prefill and decode ops against float64 "
                                     "(GPU)")
    p.add_argument("--backends", type=arguments.text, default="all", help=BACKENDS_HELP)
    p.add_argument("--dtypes", type=arguments.text, default="all", help=DTYPES_HELP)
    p.add_argument("--fresh", action="store_true", help="check again what this setup has already checked")
    results_dir(p)
    p.set_defaults(func=cmd_check, on_stop=ROWS_KEPT)

    for name, func, help_text in (
            ("bench-kernels", cmd_bench_kernels, "device time and call time of every backend's prefill op (GPU)"),
            ("bench-decode", cmd_bench_decode, "device time, call time and bytes per second of every backend's "
                                               "decode op against the HBM bandwidth (GPU)"),
            ("bench-e2e", cmd_bench_e2e, "GPT-2 generation with every backend: GPU time and eager time (GPU)")):
        p = sub.add_parser(name, help=help_text + "; rows go to <results-dir>/<gpu>/ and a rerun resumes")
        p.add_argument("--backends", type=arguments.text, default="all",
                       help=E2E_BACKENDS_HELP if name == "bench-e2e" else BACKENDS_HELP)
        p.add_argument("--dtypes", type=arguments.text, default="all", help=DTYPES_HELP)
        p.add_argument("--quick", action="store_true", help="a few shapes / token counts only"
                       + (" (no grid)" if name == "bench-kernels" else ""))
        p.add_argument("--fresh", action="store_true",
                       help="measure again even what this setup (GPU, driver, torch, commit) already has")
        p.add_argument("--skip-gate", action="store_true",
                       help="time without the correctness gate (by default a backend is timed only if it "
                            "passed the gate on this setup; the gate runs for those not yet checked)")
        results_dir(p)
        if name == "bench-decode":
            p.add_argument("--rounds", type=int, default=DECODE_ROUNDS,
                           help="rounds per shape, the order of the backends reversed every other round; each "
                                f"row pools its rounds' replays (default: %(default)s, at most {MAX_ROUNDS})")
        if name == "bench-kernels":
            p.add_argument("--grid-only", action="store_true", help=GRID_ONLY_HELP)
            p.add_argument("--rounds", type=int, default=KERNEL_ROUNDS,
                           help="rounds per shape, the order of the backends reversed every other round; each "
                                f"row pools its rounds' replays (default: %(default)s, at most {MAX_ROUNDS})")
        if name == "bench-e2e":
            p.add_argument("--modes", default=",".join(m.name for m in MODES), metavar="MODES",
                           help="comma-separated generation modes (default: %(default)s): recompute, the original "
                                "study's (one sequence from its prompt, the whole sequence run at every step; the "
                                "rows with a prefill op); kv-cache (the batches and prompts of harness/study.py, "
                                "prefill once, then one decode step per token against a static cache; the rows "
                                "with both ops)")
            add_weights_arguments(p)
        p.set_defaults(func=func, on_stop=ROWS_KEPT)

    p = sub.add_parser("precompile", help="compile ahead what the gate, the kernel benchmark and generation will "
                                          "compile (flex-attention), into the on-disk caches (GPU); run_all.sh runs "
                                          "it in the background, one process per dtype",
                       description="Compile ahead, for the backends that compile at each new shape "
                                   "(flex-attention): the gate's calls, the kernel benchmark's shapes and a "
                                   "generation's lengths. Measures nothing and writes no results; the stages "
                                   "that run later find the compiled code in Inductor's and Triton's on-disk "
                                   "caches. run_all.sh starts one such process per dtype while the build and "
                                   "the gate run, and waits for them before the kernel benchmark.")
    p.add_argument("--backends", type=arguments.text, default="all", help=BACKENDS_HELP)
    p.add_argument("--dtypes", type=arguments.text, default="all", help=DTYPES_HELP)
    p.add_argument("--quick", action="store_true", help="the quick sweep's shapes and token counts")
    p.add_argument("--grid-only", action="store_true",
                   help="what `bench-kernels --grid-only` compiles: the grid's shapes and the gate, no generation")
    p.add_argument("--fresh", action="store_true",
                   help="compile for every stage, also where this setup's rows are stored (by default what the "
                        "stages will skip when they resume is left out)")
    results_dir(p)
    add_weights_arguments(p)
    p.set_defaults(func=cmd_precompile, on_stop=NOTHING_MEASURED.format(what="the compilation"))

    p = sub.add_parser("plot", help="draw <plots-dir>/<gpu>/ from <results-dir>/<gpu>/*.csv (no GPU needed)")
    results_dir(p)
    plots_dir(p)
    p.set_defaults(func=cmd_plot, on_stop=NOTHING_MEASURED.format(what="the figures"))

    p = sub.add_parser("report", help="regenerate the README tables and each GPU's page results/<gpu>/README.md "
                                      "(from the committed results/ only) or write <results-dir>/report.md")
    results_dir(p)
    plots_dir(p)
    p.add_argument("--output", type=arguments.path, default=None, metavar="FILE",
                   help="write the tables to FILE instead of updating README.md, the GPUs' pages and "
                        "versions/*/README.md")
    p.set_defaults(func=cmd_report, on_stop=NOTHING_MEASURED.format(what="the tables"))

    p = sub.add_parser("try", help="development: kernel variants (a version's kernel file with patches "
                                   "applied) checked against float64 and timed beside registry backends; nothing "
                                   "goes to results/ (GPU; --compile-only without one)",
                       description="Development: each variant NAME=VERSION+PATCH[+PATCH...] is VERSION's "
                                   "kernel file with the patches (as `git diff` writes them) applied in order, "
                                   "built as its own extension (op torch.ops.flash_NAME.causal_attention). "
                                   "Prints nvcc's resources, checks every variant and backend against float64, "
                                   "then times them at the benchmark shapes with the dtype's kernel reference "
                                   "(sdpa-efficient in float32, sdpa-cudnn in bfloat16/float16) in the same "
                                   "rounds. Nothing goes to results/.")
    p.add_argument("variants", nargs="*", metavar="NAME=VERSION+PATCH",
                   help="e.g. v16p=v16+experiments/v16/v16_1_k_float2.patch+experiments/v16/v16_2_pipeline.patch; "
                        "none, with --against: those backends alone (a new version beside its parent)")
    p.add_argument("--against", type=arguments.text, default=None,
                   help="backends to compare with, comma-separated (default: the variants' versions; "
                        f"{registry.KERNEL_REFERENCE} is always timed)")
    p.add_argument("--shapes", choices=tuple(TRY_SHAPES), default="all",
                   help="; ".join(f"{name}: {what}" for name, (_, what) in TRY_SHAPES.items()))
    p.add_argument("--rounds", type=int, default=2,
                   help=f"timing rounds, the order of the backends alternating (default: 2, at most {MAX_ROUNDS})")
    p.add_argument("--log", type=arguments.path, default=None, metavar="FILE",
                   help="also append everything printed to FILE")
    p.add_argument("--dtype", choices=precision.EVERY, default=precision.FLOAT32,
                   help="the dtype the variants are checked and timed in (default: float32); in bfloat16 or "
                        "float16 the bound is the study's (1.25x the better vendor kernel's error on the same "
                        "inputs) and the reference of the ratios sdpa-cudnn; every variant's version and every "
                        "--against backend must take it")
    p.add_argument("--compile-only", action="store_true",
                   help="only nvcc's registers, shared memory, spills and serialised wgmma (no GPU needed)")
    p.add_argument("--arch", default="sm_90", help="with --compile-only: the architecture (default: sm_90)")
    p.set_defaults(func=cmd_try)

    p = sub.add_parser("call", help="call one backend's op a few times at one shape, nothing else: a target "
                                    "for ncu or compute-sanitizer (GPU)")
    p.add_argument("backend", metavar="BACKEND", help="a registry backend, or a variant NAME=VERSION+PATCH[+PATCH...]")
    p.add_argument("--B", type=int, default=8, help="batch (default: 8)")
    p.add_argument("--T", type=int, default=4096, help="sequence length (default: 4096); 12 heads of 64")
    p.add_argument("--repeat", type=int, default=3,
                   help=f"calls (default: 3, at most {MAX_CALLS:,}; the first loads the module)")
    p.add_argument("--dtype", type=arguments.text, default=None,
                   help="float32, bfloat16 or float16 (default: the backend's first dtype)")
    p.set_defaults(func=cmd_call)

    p = sub.add_parser("record-stages", help="(run_all.sh) store one run's stage wall times in "
                                             "<results-dir>/<gpu>/stages.csv (GPU)")
    p.add_argument("stages", nargs="+", metavar="NAME:SECONDS:EXIT_STATUS", help="e.g. 'kernel benchmark:62:0'")
    p.add_argument("--run", type=arguments.text, required=True,
                   help="when the run started (UTC, ISO 8601): names the run")
    p.add_argument("--mode", choices=("full", "quick"), required=True)
    p.add_argument("--backends", type=arguments.text, required=True, help="the run's --backends selection")
    p.add_argument("--dtypes", type=arguments.text, default="float32",
                   help="the run's --dtypes selection (default: float32, as the sweeps before dtypes were)")
    results_dir(p)
    p.set_defaults(func=cmd_record_stages)

    p = sub.add_parser("sanitize-workload", help="small workload for compute-sanitizer (tools/sanitize.sh; GPU)")
    p.add_argument("--backends", type=arguments.text, default="all", help=BACKENDS_HELP)
    p.add_argument("--dtypes", type=arguments.text, default="all",
                   help="comma-separated dtypes among float32, bfloat16, float16, or 'all' (default): each "
                        "version runs in those of them it takes (a version's two 16-bit types are one template, "
                        "so one of them covers its code under racecheck in half the time)")
    p.add_argument("--batch", type=int, default=None, metavar="B",
                   help="only the workload's shapes of batch size B, e.g. 1: the small calls, which the "
                        "narrow kernels take (versions 21-29, h14-h18); racecheck of the whole workload can "
                        "outlast a 10-minute device call. A decode version runs all the decode gate's cases")
    p.set_defaults(func=cmd_sanitize_workload)
    return parser


def stop_message(stop: KeyboardInterrupt, args: argparse.Namespace, argv: list[str]) -> str:
    """One line: what stopped the command, what it leaves and the command that resumes it."""
    on_stop = getattr(args, "on_stop", None)
    if on_stop is None:
        return f"python -m harness: {describe(stop)}"
    return f"python -m harness: {describe(stop)}; {on_stop}: python -m harness {shlex.join(argv)}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    with stop_on_signals():  # SIGTERM and SIGHUP end it as Ctrl-C does
        try:
            if getattr(args, "results_dir", None) is not None:
                not_a_gpu_folder(args.results_dir)
            return args.func(args)
        except (registry.UnknownBackendError, CommandError, ResultsFileError) as err:
            print(f"python -m harness: error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as stop:
            print(f"\n{stop_message(stop, args, argv)}", file=sys.stderr)
            return exit_status(stop)
