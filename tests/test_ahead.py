"""tests/ahead.py's lane: a job's folders and a test's come from one session folder."""
from __future__ import annotations

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
