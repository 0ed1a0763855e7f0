"""One builder at a time per build folder, and never a wait on a lock whose owner is gone.

torch's extension loader (cpp_extension.load) guards a build folder with a file `lock`,
created with O_EXCL and removed when the build and load are done; nothing records who holds
it. A process killed while building or loading (SIGKILL, or SIGTERM where nothing catches
it) leaves the file behind, and the next loader polls it forever without a word. So every
loader of ours first takes `owner.lock` in the same folder with flock(2), which the kernel
releases when its holder ends, however it ends. While we hold it no other loader of ours is
inside torch's loader for that folder, so a `lock` file there is stale: it is removed, with
a notice. A live holder is waited for; after a few seconds a line names it.
"""
from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Iterator

OWNER_FILE = "owner.lock"  # ours: flock(2)-ed, holds the owner's PID and command line
TORCH_LOCK_FILE = "lock"  # torch.utils.file_baton.FileBaton's, in cpp_extension.load's build folder
NOTICE_AFTER_SECONDS = 5.0
POLL_SECONDS = 0.2
_COMMAND_CHARS = 200


@contextlib.contextmanager
def build_folder_lock(folder: Path, *, notice_after: float = NOTICE_AFTER_SECONDS) -> Iterator[None]:
    """Hold `folder`'s owner lock while the block runs (waiting for a live holder) and remove
    a stale torch lock file from it first. The lock ends with the block, or with the process."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / OWNER_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        _acquire(fd, path, notice_after)
        try:
            _record_owner(fd)
            _remove_stale(folder / TORCH_LOCK_FILE)
            yield
        finally:
            os.ftruncate(fd, 0)  # no owner named while nobody holds it
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fd: int, path: Path, notice_after: float) -> None:
    """flock(fd), polling so that Ctrl-C stops the wait and the holder is named once."""
    start = time.monotonic()
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        if not said and time.monotonic() - start >= notice_after:
            print(f"{_shown(path)}: waiting for {owner(path)}, which holds it while it builds or loads "
                  f"{path.parent.name} (Ctrl-C stops waiting)", file=sys.stderr, flush=True)
            said = True
        time.sleep(POLL_SECONDS)


def owner(path: Path) -> str:
    """'PID 1234 (python3 -m harness build)', as the holder of `path` wrote it."""
    try:
        pid, _, command = path.read_text(errors="replace").partition("\n")
    except OSError:
        pid, command = "", ""
    if not pid.strip():
        return "another process"
    command = command.partition("\n")[0].strip()
    return f"PID {pid.strip()} ({command or 'command unknown'})"


def _record_owner(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, f"{os.getpid()}\n{_command()}\n".encode(errors="replace"))


def _command() -> str:
    """This process's command line; for a worker process, its parent's and the parent's PID."""
    parent = multiprocessing.parent_process()
    if parent is None:
        command = shlex.join(sys.orig_argv)
    else:  # a spawned worker's own command line is multiprocessing's; sys.argv is its parent's
        command = f"{shlex.join(sys.argv)}, a worker of PID {parent.pid}"
    command = " ".join(command.split())  # one line, whatever `python -c` was given
    return command if len(command) <= _COMMAND_CHARS else command[:_COMMAND_CHARS - 3] + "..."


def _remove_stale(lock: Path) -> None:
    try:
        lock.unlink()
    except FileNotFoundError:
        return
    print(f"removed {_shown(lock)}: a stale lock file left by a build or load that was killed",
          file=sys.stderr, flush=True)


def _shown(path: Path) -> str:
    """`path` relative to the current folder when it lies inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
