"""Ending a run on SIGTERM and SIGHUP the way Ctrl-C ends it, and quietly when its output
is no longer read.

A scheduler's time limit, `timeout` and `kill` send SIGTERM, a dropped SSH session SIGHUP;
by default either ends Python at once, without running `finally` blocks or saying anything.
Inside `stop_on_signals()` they raise `Stopped`, a KeyboardInterrupt, where they arrive, so
every path that handles Ctrl-C (rows already written are kept, locks released, one line on
stderr) handles them too. A stop that lands in a finalizer (a weakref callback, a __del__),
where Python would print it and carry on, is raised again once the finalizer has returned.
Nothing is installed at import; the previous handlers come back when the block ends.

A reader that stops early (`python -m harness list | head -1`) closes the pipe stdout writes
to; Python ignores SIGPIPE, so the next write raises BrokenPipeError. Inside
`quiet_when_stdout_closes()` that ends the run silently, as SIGPIPE ends other programs.
"""
from __future__ import annotations

import _thread
import contextlib
import os
import signal
import sys
import threading
import time
import typing
from types import FrameType
from typing import Iterator

# The same stop often arrives twice: `timeout` and a terminal signal the whole process group,
# and run_all.sh forwards what it receives to the stage it runs. A repeat this soon after the
# first is that same stop, not a second request, and must not interrupt the cleanup.
REPEAT_WINDOW_SECONDS = 2.0
_CAUGHT = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: handled wherever Ctrl-C (KeyboardInterrupt) is."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_status(stop: BaseException) -> int:
    """The conventional status of a run ended by `stop`: 128 + the signal's number (130 for
    Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""
    return 128 + getattr(stop, "signum", signal.SIGINT)


def describe(stop: BaseException) -> str:
    """'interrupted' for Ctrl-C, 'stopped by SIGTERM' for a Stopped."""
    signum = getattr(stop, "signum", None)
    return "interrupted" if signum is None else f"stopped by {signal.Signals(signum).name}"


# A stop raised inside a weakref callback or a __del__ (matplotlib's caches drop figures that
# way) is an "unraisable" exception: Python prints it as a traceback and carries on. It is
# delivered again this long after, once the finalizer has returned.
REDELIVERY_SECONDS = 0.01


class _Handler:
    """Raises KeyboardInterrupt (SIGINT) or Stopped (SIGTERM, SIGHUP) once per stop."""

    def __init__(self) -> None:
        self.first: float | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if self.first is not None and now - self.first < REPEAT_WINDOW_SECONDS:
            return  # the same stop delivered twice
        self.first = now
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Stopped(signum)

    def unraisable_hook(self, previous: typing.Callable[[typing.Any], object]) -> typing.Callable[[typing.Any], None]:
        """A sys.unraisablehook: a stop that a finalizer swallowed is raised again in the main
        thread (not the finalizer) once it has returned, without a traceback; anything else goes
        to `previous`."""
        def hook(unraisable: typing.Any) -> None:
            stop = unraisable.exc_value
            if not isinstance(stop, KeyboardInterrupt):
                previous(unraisable)
                return
            self.first = None  # not a repeat: the first delivery was lost
            timer = threading.Timer(REDELIVERY_SECONDS, _thread.interrupt_main,
                                    (getattr(stop, "signum", signal.SIGINT),))
            timer.daemon = True
            timer.start()
        return hook


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt or Stopped.

    A signal that is ignored (`nohup` ignores SIGHUP; a background job of a script ignores
    SIGINT) stays ignored. Nested blocks share the outer block's handler. Outside the main
    thread (where Python cannot install handlers) the block changes nothing.
    """
    installed = any(isinstance(signal.getsignal(signum), _Handler) for signum in _CAUGHT)
    if installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = _Handler()
    previous = {}
    for signum in _CAUGHT:
        current = signal.getsignal(signum)
        if current is not signal.SIG_IGN:
            previous[signum] = current
            signal.signal(signum, handler)
    previous_hook = sys.unraisablehook
    sys.unraisablehook = handler.unraisable_hook(previous_hook)
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        for signum, current in previous.items():
            signal.signal(signum, current if current is not None else signal.SIG_DFL)


@contextlib.contextmanager
def quiet_when_stdout_closes() -> Iterator[None]:
    """For a command-line entry point: a BrokenPipeError on stdout, within the block or when
    it flushes what is left at the end, exits with status 141 (128 + SIGPIPE, what a shell
    reports for a writer SIGPIPE ended) and no traceback. stdout is pointed at os.devnull
    first, so that the interpreter's own flush at exit does not fail again."""
    try:
        try:
            yield
        finally:  # what is still buffered is written here, not at exit (also after sys.exit)
            sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        sys.exit(128 + signal.SIGPIPE)


def _exit_quietly(signum: int, frame: FrameType | None) -> None:
    for caught in _CAUGHT:  # a second signal ends the worker at once, as by default
        signal.signal(caught, signal.SIG_DFL)
    raise SystemExit(128 + signum)


def exit_quietly_on_signals() -> None:
    """For a worker process (its initializer): the first SIGINT, SIGTERM or SIGHUP raises
    SystemExit, so the work under way unwinds (torch's build lock and ours released, ninja
    stopped) and an idle worker ends without a traceback. Its parent says what happened."""
    for signum in _CAUGHT:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _exit_quietly)


def end_with_parent() -> None:
    """For a worker process: SIGTERM (so exit_quietly_on_signals ends it) when the process that
    started it ends, however it ends; otherwise an idle worker of a pool whose parent was
    killed waits for work forever. Linux only (prctl); elsewhere nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import multiprocessing

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:  # it ended before the request
        os.kill(os.getpid(), signal.SIGTERM)


def end_worker(stop: SystemExit) -> None:
    """End this worker process now, with `stop`'s status, once what it did is cleaned up
    (the pool would otherwise hand it the next job)."""
    os._exit(stop.code if isinstance(stop.code, int) else 1)
