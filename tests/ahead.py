"""Work started ahead: what a test waits for that runs to completion on its own (a command that
refuses or a compiler run, seconds of a child process importing torch or of nvcc), begun in a
background thread as the session starts, one job at a time, while the other tests run in the
main thread. On a machine of few cores the main thread mostly keeps one core busy (plots,
tables); the job's child process takes another. The background thread runs at the lowest
priority (nice 19; on Linux a thread's own, inherited by the processes it starts), so that a
job takes only the time the tests leave: a test that computes with torch's threads, or runs
processes of its own, is not slowed down by one.

A test names its jobs with @takes(job, ...) (the mark `ahead`) and takes each one's result with
the `ahead` fixture: ahead(job) waits for a job under way, runs one not yet begun there and then,
and raises what the job raised, so the test fails as it would have if it had done the work
itself. tests/conftest.py starts the jobs of the selected tests in their order, each as its test
is collected (or, where -k or the like selects afterwards, as the first test begins), and runs
those tests last, so that the jobs have the whole session to run in. While it waits for a job under
way, ahead(job) runs the jobs queued behind it, in their order, in its own thread: at the end
of a session the main thread, its other tests done, would otherwise leave a core idle while the
lane works through the last jobs one at a time.

A job is a module-level function of one argument, the Ahead: ahead.tmp(name) gives it a new
folder, ahead(other_job) another job's result. It must not print (the main thread's test
captures stdout) and must not change what other tests see (patch modules, chdir).
"""
from __future__ import annotations

import contextlib
import os
import threading
from concurrent import futures
from pathlib import Path
from typing import Any, Callable, Iterable

import pytest

Job = Callable[["Ahead"], Any]


class Ahead:
    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        # The session's base folder is made now, in the main thread, before a job can ask for a
        # folder. Made lazily by the first mktemp, a job's thread and a test's fixture each made
        # one at once (pytest-N and N+1), and pytest refused the fixture's folder as "not a
        # normalized and relative path" (CI, stop 48).
        tmp_path_factory.getbasetemp()
        self._tmp_path_factory = tmp_path_factory
        self._pool = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ahead", initializer=_lowest_priority)
        self._futures: dict[Job, futures.Future] = {}
        self._lock = threading.Lock()

    def start(self, jobs: Iterable[Job]) -> None:
        """Queue each job not queued yet, in order."""
        with self._lock:
            for job in jobs:
                if job not in self._futures:
                    self._futures[job] = self._pool.submit(job, self)

    def __call__(self, job: Job) -> Any:
        """The job's result (or its exception, raised), waiting for it if it is under way and
        running the jobs queued behind it meanwhile."""
        with self._lock:
            future = self._futures.get(job)
            here = future is None or future.cancel()  # not begun: run it in this thread
            if here:
                future = self._take(job)
        if here:
            self._run(job, future)
        while not future.done():
            with self._lock:  # the next job not begun, taken from the lane
                queued = next((other for other, waiting in self._futures.items() if waiting.cancel()), None)
                taken = self._take(queued) if queued is not None else None
            if taken is None:
                break
            self._run(queued, taken)
        return future.result()

    def _take(self, job: Job) -> futures.Future:
        """A future for `job` run in the calling thread, in place of the lane's (under the lock)."""
        future = self._futures[job] = futures.Future()
        future.set_running_or_notify_cancel()
        return future

    def _run(self, job: Job, future: futures.Future) -> None:
        try:
            future.set_result(job(self))
        except BaseException as err:  # noqa: BLE001 - handed to whoever takes the result
            future.set_exception(err)
            if isinstance(err, KeyboardInterrupt):  # Ctrl-C in a job run for another: it stops the session
                raise

    def tmp(self, name: str) -> Path:
        return self._tmp_path_factory.mktemp(name)

    def close(self) -> None:
        """Drop the jobs not begun and wait for the one under way."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def _lowest_priority() -> None:
    with contextlib.suppress(AttributeError, OSError):  # no os.nice (Windows), or not allowed
        os.nice(19 - os.nice(0))


def takes(*jobs: Job) -> pytest.MarkDecorator:
    """The mark of a test that takes these jobs' results (pytest.mark.ahead(job) would decorate
    the job with the mark instead: a mark called with one function marks that function)."""
    return pytest.mark.ahead.with_args(*jobs)


def jobs_of(items: Iterable[pytest.Item]) -> list[Job]:
    """The jobs the items name in their `ahead` marks, in the items' order; none of an item that
    a mark skips (skip, or skipif with a condition that holds)."""
    return [job for item in items if not _skipped(item) for mark in item.iter_markers("ahead") for job in mark.args]


def _skipped(item: pytest.Item) -> bool:
    return any(mark.name == "skip" or (mark.name == "skipif" and any(c is True for c in mark.args))
               for mark in item.iter_markers())
