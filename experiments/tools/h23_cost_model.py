"""A cost model of h23's prefill plans over (B, H, T, SMs), fitted to the measured grid and
checked against it; beside each shape, the plan trial h23t_1 (short narrow blocks, two per SM)
would pick.

    python experiments/tools/h23_cost_model.py --gpu nvidia-h100-80gb-hbm3 --commit f184cca4d08c

The plan is h23's (versions/h23_or_of_the_exponentials/attention.cu, plan_splits): narrow
row blocks of 64 rows where B H ceil(T/64) blocks take at most three waves of the SMs, else
192-row blocks split along the keys into items of at most L tiles (a second kernel merges the
splits); the 192-row items are row_block_plans.py's (h13's row blocks, which h23 keeps). Each
block or item goes to the SM that frees first, in launch order, longest row block first
(persistent_schedule.greedy). One call:

    t = t_0 + max(sum on the busiest SM of (s + n c), bytes / BW) [+ t_merge if split]

n: the item's key tiles of 128 columns; (s, c) is (s_1, c_1) for a narrow block (one
warpgroup at the tensor cores) and (s_3, c_3) for a 192-row item (three warpgroups taking
turns). BW is the copy's rate measured in the same sweep, not fitted; t_0, s_1, s_3, c_1, c_3
and t_merge are fitted (least squares on log time) to h23's device times on every shape the
sweep measured (the grid and the study's shapes). What the fit leaves is what the model does
not explain, printed shape by shape.

The last column runs trial h23t_1's plan through the same numbers: a short narrow block
costs what a narrow one does and two on one SM do not slow each other, so it is the most the
trial can give by this model, not a measurement.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from harness.prefill_floor import io_bytes
from harness.study import Shape
from harness.one_run import add_run_arguments, copy_rate, load_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from persistent_schedule import B_C, WARPGROUP_ROWS, greedy  # noqa: E402
from row_block_plans import split_length, tiles_per_row_block, work_items  # noqa: E402

NARROW_WAVES = 3  # h23's kNarrowWaves
SHORT_STAGES = 2  # h23t_1: the short narrow kernel's stages (T <= SHORT_STAGES B_C) ...
SHORT_BLOCKS_PER_SM = 2  # ... and its blocks per SM


def narrow_tiles(T: int) -> list[int]:
    """Key tiles of each 64-row block (lead 0), first to last: up to its diagonal tile."""
    return [min(i * WARPGROUP_ROWS // B_C + 1, math.ceil(T / B_C)) for i in range(math.ceil(T / WARPGROUP_ROWS))]


@dataclass(frozen=True)
class Launch:
    """What one call runs: items (key tiles each) in launch order on `workers` slots."""

    items: tuple[int, ...]
    workers: int  # blocks running at once
    narrow: bool
    split: bool
    short: bool = False

    def name(self) -> str:
        if self.narrow:
            return "short narrow" if self.short else "narrow"
        return "192 rows, split" if self.split else "192 rows"


def plan(shape: Shape, sms: int, short_blocks: bool = False) -> Launch:
    """h23's plan_splits and launch_config; with short_blocks, h23t_1's. The 192-row items
    are row_block_plans.py's (h13's row blocks, laid from T's end, and their splits); the
    narrow blocks go in the same order, the longest row block of every head first."""
    heads = shape.B * shape.H
    narrow = narrow_tiles(shape.T)
    short = short_blocks and shape.T <= SHORT_STAGES * B_C
    narrow_slots = sms * (SHORT_BLOCKS_PER_SM if short else 1)
    if heads * len(narrow) <= NARROW_WAVES * narrow_slots:
        return Launch(tuple(n for n in reversed(narrow) for _ in range(heads)), narrow_slots, narrow=True,
                      split=False, short=short)
    tiles = tiles_per_row_block(shape.T, from_the_end=True)
    split = split_length(tiles, heads, sms) < max(tiles)
    return Launch(tuple(work_items(shape.B, shape.T, sms, True, num_heads=shape.H)), sms, narrow=False, split=split)


def busiest(items: Sequence[int], workers: int, start: float, tile: float) -> float:
    """The busiest worker's time when each item (start + its tiles x tile) goes, in order, to
    the one that frees first (persistent_schedule.greedy, in tiles)."""
    return tile * greedy(items, min(workers, len(items)), start / tile)


PARAMS = ("t0", "s1", "s3", "c1", "c3", "t_merge")


def predict(shape: Shape, dtype: str, sms: int, copy_gbps: float, p: dict[str, float],
            short_blocks: bool = False) -> float:
    launch = plan(shape, sms, short_blocks)
    start, tile = (p["s1"], p["c1"]) if launch.narrow else (p["s3"], p["c3"])
    compute = busiest(launch.items, launch.workers, start, tile)
    memory = io_bytes(shape, dtype) / (copy_gbps * 1e3)
    return p["t0"] + max(compute, memory) + (p["t_merge"] if launch.split else 0.0)


def fit(samples: list[tuple[Shape, float]], dtype: str, sms: int, copy_gbps: float) -> dict[str, float]:
    """Least squares on log time by Nelder-Mead over the log of each parameter."""
    start = [3.0, 0.3, 1.0, 0.8, 1.3, 5.0]

    def loss(x: list[float]) -> float:
        p = dict(zip(PARAMS, (math.exp(v) for v in x)))
        return sum((math.log(predict(s, dtype, sms, copy_gbps, p)) - math.log(t)) ** 2 for s, t in samples)

    x = nelder_mead(loss, [math.log(v) for v in start])
    return dict(zip(PARAMS, (math.exp(v) for v in x)))


def nelder_mead(f: Callable[[list[float]], float], x0: list[float], steps: int = 3000,
                scale: float = 0.5) -> list[float]:
    """A plain Nelder-Mead minimiser (no dependency beyond the standard library)."""
    n = len(x0)
    simplex = [list(x0)] + [[x0[j] + (scale if j == i else 0.0) for j in range(n)] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(steps):
        order = sorted(range(n + 1), key=values.__getitem__)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centroid = [sum(x[j] for x in simplex[:-1]) / n for j in range(n)]
        worst = simplex[-1]
        reflected = [c + (c - w) for c, w in zip(centroid, worst)]
        fr = f(reflected)
        if fr < values[0]:
            expanded = [c + 2 * (c - w) for c, w in zip(centroid, worst)]
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = [c + 0.5 * (w - c) for c, w in zip(centroid, worst)]
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                best = simplex[0]
                simplex = [best] + [[b + 0.5 * (x - b) for b, x in zip(best, xs)] for xs in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
        if max(values) - min(values) < 1e-10:
            break
    return simplex[min(range(n + 1), key=values.__getitem__)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    parser.add_argument("--dtype", default="bfloat16", help="bfloat16 (default) or float16")
    parser.add_argument("--sms", type=int, default=132, help="the GPU's SM count (default: 132, the H100 SXM's)")
    args = parser.parse_args(argv)
    r = load_run(parser, args)
    samples = sorted((x.shape, x.us_device_median) for x in r.measured_kernels
                     if x.provenance.commit == args.commit and x.backend == "h23" and x.dtype == args.dtype
                     and x.us_device_median)
    if not samples:
        print(f"h23_cost_model: no h23 {args.dtype} rows at {args.commit}", file=sys.stderr)
        return 1
    copy = copy_rate(r, args.commit)
    if copy is None:
        print(f"h23_cost_model: no copy rate at {args.commit} (the sweep ran no decode benchmark)", file=sys.stderr)
        return 1
    p = fit(samples, args.dtype, args.sms, copy)
    print(f"## h23's cost model: {r.gpu}, commit {args.commit}, {args.dtype}, {args.sms} SMs\n")
    print(f"Generated by `python experiments/tools/h23_cost_model.py --gpu {args.gpu} --commit {args.commit}`.\n")
    print(f"Copy rate (measured, same sweep): {copy:,.0f} GB/s. Fitted: "
          + ", ".join(f"{k} {v:.2f} µs" for k, v in p.items()) + "\n")
    print("| B | H | T | plan | measured µs | model µs | model / measured | h23t_1's plan | its model µs |")
    print("|---|---|---|---|---|---|---|---|---|")
    errors = []
    for shape, measured in samples:
        launch, short = plan(shape, args.sms), plan(shape, args.sms, short_blocks=True)
        model = predict(shape, args.dtype, args.sms, copy, p)
        errors.append(model / measured)
        trial = predict(shape, args.dtype, args.sms, copy, p, short_blocks=True)
        print(f"| {shape.B} | {shape.H} | {shape.T} | {launch.name()} | {measured:.1f} | {model:.1f} | "
              f"{model / measured:.2f} | {short.name()} | {trial:.1f} |")
    logs = [abs(math.log(e)) for e in errors]
    print(f"\n{len(errors)} shapes: model / measured {min(errors):.2f}-{max(errors):.2f}, median absolute error "
          f"{100 * (math.exp(statistics.median(logs)) - 1):.0f}%.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
