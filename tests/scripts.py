"""Loads a standalone script (experiments/tools/*.py, tests/fixtures/make_fixtures.py) as a module,
for the tests that check what the notes quote from it."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_script(relative_path: str) -> ModuleType:
    """The script at ROOT / relative_path, executed as a module named after its file. It stays
    in sys.modules (dataclasses look their module up there)."""
    path = ROOT / relative_path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, f"cannot load {path}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
