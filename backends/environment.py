"""Provenance of a measurement: which GPU, driver, CUDA, torch and commit, and when."""
from __future__ import annotations

import dataclasses
import datetime as dt
import os
import platform
import re
import subprocess
from dataclasses import dataclass

import torch

from backends.registry import PROJECT_ROOT

NOT_APPLICABLE = "n/a"


@dataclass(frozen=True)
class Provenance:
    """Where and when a row was measured; `date` aside, equal provenance means the same setup."""

    gpu: str
    driver: str
    cuda: str
    torch: str
    commit: str
    date: str

    def setup(self) -> "Provenance":
        """The run a row belongs to: its GPU, driver, CUDA, torch and commit, whatever its date.
        A sweep stopped by a time limit and resumed stamps the rows of each part with that
        part's start; both parts are one run (the kernel benchmark takes a resumed run's
        reference from the part that measured it, and the tables pair rows the same way)."""
        return dataclasses.replace(self, date="")

    def same_setup(self, other: "Provenance") -> bool:
        """Measured on the same GPU model, driver, CUDA, torch and commit (any date)."""
        return self.setup() == other.setup()

    @property
    def slug(self) -> str:
        return gpu_slug(self.gpu)


def gpu_slug(gpu_name: str) -> str:
    """A folder name for a GPU: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")


def _driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


COMMIT_DIGITS = 12  # rows name commits as `git rev-parse --short=12` does


def git_commit() -> str:
    """STUDY_COMMIT if set (a copy of the tree without .git), else git's HEAD (+ '-dirty'). A
    full hexadecimal hash in STUDY_COMMIT is shortened to git's 12 digits, so that every row
    names its commit in one form."""
    if os.environ.get("STUDY_COMMIT"):
        given = os.environ["STUDY_COMMIT"].strip()
        is_hash = len(given) > COMMIT_DIGITS and all(c in "0123456789abcdefABCDEF" for c in given)
        return given[:COMMIT_DIGITS].lower() if is_hash else given
    try:
        head = subprocess.run(["git", "rev-parse", f"--short={COMMIT_DIGITS}", "HEAD"], cwd=PROJECT_ROOT,
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":!results", ":!plots", ":!README.md", ":!versions/*/README.md"],
                               cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def stale_commit_warning(commit: str) -> str | None:
    """What to say before measuring when the rows would name `commit` (git_commit()) with
    '-dirty': a copy of the tree whose .git is older than its files (a GPU machine sent the
    files, not the history) names the wrong commit; STUDY_COMMIT names the right one."""
    if not commit.endswith("-dirty"):
        return None
    return (f"the tree differs from commit {commit.removesuffix('-dirty')}, so what is measured will name {commit}; "
            f"if this copy's .git is stale, stop and rerun with STUDY_COMMIT=<the commit this tree is>")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{device.type}: {platform.processor() or platform.machine()}"


def collect(device: torch.device | str = "cuda") -> Provenance:
    """The provenance of a run on `device` (a CUDA device, or the CPU for CPU runs)."""
    device = torch.device(device)
    on_cuda = device.type == "cuda"
    return Provenance(
        gpu=device_name(device),
        driver=_driver_version() if on_cuda else NOT_APPLICABLE,
        cuda=str(torch.version.cuda) if on_cuda else NOT_APPLICABLE,
        torch=torch.__version__,
        commit=git_commit(),
        date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
