"""SIGTERM and SIGHUP end a command the way Ctrl-C does (backends/interrupts.py): what is
done is kept, one line says what stopped it and how to resume, the status is 128 + the
signal, and nothing prints a traceback, also while torch is still importing. A reader that
closes stdout early ends the command silently, with SIGPIPE's status."""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import weakref
from pathlib import Path

import pytest

from backends.interrupts import REPEAT_WINDOW_SECONDS, Stopped, exit_status, stop_on_signals
from backends.registry import PROJECT_ROOT
from gpt2 import cli as gpt2_cli
from harness import cli as harness_cli

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
FIXTURES = Path(__file__).parent / "fixtures"


def handlers() -> dict:
    return {s: signal.getsignal(s) for s in SIGNALS}


def _unhandled(signum: int, frame) -> None:
    raise AssertionError(f"{signal.Signals(signum).name} reached the test: nothing handled it")


@pytest.fixture(autouse=True)
def guard():
    """A SIGTERM or SIGHUP that the code under test fails to handle fails the test instead of
    ending pytest."""
    previous = {s: signal.signal(s, _unhandled) for s in (signal.SIGTERM, signal.SIGHUP)}
    yield
    for s, handler in previous.items():
        signal.signal(s, handler)


@pytest.mark.parametrize("signum,raised", [(signal.SIGTERM, Stopped), (signal.SIGHUP, Stopped),
                                           (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_raises_where_it_arrives_and_the_handlers_come_back(signum, raised):
    before = handlers()
    with pytest.raises(raised) as caught, stop_on_signals():
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the handler raises here, at once
    assert isinstance(caught.value, KeyboardInterrupt), "every Ctrl-C path handles it"
    assert exit_status(caught.value) == 128 + signum
    assert handlers() == before


def test_the_same_stop_delivered_twice_interrupts_once():
    """The process group's signal and run_all.sh's forwarded copy are one stop: the second must
    not interrupt the cleanup the first started."""
    with stop_on_signals():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except Stopped:
            os.kill(os.getpid(), signal.SIGTERM)  # within REPEAT_WINDOW_SECONDS: ignored
            time.sleep(0.05)
    assert REPEAT_WINDOW_SECONDS >= 1


@pytest.mark.parametrize("signum,raised", [(signal.SIGTERM, Stopped), (signal.SIGINT, KeyboardInterrupt)])
def test_a_stop_that_arrives_in_a_finalizer_is_not_lost(signum, raised, capsys):
    """Python ignores an exception raised in a weakref callback or a __del__ ('Exception ignored
    in ...', a traceback): a SIGTERM or Ctrl-C that arrived while matplotlib's caches dropped a
    figure was printed as a traceback and the plot went on to its end, exit status 0."""
    class Dropped:
        pass

    with pytest.raises(raised), stop_on_signals():
        dropped = Dropped()
        callback = weakref.ref(dropped, lambda ref: signal.raise_signal(signum))  # noqa: F841 (kept alive)
        del dropped  # the signal arrives inside the callback
        for _ in range(200):
            time.sleep(0.01)
    assert "Exception ignored" not in capsys.readouterr().err


def test_an_ignored_signal_stays_ignored():
    """`nohup` ignores SIGHUP: a hangup must not stop the run then."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stop_on_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_harness_sigterm_keeps_rows_and_says_how_to_resume(monkeypatch, capsys):
    def measuring(args):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)

    monkeypatch.setattr(harness_cli, "cmd_bench_e2e", measuring)
    before = handlers()
    assert harness_cli.main(["bench-e2e", "--backends", "naive,v16"]) == 143
    err = capsys.readouterr().err
    assert err.strip() == ("python -m harness: stopped by SIGTERM; every finished row is kept; to resume where this "
                           "one stopped, run the same command again: python -m harness bench-e2e --backends naive,v16")
    assert handlers() == before


def test_gpt2_sighup_says_so(monkeypatch, capsys):
    def generating(request):
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(5)

    monkeypatch.setattr(gpt2_cli, "run", generating)
    assert gpt2_cli.main(["--device", "cpu", "--weights", "random"]) == 129
    assert capsys.readouterr().err.strip() == "python -m gpt2: stopped by SIGHUP"


# -- real processes --------------------------------------------------------------------------
# `python -m harness` as run from a shell (its __main__.py), with one step replaced by a slow one.
SLOW_STEP = textwrap.dedent("""
    import runpy, sys, time
    from harness import cli

    def measuring(args):
        print("measuring", flush=True)
        time.sleep(60)

    cli.cmd_bench_kernels = measuring
    sys.argv = ["harness", "bench-kernels", "--backends", "naive"]
    runpy.run_module("harness", run_name="__main__", alter_sys=True)
""")


def signalled(proc: subprocess.Popen, ready: str, signum: int) -> tuple[str, str]:
    """Wait for the line `ready` on stdout, send `signum`, return stdout and stderr."""
    line = proc.stdout.readline()
    assert line.strip() == ready, line + proc.stderr.read()
    return signalled_now(proc, signum)


def signalled_now(proc: subprocess.Popen, signum: int) -> tuple[str, str]:
    proc.send_signal(signum)
    try:
        return proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the process did not stop")


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _parent_of(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), None)


def _catches(pid: int, signum: int) -> bool:
    """Whether process pid runs `python -m harness` and has a handler for signum (Linux: its
    command line and the SigCgt mask in /proc; a shell not yet replaced by exec catches
    signals of its own)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    if b"harness" not in command:
        return False
    mask = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(mask, 16) >> (signum - 1) & 1)


def wait_until_a_child_catches(parent: int, signum: int, timeout: float = 60.0) -> None:
    """Waits until a child of `parent`, `python -m harness`, has installed its handler for
    signum. A fixed sleep
    instead made the test fail on a loaded machine: the signal came before the handler."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(_parent_of(pid) == parent and _catches(pid, signum) for pid in _pids()):
            return
        time.sleep(0.02)
    pytest.fail(f"no child of {parent} caught signal {signum} within {timeout} s")


def popen(args: list[str], env: dict | None = None, new_session: bool = False) -> subprocess.Popen:
    return subprocess.Popen(args, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=new_session)


@pytest.fixture(scope="module", autouse=True)
def start_early(request):
    """The slow commands of the tests below (`measuring`, `building`) start as this module's first
    test begins, those that a selected test takes: each spends its first seconds importing torch
    (the builds' workers too), which the cores do beside each other and beside the tests before
    theirs. Each then waits, a minute, for its test's signal."""
    taken = {name for item in request.session.items if getattr(item, "module", None) is request.module
             for name in item.fixturenames}
    for name in ("measuring", "building"):
        if name in taken:
            request.getfixturevalue(name)


@pytest.fixture(scope="module")
def measuring():
    """`python -m harness bench-kernels` whose measuring takes a minute (SLOW_STEP)."""
    proc = popen([sys.executable, "-c", SLOW_STEP])
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_sigterm_ends_python_m_harness_with_the_resume_line(measuring):
    proc = measuring
    _, err = signalled(proc, "measuring", signal.SIGTERM)
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    assert err.strip() == ("python -m harness: stopped by SIGTERM; every finished row is kept; to resume where this "
                           "one stopped, run the same command again: python -m harness bench-kernels --backends naive")


@pytest.fixture
def slow_torch(tmp_path) -> dict:
    """An environment where `import torch` says so on stdout and then takes a minute."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("import time\nprint('importing torch', flush=True)\n"
                                                     "time.sleep(60)\n")
    return {**os.environ, "PYTHONPATH": str(tmp_path)}


@pytest.mark.parametrize("module,signum", [("harness", signal.SIGINT), ("gpt2", signal.SIGINT),
                                           ("harness", signal.SIGTERM)])
def test_a_signal_while_torch_imports_is_one_line(slow_torch, module, signum):
    proc = popen([sys.executable, "-m", module, "--help"], env=slow_torch)
    _, err = signalled(proc, "importing torch", signum)
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err, err
    what = "interrupted" if signum == signal.SIGINT else "stopped by SIGTERM"
    assert err.strip() == f"python -m {module}: {what} while starting; nothing was done"


# A build whose compiler takes a minute: torch's FileBaton as its loader takes it, in every
# worker too (spawn runs this file's top level in each), into a build folder under argv[1].
SLOW_BUILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from torch.utils import cpp_extension
    from torch.utils.file_baton import FileBaton
    from backends import extension
    from harness import build, cli

    def load(*, name, build_directory, **kwargs):
        baton = FileBaton(os.path.join(build_directory, "lock"))
        assert baton.try_acquire()
        try:
            sys.stdout.write(f"building {{name}}\\n")  # one write: two workers print at once
            sys.stdout.flush()
            time.sleep(60)
        finally:
            baton.release()

    cpp_extension.load = load
    extension.BUILD_ROOT = Path(sys.argv[1])
    if __name__ == "__main__":
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
        build.check_build_setup = lambda: None  # as with a CUDA build of torch
        sys.exit(cli.main(["build", "--backends", "v01,v02", "--jobs", "2"]))
""")


@pytest.fixture(scope="module")
def building(tmp_path_factory) -> tuple[subprocess.Popen, Path]:
    """`python -m harness build` of two versions whose compilers take a minute (SLOW_BUILD), in a
    session of its own; the folder its builds go under (build/)."""
    folder = tmp_path_factory.mktemp("slow-build")
    script = folder / "slow_build.py"
    script.write_text(SLOW_BUILD.format(root=str(PROJECT_ROOT)))
    proc = popen([sys.executable, str(script), str(folder / "build")], new_session=True)
    try:
        yield proc, folder
    finally:  # nothing of it outlives the module, whatever failed
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def test_sigterm_during_the_builds_stops_the_workers_and_releases_the_locks(building):
    """SIGTERM to the command alone (`kill PID`): its build workers stop too, unwinding their
    builds (torch's lock files removed, our locks free), and one line says how to resume."""
    check_the_build_stops(*building)


def check_the_build_stops(proc: subprocess.Popen, tmp_path: Path) -> None:
    assert proc.stdout.readline().startswith("building 2 versions"), proc.stderr.read()
    assert sorted(proc.stdout.readline().strip() for _ in range(2)) == ["building flash_v01", "building flash_v02"]
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the build did not stop")
    assert time.monotonic() - start < 10, "the workers must not build on to the end"
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    assert err.strip().endswith("stopped by SIGTERM; every finished build is kept; to build the rest, run the same "
                                "command again: python -m harness build --backends v01,v02 --jobs 2"), err
    for name in ("v01", "v02"):
        folder = tmp_path / "build" / name
        assert not (folder / "lock").exists(), f"{name}: the worker did not unwind its build"
        with (folder / "owner.lock").open() as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while a worker lives on


def test_run_all_forwards_sigterm_and_says_how_to_resume(tmp_path):
    """SIGTERM to run_all.sh alone: the running stage gets it too, the stage times are printed,
    and the last line says what is kept and the command to run again."""
    results, plots = tmp_path / "results", tmp_path / "plots"
    shutil.copytree(FIXTURES / "results", results)
    args = ["--plots-only", "--results-dir", str(results), "--plots-dir", str(plots)]
    proc = subprocess.Popen(["bash", "run_all.sh", *args], cwd=PROJECT_ROOT, start_new_session=True,
                            env={**os.environ, "PYTHON": sys.executable}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out = ""
    while "== plots" not in out:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        out += line
    wait_until_a_child_catches(proc.pid, signal.SIGTERM)  # the stage's harness, handlers installed
    _, err = signalled_now(proc, signal.SIGTERM)
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    assert "python -m harness: stopped by SIGTERM" in err, "the stage was not sent the signal"
    assert err.strip().splitlines()[-1] == (
        "run_all.sh: stopped by SIGTERM during plots; --plots-only measures nothing; to redraw the plots and "
        f"tables, run the same command again: run_all.sh {' '.join(args)}")
    assert not (results / "report.md").exists(), "nothing runs after the signal"


# `python -m harness list | head -1`: the reader closes the pipe while the command writes on.
# The entry point (__main__.py) runs as from a shell, its main replaced by one that prints a
# line, waits until the test has closed its end of the pipe (and stdin after it), then writes
# into the closed pipe the way `then` says. The stand-in is put where __main__.py imports main
# from, in place of the real {module}/cli.py, whose import (torch's: seconds) is not what these
# cases test; test_python_m_harness_list_into_a_closed_pipe runs the real one.
CLOSED_STDOUT = textwrap.dedent("""
    import runpy, sys, types

    def main(argv=None):
        print("first", flush=True)
        sys.stdin.read()
        {then}

    cli = types.ModuleType("{module}.cli")
    cli.main = main
    sys.modules["{module}.cli"] = cli
    sys.argv = [{module!r}]
    runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
""")
WRITES = {
    "printing": "while True: print('more')",  # BrokenPipeError inside main
    "returning": "print('last'); return 0",  # at the flush after main returns
    "exiting": "print('usage'); sys.exit(0)",  # as argparse ends --help: at the flush after SystemExit
}


CLOSED_STDOUT_CASES = [("harness", "printing"), ("harness", "returning"), ("harness", "exiting"), ("gpt2", "printing")]


@pytest.fixture(scope="module")
def closed_stdout_processes():
    """Every case's process, started at once; each waits for its test to close its pipes. Any a
    test did not take (-k) is killed at the end."""
    processes = {(module, then): subprocess.Popen(
        [sys.executable, "-c", CLOSED_STDOUT.format(module=module, then=WRITES[then])], cwd=PROJECT_ROOT,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for module, then in CLOSED_STDOUT_CASES}
    yield processes
    for proc in processes.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("module,then", CLOSED_STDOUT_CASES)
def test_a_closed_stdout_ends_the_command_silently(module, then, closed_stdout_processes):
    """It ended with a BrokenPipeError traceback (inside main) or 'Exception ignored ...
    BrokenPipeError' and status 120 (at the interpreter's last flush)."""
    proc = closed_stdout_processes[(module, then)]
    assert proc.stdout.readline() == "first\n", proc.stderr.read()
    proc.stdout.close()
    proc.stdin.close()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the process did not stop")
    err = proc.stderr.read()
    assert err == "" and proc.returncode == 128 + signal.SIGPIPE, (proc.returncode, err)


def test_python_m_harness_list_into_a_closed_pipe():
    """The command as a user runs it; whether its last lines meet the closed pipe depends on
    timing (the test above makes sure they do)."""
    proc = popen([sys.executable, "-m", "harness", "list"])
    assert proc.stdout.readline().startswith("backend"), proc.stderr.read()
    proc.stdout.close()
    proc.wait(timeout=60)
    err = proc.stderr.read()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode in (0, 128 + signal.SIGPIPE), err
