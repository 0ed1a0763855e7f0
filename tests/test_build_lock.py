"""A build or load killed mid-way leaves torch's `lock` file in its build folder; the next
loader must remove it (with a notice) instead of waiting forever, and must wait, saying
for whom, while a live process builds the same version (backends/build_lock.py). No GPU:
torch's own loader runs with the compiler and the library import stubbed out."""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from backends import build_lock, extension, registry
from backends.build_lock import OWNER_FILE, TORCH_LOCK_FILE, build_folder_lock
from backends.registry import PROJECT_ROOT

# torch's cpp_extension.load for real (its FileBaton `lock` included), but the build step
# only says it is building and sleeps for argv[2] seconds, and nothing is imported. The
# version's folder lies under argv[1] instead of build/. With a third argument the loader
# says "ready" once its imports are done and loads when a line comes on stdin.
LOADER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from torch.utils import cpp_extension
    from backends import extension, registry

    def build(**kwargs):
        print("building", flush=True)
        time.sleep(float(sys.argv[2]))

    cpp_extension._write_ninja_file_and_build_library = build
    cpp_extension._import_module_from_library = lambda *args, **kwargs: None
    extension.BUILD_ROOT = Path(sys.argv[1])
    if len(sys.argv) > 3:
        print("ready", flush=True)
        sys.stdin.readline()
    extension.build_and_load(registry.get("v01"), [extension.Arch((9, 0))])
    print("loaded", flush=True)
""")


def start_loader(build_root: Path, build_seconds: float, *, wait: bool = False) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", LOADER, str(build_root), str(build_seconds), *(["wait"] * wait)],
                            cwd=PROJECT_ROOT, stdin=subprocess.PIPE if wait else None, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_load_killed_mid_build_does_not_hang_the_next(tmp_path):
    """SIGKILL while torch's loader holds its lock leaves the file; the next load removes it
    (one line naming it) and finishes. Without the fix it waits forever: the timeout fails it.
    The next loader is started beside the first (its imports, torch's, take seconds) and loads
    only once the first is dead."""
    killed = start_loader(tmp_path, 60)
    proc = start_loader(tmp_path, 0, wait=True)
    try:
        assert killed.stdout.readline().strip() == "building", killed.stderr.read()
        killed.kill()
        killed.communicate()
        stale = tmp_path / "v01" / TORCH_LOCK_FILE
        assert stale.exists(), "torch's loader should have left its lock behind"
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        try:
            out, err = proc.communicate("load\n", timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the next load hangs on the stale {stale}")
    finally:
        for loader in (killed, proc):
            if loader.poll() is None:
                loader.kill()
                loader.communicate()
    assert proc.returncode == 0, err
    assert out.split() == ["building", "loaded"]
    notices = [line for line in err.splitlines() if line.strip()]
    assert len(notices) == 1 and "removed" in notices[0] and str(stale) in notices[0], err
    assert not stale.exists()


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from backends.build_lock import build_folder_lock

    with build_folder_lock(Path(sys.argv[1])):
        print("holding", flush=True)
        time.sleep(float(sys.argv[2]))
""")


def test_a_live_owner_is_waited_for_and_named(tmp_path, capsys):
    """While another process holds the folder (building), a loader waits, names the lock file
    and its owner after `notice_after`, leaves torch's lock alone, and goes on once it ends."""
    folder = tmp_path / "v01"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder), "1.5"], cwd=PROJECT_ROOT,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "holding"
    (folder / TORCH_LOCK_FILE).touch()  # the holder is inside torch's loader
    acquired = threading.Event()

    def wait_for_it() -> None:
        with build_folder_lock(folder, notice_after=0.3):
            acquired.set()

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    time.sleep(0.8)
    assert not acquired.is_set(), "a lock held by a live process must be waited for"
    assert (folder / TORCH_LOCK_FILE).exists(), "a live owner's torch lock is not stale"
    waiter.join(timeout=30)
    holder.wait(timeout=30)
    assert acquired.is_set()
    err = capsys.readouterr().err
    waiting = [line for line in err.splitlines() if "waiting" in line]
    assert len(waiting) == 1, err
    assert str(folder / OWNER_FILE) in waiting[0] and f"PID {holder.pid} (" in waiting[0] and "v01" in waiting[0]
    assert not (folder / TORCH_LOCK_FILE).exists(), "once the owner is gone its torch lock is stale"


def test_owner_names_the_holder(tmp_path):
    with build_folder_lock(tmp_path):
        assert build_lock.owner(tmp_path / OWNER_FILE).startswith(f"PID {os.getpid()} (")
    assert build_lock.owner(tmp_path / OWNER_FILE) == "another process"  # nobody holds it now


def test_versions_loaded_side_by_side_leave_nothing_held(tmp_path, monkeypatch):
    """Loading versions one after another in one process: each lock is released and its file
    closed when its load ends, and no signal handler changes."""
    from torch.utils import cpp_extension
    from torch.utils.file_baton import FileBaton

    def load(*, build_directory: str, **kwargs) -> None:  # torch's baton, no compiler
        baton = FileBaton(os.path.join(build_directory, TORCH_LOCK_FILE))
        if baton.try_acquire():
            baton.release()
        else:
            baton.wait()

    monkeypatch.setattr(cpp_extension, "load", load)
    monkeypatch.setattr(extension, "BUILD_ROOT", tmp_path)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    names = ["v01", "v02", "v16"]
    for name in [*names, *names]:
        extension.build_and_load(registry.get(name), [extension.Arch((9, 0))])
    for name in names:
        path = tmp_path / name / OWNER_FILE
        assert path.read_text() == "", "no owner named once the load is done"
        with path.open() as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if anything still holds it
    open_files = {os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")} \
        if os.path.isdir("/proc/self/fd") else set()
    assert not any(p.endswith(OWNER_FILE) for p in open_files)
    assert handlers == {s: signal.getsignal(s) for s in handlers}
