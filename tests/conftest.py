"""Shared fixtures. Tests marked `gpu` skip where no CUDA device exists."""
from __future__ import annotations

import pytest
import torch

from harness import registry


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def version_ops() -> dict:
    """Every version's op, built once per session (a no-op when build/ is up to date)."""
    from harness.build import build_all
    from harness.extension import load_op, set_build_environment

    set_build_environment()
    versions = registry.versions()
    results = build_all(versions)
    failed = [r for r in results if not r.ok]
    assert not failed, "versions failed to build:\n" + "\n".join(f"{r.name}: {r.error}" for r in failed)
    return {v.name: load_op(v) for v in versions}
