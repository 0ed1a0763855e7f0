"""tests/ahead.py's lane: a job's folders and a test's come from one session folder; a caller waiting
for a job under way runs the jobs queued behind it."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.ahead import Ahead


def test_the_session_folder_is_made_before_a_job_can_ask_for_one(tmp_path: Path):
    """Made lazily, the first job's thread and the first test's fixture each made a session
    folder at once, and pytest refused the fixture's `mktemp` (CI, stop 48). The lane makes it
    as it is built, in the thread that builds it."""
    base = tmp_path / "session"
    # A factory of its own (pytest's constructor, as pytest builds it), so that the session's
    # own folder, made long ago, says nothing.
    factory = pytest.TempPathFactory(base, retention_count=3, retention_policy="all", trace=lambda *a: None,
                                     _ispytest=True)
    lane = Ahead(factory)
    try:
        assert base.is_dir(), "Ahead() returned before the session folder was made"
        assert lane.tmp("job").parent == base
    finally:
        lane.close()


def test_a_caller_waiting_for_a_job_under_way_runs_the_jobs_queued_behind_it(tmp_path: Path):
    """At the end of a session the main thread waited, a core idle, while the lane ran the last
    jobs one after another: waiting for one under way, it runs the next not begun itself. Here
    the job under way can end only once the job behind it has run."""
    factory = pytest.TempPathFactory(tmp_path / "session", retention_count=3, retention_policy="all",
                                     trace=lambda *a: None, _ispytest=True)
    begun, behind_ran = threading.Event(), threading.Event()

    def under_way(ahead: Ahead) -> bool:
        begun.set()
        return behind_ran.wait(timeout=30)

    def behind(ahead: Ahead) -> str:
        behind_ran.set()
        return threading.current_thread().name

    lane = Ahead(factory)
    try:
        lane.start([under_way, behind])
        assert begun.wait(timeout=30), "the lane did not begin the first job"
        assert lane(under_way), "the job queued behind the one under way was not run while the caller waited"
        assert lane(behind) == threading.current_thread().name, "run by the waiting caller, not the lane"
    finally:
        lane.close()
