"""Building every CUDA version in parallel, one process per version."""
from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass

from harness.registry import Backend, get


@dataclass(frozen=True)
class BuildResult:
    name: str
    ok: bool
    seconds: float
    error: str = ""  # the compiler's output when the build failed


def _build_one(name: str) -> BuildResult:
    """Runs in a worker process: build (or find up to date) and load the version."""
    from harness.extension import build_and_load, set_build_environment

    set_build_environment()
    start = time.perf_counter()
    try:
        build_and_load(get(name))
    except Exception as err:  # a compiler error arrives as RuntimeError with its output
        return BuildResult(name, False, time.perf_counter() - start, str(err))
    return BuildResult(name, True, time.perf_counter() - start)


def build_all(backends: list[Backend], *, jobs: int | None = None) -> list[BuildResult]:
    """Build the given versions, printing one line per version as it finishes.

    A version that fails is reported with its compiler error; the others still build.
    """
    versions = [b for b in backends if b.is_version]
    if not versions:
        return []
    jobs = jobs or min(len(versions), max(1, (os.cpu_count() or 2) // 2))
    results: list[BuildResult] = []
    print(f"building {len(versions)} versions with {jobs} parallel jobs", flush=True)
    # Each worker runs ninja itself; cap its parallelism so the machine is not oversubscribed.
    os.environ.setdefault("MAX_JOBS", "2")
    # spawn, not fork: a forked child of a process that has initialised CUDA may crash.
    context = multiprocessing.get_context("spawn")
    with futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        pending = {pool.submit(_build_one, b.name): b.name for b in versions}
        for done, future in enumerate(futures.as_completed(pending), start=1):
            result = future.result()
            results.append(result)
            status = "ok" if result.ok else "FAILED"
            print(f"[{done}/{len(versions)}] {result.name}: {status} ({result.seconds:.1f} s)", flush=True)
            if not result.ok:
                print(result.error, file=sys.stderr, flush=True)
    return sorted(results, key=lambda r: r.name)
