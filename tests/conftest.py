"""Shared fixtures. Tests marked `gpu` are deselected where no CUDA device exists (the summary
counts them): thousands of parametrized GPU checks would otherwise each be set up and skipped.
Tests marked `ahead` run last, their jobs started in the background as the session begins
(tests/ahead.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
import torch

from backends import registry
from backends.registry import Target
from tests.ahead import Ahead, jobs_of


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu = [item for item in items if "gpu" in item.keywords] if not torch.cuda.is_available() else []
    if gpu:
        items[:] = [item for item in items if "gpu" not in item.keywords]
        config.hook.pytest_deselected(items=gpu)
    items.sort(key=lambda item: item.get_closest_marker("ahead") is not None)  # stable: the rest keep their order


@pytest.fixture(scope="session", autouse=True)
def ahead(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ahead]:
    """The jobs of the selected tests' `ahead` marks, started as the first test begins;
    ahead(job) is a job's result (tests/ahead.py)."""
    lane = Ahead(tmp_path_factory)
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


@pytest.fixture(scope="session")
def committed_results() -> list:
    """The committed results/ folder's GPUs, read once for the session."""
    from harness.tables import load_all

    return load_all(registry.PROJECT_ROOT / "results")


@pytest.fixture
def committed_results_read_once(committed_results, monkeypatch) -> None:
    """`python -m harness report` (and plot) in this test take the committed results/ from
    `committed_results` instead of reading its files again (a second or two each time, for the
    tests that report them more than once); any other folder is read as usual. Nothing in the
    report changes the results it is given."""
    from harness import tables

    read, committed = tables.load_all, (registry.PROJECT_ROOT / "results").resolve()
    monkeypatch.setattr(tables, "load_all",
                        lambda folder: committed_results if Path(folder).resolve() == committed else read(folder))
