"""Provenance of a measurement: which GPU, driver, CUDA, torch and commit, and when."""
from __future__ import annotations

import datetime as dt
import os
import re
import subprocess

import torch

from harness.registry import PROJECT_ROOT

PROVENANCE_FIELDS = ("gpu", "driver", "cuda", "torch", "commit", "date")


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


def git_commit() -> str:
    """STUDY_COMMIT if set (a copy of the tree without .git), else git's HEAD (+ '-dirty')."""
    if os.environ.get("STUDY_COMMIT"):
        return os.environ["STUDY_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=PROJECT_ROOT,
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":!results", ":!plots", ":!README.md", ":!versions/*/README.md"],
                               cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def collect(device: torch.device | str = "cuda") -> dict[str, str]:
    """The provenance fields for a run on `device` (a CUDA device)."""
    return {
        "gpu": torch.cuda.get_device_name(device),
        "driver": _driver_version(),
        "cuda": str(torch.version.cuda),
        "torch": torch.__version__,
        "commit": git_commit(),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def same_setup(row: dict, provenance: dict) -> bool:
    """Whether a stored row was measured on this setup (everything but the date)."""
    return all(str(row.get(f)) == str(provenance[f]) for f in PROVENANCE_FIELDS if f != "date")
