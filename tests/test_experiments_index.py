"""experiments/INDEX.md is what experiments/tools/index.py makes of the files: every trial
listed once under its version, with the What: and Outcome: lines of its patch; every script
and probe with its first sentence; an outcome that names a step names one of the registry."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from backends import registry
from backends.registry import PROJECT_ROOT
from tests.scripts import load_script

EXPERIMENTS = PROJECT_ROOT / "experiments"


@pytest.fixture(scope="module")
def index():
    return load_script("experiments/tools/index.py")


def test_the_committed_index_is_what_the_files_give(index):
    assert (EXPERIMENTS / "INDEX.md").read_text() == index.render(index.entries()), \
        "experiments/INDEX.md is stale: run python experiments/tools/index.py"


def test_every_patch_and_script_is_listed_once_with_what_it_is(index):
    found = index.entries()
    listed = [e.path for entries in found.values() for e in entries]
    files = [p for p in EXPERIMENTS.glob("*/*") if p.suffix in (".patch", *index.SCRIPTS)]
    assert sorted(listed) == sorted(files) and len(set(listed)) == len(listed)
    for folder, entries in found.items():
        for e in entries:
            assert e.what and "\n" not in e.what, e.path
            if e.path.suffix == ".patch":
                assert e.outcome and "\n" not in e.outcome, e.path
                assert e.name.startswith(folder), f"{e.path}: tried on {folder}"
                assert e.notes, f"{e.path}: no notes section names {e.name}"


def test_an_outcome_that_names_a_step_names_one_of_the_registry(index):
    versions = {v.name for v in registry.versions()}
    adopted = 0
    for entries in index.entries().values():
        for e in entries:
            for name in re.findall(r"\b(?:adopted as|part of|became|led to) ([vhd]\d\d)\b", e.outcome):
                assert name in versions, f"{e.path}: {name} is no version of the registry"
                adopted += 1
    assert adopted >= 20, "the trials that became steps say so"


def test_links_lead_to_files_and_sections_that_exist(index):
    text = (EXPERIMENTS / "INDEX.md").read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        path, _, anchor = target.partition("#")
        assert (EXPERIMENTS / path).exists(), target
        if anchor:
            headings = re.findall(r"(?m)^#{2,3} (.*)$", (EXPERIMENTS / path).read_text())
            assert anchor in {index.anchor(h) for h in headings}, target


def test_a_patch_without_its_two_lines_is_named(index, tmp_path):
    (tmp_path / "v16").mkdir()
    shutil.copy(EXPERIMENTS / "v16" / "v16_1_k_float2.patch", tmp_path / "v16")
    bare = tmp_path / "v16" / "v16_2_pipeline.patch"
    bare.write_text("\n".join((EXPERIMENTS / "v16" / "v16_2_pipeline.patch").read_text().splitlines()[2:]) + "\n")
    with pytest.raises(index.UndescribedFile, match=f"{bare}: line 1 must be 'What: <one line>'"):
        index.entries(tmp_path)
    (tmp_path / "stray.patch").write_text("")
    with pytest.raises(index.UndescribedFile, match="stray.patch belong in a version's folder"):
        index.entries(tmp_path)


@pytest.mark.parametrize("heading,anchor", [
    ("Tried: S of the next tile issued before this softmax (h03_1, not adopted)",
     "tried-s-of-the-next-tile-issued-before-this-softmax-h03_1-not-adopted"),
    ("Where B=1 at T ≤ 512 loses: measured", "where-b1-at-t--512-loses-measured"),
    ("Where a sweep's time goes (`sweep_time_profile.py`)", "where-a-sweeps-time-goes-sweep_time_profilepy"),
])
def test_anchors_are_githubs(index, heading, anchor):
    assert index.anchor(heading) == anchor


def test_the_scripts_first_sentence(index, tmp_path):
    script = tmp_path / "probe.sh"
    script.write_text("#!/usr/bin/env bash\n# What a probe measures (GPU): one sentence. Then more.\n#\n"
                      "#   a command\nset -e\n")
    assert index.first_sentence(script) == "What a probe measures (GPU): one sentence."
    python = tmp_path / "model.py"
    python.write_text('"""A model, no GPU: the rest\nof the sentence.\n\nMore."""\n')
    assert index.first_sentence(python) == "A model, no GPU: the rest of the sentence."
    assert Path(index.__file__).parent.name == "tools"
