"""Loading the committed CSVs of one GPU into tidy frames (latest row per measurement)."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.registry import BACKENDS
from harness.results import RESULTS_ROOT

BACKEND_ORDER = [b.name for b in BACKENDS]
BASELINES = [b.name for b in BACKENDS if not b.is_version]


@dataclass
class GpuResults:
    slug: str
    gpu: str
    kernels: pd.DataFrame  # status == ok rows, latest per (backend, B, H, T)
    e2e: pd.DataFrame  # status == ok rows, latest per (backend, tokens)
    unavailable: dict[str, str]  # backend -> reason, from status rows

    def kernel_rows(self, B: int, H: int, T: int) -> pd.DataFrame:
        """The kernel rows of one shape (empty when there are none)."""
        k = self.kernels
        return k[(k["B"] == B) & (k["H"] == H) & (k["T"] == T)] if not k.empty else k

    def provenance_line(self) -> str:
        frames = [f for f in (self.kernels, self.e2e) if not f.empty]
        if not frames:
            return self.gpu
        both = pd.concat(frames)
        commits = ", ".join(sorted(both["commit"].astype(str).unique()))
        first, last = both["date"].min()[:10], both["date"].max()[:10]
        dates = first if first == last else f"{first} to {last}"
        row = both.iloc[-1]
        return (f"{self.gpu}, driver {row['driver']}, CUDA {row['cuda']}, torch {row['torch']}, "
                f"commit {commits}, {dates}")


def _latest(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    if frame.empty:
        return frame
    frame = frame.sort_values("date", kind="stable")
    return frame.drop_duplicates(keys, keep="last").reset_index(drop=True)


def _order(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame
    rank = {name: i for i, name in enumerate(BACKEND_ORDER)}
    return frame.assign(_rank=frame["backend"].map(rank).fillna(len(rank))).sort_values(
        ["_rank"], kind="stable").drop(columns="_rank").reset_index(drop=True)


def load(slug: str, root=RESULTS_ROOT) -> GpuResults:
    def read(name: str) -> pd.DataFrame:
        path = root / slug / name
        return pd.read_csv(path, dtype={"commit": str}) if path.exists() else pd.DataFrame()

    kernels, e2e = read("kernels.csv"), read("e2e.csv")
    unavailable: dict[str, str] = {}
    for frame in (kernels, e2e):
        if not frame.empty:
            for _, row in frame[frame["status"] != "ok"].iterrows():
                unavailable[row["backend"]] = row["status"]
    kernels = _order(_latest(kernels[kernels["status"] == "ok"] if not kernels.empty else kernels,
                             ["backend", "B", "H", "T"]))
    e2e = _order(_latest(e2e[e2e["status"] == "ok"] if not e2e.empty else e2e, ["backend", "tokens"]))
    frames = [f for f in (kernels, e2e) if not f.empty]
    gpu = frames[0]["gpu"].iloc[0] if frames else slug
    for frame in frames:
        gpus = set(frame["gpu"])
        if len(gpus) > 1:
            raise ValueError(f"results/{slug} mixes GPUs {sorted(gpus)}: numbers from different GPUs never mix")
    return GpuResults(slug, gpu, kernels, e2e, unavailable)
