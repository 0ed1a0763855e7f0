"""Shared fixtures. Tests marked `gpu` are deselected where no CUDA device exists (the summary
counts them): thousands of parametrized GPU checks would otherwise each be set up and skipped.
Tests marked `ahead` run last, their jobs started in the background as they are collected
(tests/ahead.py)."""
from __future__ import annotations

import gc
from pathlib import Path
from typing import Iterator

import pytest
import torch

from backends import registry
from backends.registry import Target
from tests.ahead import Ahead, jobs_of

# The collector's young generation 20,000 objects instead of 700, and a full collection after 20
# of the middle one's instead of 10. The session holds millions of objects (the collected tests,
# torch, every results row read), which each full collection walked: 20 of them, with the young
# ones, took 8-9 s of the main thread's ~90 (2 cores), for 2 s now; the largest the process
# grows is 1.6 GB either way. No test calls or inspects the collector.
gc.set_threshold(20_000, 20, 20)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu = [item for item in items if "gpu" in item.keywords] if not torch.cuda.is_available() else []
    if gpu:
        items[:] = [item for item in items if "gpu" not in item.keywords]
        config.hook.pytest_deselected(items=gpu)
    items.sort(key=lambda item: item.get_closest_marker("ahead") is not None)  # stable: the rest keep their order


LANE = pytest.StashKey[Ahead]()


def _lane(config: pytest.Config) -> Ahead:
    """The session's lane (tests/ahead.py), made on first use; its folders come from the
    session's own tmp_path_factory (config._tmp_path_factory: what the fixture returns)."""
    if LANE not in config.stash:
        config.stash[LANE] = Ahead(config._tmp_path_factory)  # type: ignore[attr-defined]
    return config.stash[LANE]


def _selects_after_collecting(config: pytest.Config) -> bool:
    """Whether tests collected may yet be left out (-k, -m, --deselect, --lf, --sw), or none run
    (--collect-only): then no job starts before the selection is known."""
    option = config.option
    return bool(option.keyword or option.markexpr or option.deselect or option.collectonly
                or getattr(option, "lf", False) or getattr(option, "stepwise", False))


def pytest_itemcollected(item: pytest.Item) -> None:
    """A test's jobs start as it is collected, while the rest of the suite is (seconds of one
    core importing and building the tests, the other idle), unless the selection may leave the
    test out."""
    if not _selects_after_collecting(item.config):
        _lane(item.config).start(jobs_of([item]))


def pytest_unconfigure(config: pytest.Config) -> None:
    if LANE in config.stash:  # a session that ended before its first test (a collection error)
        config.stash[LANE].close()


@pytest.fixture(scope="session", autouse=True)
def ahead(request: pytest.FixtureRequest) -> Iterator[Ahead]:
    """The jobs of the selected tests' `ahead` marks, started as each test is collected (or,
    where -k or the like selects afterwards, as the first test begins); ahead(job) is a job's
    result (tests/ahead.py)."""
    lane = _lane(request.config)
    lane.start(jobs_of(request.session.items))
    yield lane
    lane.close()


class VersionOps(dict):
    """name -> the version's raw op; a version this GPU cannot run skips the test, saying why."""

    def __init__(self, ops: dict, unavailable: dict[str, str]) -> None:
        super().__init__(ops)
        self.unavailable = unavailable

    def __missing__(self, name: str):
        pytest.skip(f"{name}: {self.unavailable.get(name, 'not built')}")


def versions_used(items: list[pytest.Item], fixture: str = "version_ops") -> set[str] | None:
    """The versions that the selected tests taking `fixture` name in their `name` parameter;
    None (all of them) if one of those tests names none."""
    names: set[str] = set()
    for item in items:
        if fixture not in getattr(item, "fixturenames", ()):
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "name" not in params:
            return None
        names.add(params["name"])
    return names


def built_ops(request: pytest.FixtureRequest, fixture: str, versions: list) -> VersionOps:
    """The op of every one of `versions` that the selected tests taking `fixture` use (all of
    them without -k), if this GPU can run it, built once per session in parallel (a no-op when
    build/ is up to date)."""
    from backends.extension import load_op
    from harness.build import build_all

    used = versions_used(request.session.items, fixture)
    selected = [v for v in versions if used is None or v.name in used]
    runnable, unavailable = registry.partition(selected, Target.of("cuda"))
    results = build_all(runnable)
    failed = [r for r in results if not r.ok]
    assert not failed, "versions failed to build:\n" + "\n".join(f"{r.name}: {r.error}" for r in failed)
    return VersionOps({v.name: load_op(v) for v in runnable}, unavailable)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def version_ops(request: pytest.FixtureRequest) -> VersionOps:
    """The prefill op (causal_attention) of every prefill version the selected tests use."""
    return built_ops(request, "version_ops", registry.versions())


@pytest.fixture(scope="session")
def decode_ops(request: pytest.FixtureRequest) -> VersionOps:
    """The decode op (decode_attention) of every decode version the selected tests use."""
    return built_ops(request, "decode_ops", registry.decode_versions())


@pytest.fixture(scope="session")
def attention_or_skip():
    """fn(name, dtype) -> the backend's attention on the GPU in dtype (default float32); a
    backend this GPU cannot run skips the test, saying why."""
    def attention(name: str, dtype: str = "float32"):
        backend = registry.get(name)
        reason = backend.why_unavailable(Target.of("cuda"), dtype)
        if reason:
            pytest.skip(f"{name}: {reason}")
        return backend.attention("cuda", dtype)

    return attention


FIXTURE_RESULTS = Path(__file__).parent / "fixtures" / "results"


@pytest.fixture(scope="session")
def committed_results() -> list:
    """The committed results/ folder's GPUs, read once for the session."""
    from harness.tables import load_all

    return load_all(registry.PROJECT_ROOT / "results")


@pytest.fixture(scope="session")
def fixture_results() -> list:
    """tests/fixtures/results' GPUs (GPU A, then GPU B), read once for the session: several
    modules read them, none changes them (a changed copy is a dataclasses.replace)."""
    from harness.tables import load_all

    return load_all(FIXTURE_RESULTS)


def read_once(monkeypatch: pytest.MonkeyPatch, folder: Path, loaded: list) -> None:
    """`python -m harness report` and `plot`, while monkeypatch holds, take `folder`'s results
    from `loaded` (what tables.load_all read of it) instead of reading its files again; any
    other folder is read as usual. Nothing in the report or the plots changes the results it is
    given."""
    from harness import tables

    read, folder = tables.load_all, folder.resolve()
    monkeypatch.setattr(tables, "load_all", lambda path: loaded if Path(path).resolve() == folder else read(path))


@pytest.fixture
def committed_results_read_once(committed_results, monkeypatch) -> None:
    """`python -m harness report` (and plot) in this test take the committed results/ from
    `committed_results` instead of reading its files again (a second or two each time, for the
    tests that report them more than once)."""
    read_once(monkeypatch, registry.PROJECT_ROOT / "results", committed_results)
