"""Building every CUDA version in parallel, one process per version."""
from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import resource_tracker
from typing import Sequence

from backends.extension import ARCH_LIST_VARIABLE, Arch, archs_for, check_build_setup, target_archs
from backends.interrupts import end_with_parent, end_worker, exit_quietly_on_signals
from backends.registry import Backend, KernelVersion, capability_text

WORKER_GRACE_SECONDS = 1.0


@dataclass(frozen=True)
class BuildResult:
    name: str
    ok: bool
    seconds: float
    error: str = ""  # the compiler's output when the build failed
    skipped: str = ""  # why the version was not built (needs a newer GPU than every target)


def _build_one(version: KernelVersion, archs: list[Arch]) -> BuildResult:
    """Runs in a worker process: build (or find up to date) and load the version."""
    from backends.extension import build_and_load

    start = time.perf_counter()
    try:
        build_and_load(version, archs)
    except Exception as err:  # noqa: BLE001 -- a compiler error arrives as RuntimeError with its output
        return BuildResult(version.name, False, time.perf_counter() - start, str(err))
    except SystemExit as stop:  # a signal (exit_quietly_on_signals): the build has unwound, locks released
        end_worker(stop)
    return BuildResult(version.name, True, time.perf_counter() - start)


def _init_worker() -> None:
    """A worker ends cleanly on a signal, and with the process that started it."""
    exit_quietly_on_signals()
    end_with_parent()


def _stop_workers(pool: futures.ProcessPoolExecutor, workers: set[multiprocessing.process.BaseProcess]) -> None:
    """After Ctrl-C, SIGTERM or SIGHUP in this process: start no other build, and stop those
    under way (a worker unwinds its build and ends), so that nothing outlives the command.
    Workers that had the same signal (sent to the whole process group) get a moment to end
    on their own first."""
    pool.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + WORKER_GRACE_SECONDS
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    for worker in workers:
        if worker.is_alive():
            worker.terminate()


def build_all(backends: Sequence[Backend], *, jobs: int | None = None) -> list[BuildResult]:
    """Build the given versions for the visible GPU (or TORCH_CUDA_ARCH_LIST), printing a
    line per version as it finishes. A version that fails is reported with its compiler
    error and the others still build; one that needs a newer GPU than every target is
    skipped with the reason. Raises BuildSetupError when nothing can be built here."""
    versions = [b for b in backends if isinstance(b, KernelVersion)]
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
    _start_resource_tracker()
    others = set(multiprocessing.active_children())
    with futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_init_worker) as pool:
        pending = {pool.submit(_build_one, version, kept): version.name for version, kept in work.items()}
        try:
            for count, future in enumerate(futures.as_completed(pending), start=1):
                result = _result(future, pending[future])
                results.append(result)
                status = "ok" if result.ok else "FAILED"
                print(f"[{count}/{len(work)}] {result.name}: {status} ({result.seconds:.1f} s)", flush=True)
                if not result.ok:
                    print(result.error, file=sys.stderr, flush=True)
        except KeyboardInterrupt:
            _stop_workers(pool, set(multiprocessing.active_children()) - others)
            raise
    return sorted(results, key=lambda r: r.name)


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with SIGHUP ignored (inherited across exec).
    It ignores SIGINT and SIGTERM itself but not SIGHUP: a hangup sent to the process group
    would end it, and the pool's shutdown would print its tracebacks."""
    if threading.current_thread() is not threading.main_thread():
        resource_tracker.ensure_running()
        return
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        resource_tracker.ensure_running()
    finally:
        signal.signal(signal.SIGHUP, previous if previous is not None else signal.SIG_DFL)


def _result(future: futures.Future, name: str) -> BuildResult:
    """The worker's result; a worker that ended abruptly (killed, out of memory) is a failure."""
    try:
        return future.result()
    except BrokenProcessPool:
        return BuildResult(name, False, 0.0, f"{name}: not built: a build process ended abruptly (killed by a "
                                             "signal, or out of memory?); run the same command again")
