"""Building every CUDA version in parallel, one process per version."""
from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass
from typing import Sequence

from backends.extension import ARCH_LIST_VARIABLE, Arch, archs_for, check_build_setup, target_archs
from backends.registry import Backend, CudaVersion, capability_text


@dataclass(frozen=True)
class BuildResult:
    name: str
    ok: bool
    seconds: float
    error: str = ""  # the compiler's output when the build failed
    skipped: str = ""  # why the version was not built (needs a newer GPU than every target)


def _build_one(version: CudaVersion, archs: list[Arch]) -> BuildResult:
    """Runs in a worker process: build (or find up to date) and load the version."""
    from backends.extension import build_and_load

    start = time.perf_counter()
    try:
        build_and_load(version, archs)
    except Exception as err:  # noqa: BLE001 -- a compiler error arrives as RuntimeError with its output
        return BuildResult(version.name, False, time.perf_counter() - start, str(err))
    return BuildResult(version.name, True, time.perf_counter() - start)


def build_all(backends: Sequence[Backend], *, jobs: int | None = None) -> list[BuildResult]:
    """Build the given versions for the visible GPU (or TORCH_CUDA_ARCH_LIST), printing a
    line per version as it finishes. A version that fails is reported with its compiler
    error and the others still build; one that needs a newer GPU than every target is
    skipped with the reason. Raises BuildSetupError when nothing can be built here."""
    versions = [b for b in backends if isinstance(b, CudaVersion)]
    if not versions:
        return []
    check_build_setup()
    archs = target_archs(os.environ.get(ARCH_LIST_VARIABLE))
    results: list[BuildResult] = []
    work = {}
    for version in versions:
        kept, skipped = archs_for(version, archs)
        if kept:
            work[version] = kept
        else:
            results.append(BuildResult(version.name, True, 0.0, skipped=skipped or ""))
            print(f"{version.name}: skipped ({skipped})", flush=True)
    if not work:
        return sorted(results, key=lambda r: r.name)
    # A version per core. Each compiles two files (kernel and glue) at once, so the cores are
    # oversubscribed about twice while they all run: on 16 cores, 17 versions built in ~40 s
    # with half as many jobs (three rounds of ~13 s).
    jobs = jobs or min(len(work), max(1, os.cpu_count() or 2))
    targets = ", ".join(sorted({capability_text(a.capability) for a in archs}))
    print(f"building {len(work)} versions for compute capability {targets} with {jobs} parallel jobs", flush=True)
    # spawn, not fork: a forked child of a process that has initialised CUDA may crash.
    context = multiprocessing.get_context("spawn")
    with futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        pending = {pool.submit(_build_one, version, kept): version.name for version, kept in work.items()}
        for count, future in enumerate(futures.as_completed(pending), start=1):
            result = future.result()
            results.append(result)
            status = "ok" if result.ok else "FAILED"
            print(f"[{count}/{len(work)}] {result.name}: {status} ({result.seconds:.1f} s)", flush=True)
            if not result.ok:
                print(result.error, file=sys.stderr, flush=True)
    return sorted(results, key=lambda r: r.name)
