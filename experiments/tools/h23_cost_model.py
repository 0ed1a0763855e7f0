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

With --version h24 the model is fitted to h24's rows instead, with a start and a tile of its
own for the short narrow blocks (s_s, c_s: two share an SM, so what one costs is not what a
narrow block alone does), and each `harness try` log given with --trials is read as a check
of the plans: at every shape where a trial's plan differs from h24's, both were measured in
the same rounds, and the model, fitted to h24's rows alone, says which it expects faster.

    python experiments/tools/h23_cost_model.py --gpu nvidia-h100-80gb-hbm3 --commit f6156f8cae8a \
        --version h24 --trials results/nvidia-h100-80gb-hbm3/experiments/2026-11-27_22_h24_trials_grid.log
"""
from __future__ import annotations

import math
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from backends import arguments, precision
from harness.prefill_floor import io_bytes
from harness.study import GRID_SHAPES, Shape
from harness.one_run import add_run_arguments, copy_rate, load_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from persistent_schedule import B_C, MAX_SMS, WARPGROUP_ROWS, greedy  # noqa: E402
from row_block_plans import split_length, tiles_per_row_block, work_items  # noqa: E402

NARROW_WAVES = 3  # h23's kNarrowWaves
SHORT_STAGES = 2  # h24 (trial h23t_1): the short narrow kernel's stages (T <= SHORT_STAGES B_C) ...
SHORT_BLOCKS_PER_SM = 2  # ... and its blocks per SM


@dataclass(frozen=True)
class Rule:
    """How a version or a trial picks its plan (each one's plan_splits): the short form of the
    narrow kernel where T <= short_max_t, or where T <= cuts_waves_up_to and h23's narrow
    blocks would take more than one and at most NARROW_WAVES waves of one per SM; short
    blocks in up to short_waves waves of SHORT_BLOCKS_PER_SM per SM."""

    short_max_t: int = 0  # 0: no short form (h23)
    short_waves: int = NARROW_WAVES
    cuts_waves_up_to: int = 0


# Each plan as its source or patch writes it (experiments/h24/*.patch); h24uv is h24x_1's name
# in the log that measured it.
RULES = {
    "h23": Rule(),
    "h24": Rule(short_max_t=SHORT_STAGES * B_C),
    "h24u": Rule(short_max_t=2 * SHORT_STAGES * B_C),
    "h24v": Rule(short_max_t=SHORT_STAGES * B_C, short_waves=6),
    "h24uv": Rule(short_max_t=2 * SHORT_STAGES * B_C, short_waves=6),
    "h24x": Rule(short_max_t=2 * SHORT_STAGES * B_C, short_waves=6),
    "h24w": Rule(short_max_t=SHORT_STAGES * B_C, cuts_waves_up_to=2 * SHORT_STAGES * B_C),
}


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


def plan(shape: Shape, sms: int, rule: Rule = RULES["h23"]) -> Launch:
    """The plan `rule` picks (h23's plan_splits and launch_config by default). The 192-row
    items are row_block_plans.py's (h13's row blocks, laid from T's end, and their splits); the
    narrow blocks go in the same order, the longest row block of every head first."""
    heads = shape.B * shape.H
    narrow = narrow_tiles(shape.T)
    blocks = heads * len(narrow)
    short = shape.T <= rule.short_max_t or (shape.T <= rule.cuts_waves_up_to and sms < blocks <= NARROW_WAVES * sms)
    narrow_slots = sms * (SHORT_BLOCKS_PER_SM if short else 1)
    if blocks <= (rule.short_waves if short else NARROW_WAVES) * narrow_slots:
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
SHORT_PARAMS = ("s_s", "c_s")  # the short narrow blocks' start and tile, fitted where a version has them
START = {"t0": 3.0, "s1": 0.3, "s3": 1.0, "c1": 0.8, "c3": 1.3, "t_merge": 5.0, "s_s": 3.0, "c_s": 1.0}


def predict(shape: Shape, dtype: str, sms: int, copy_gbps: float, p: dict[str, float],
            rule: Rule = RULES["h23"]) -> float:
    """One call's time by the model: short blocks at (s_s, c_s) where fitted, else at a narrow
    block's (s1, c1)."""
    launch = plan(shape, sms, rule)
    if launch.short and "s_s" in p:
        start, tile = p["s_s"], p["c_s"]
    else:
        start, tile = (p["s1"], p["c1"]) if launch.narrow else (p["s3"], p["c3"])
    compute = busiest(launch.items, launch.workers, start, tile)
    memory = io_bytes(shape, dtype) / (copy_gbps * 1e3)
    return p["t0"] + max(compute, memory) + (p["t_merge"] if launch.split else 0.0)


def fit(samples: list[tuple[Shape, float]], dtype: str, sms: int, copy_gbps: float,
        rule: Rule = RULES["h23"]) -> dict[str, float]:
    """Least squares on log time by Nelder-Mead over the log of each parameter; the short
    blocks' two where the rule has them."""
    names = PARAMS + (SHORT_PARAMS if rule.short_max_t else ())

    def loss(x: list[float]) -> float:
        p = dict(zip(names, (math.exp(v) for v in x)))
        return sum((math.log(predict(s, dtype, sms, copy_gbps, p, rule)) - math.log(t)) ** 2 for s, t in samples)

    x = nelder_mead(loss, [math.log(START[name]) for name in names])
    return dict(zip(names, (math.exp(v) for v in x)))


# A trial measured before it became a version, by its name in the log: h23t (h23 +
# h23t_1_short_narrow_kernel.patch, log 2026-11-27_21) is h24's code and plan.
ADOPTED = {"h23t": "h24"}


def try_table(text: str, dtype: str) -> dict[str, dict[Shape, float]]:
    """The final table of a `harness try --shapes grid` log: each column's device times (µs)
    by shape, an adopted trial's under its version's name (ADOPTED). Its rows are the grid's
    shapes in GRID_SHAPES order (their labels omit H)."""
    title = f"device time, µs, {dtype}"
    if title not in text:
        raise ValueError(f"no table {title!r}: not a `harness try --shapes grid` log in {dtype}")
    lines = text[text.rindex(title):].splitlines()[1:]
    names = [ADOPTED.get(name, name) for name in lines[0].split()[1:]]
    rows = [line for line in lines[1:] if re.match(r"\s*B=\d+ T=\d+\s", line)]
    if len(rows) != len(GRID_SHAPES):
        raise ValueError(f"{len(rows)} rows in the try table, not the grid's {len(GRID_SHAPES)}")
    table: dict[str, dict[Shape, float]] = {name: {} for name in names}
    for shape, line in zip(GRID_SHAPES, rows):
        if not line.strip().startswith(f"B={shape.B} T={shape.T} "):
            raise ValueError(f"try table row {line.strip()!r} is not {shape}")
        for name, value in zip(names, re.findall(r"([\d.]+) \(", line)):
            table[name][shape] = float(value)
    return table


# The trial whose plan the table puts beside each version's, and that plan: h23t_1 (h24's) on
# h23, h24w_1 on h24.
NEXT_TRIAL = {"h23": ("h23t_1", RULES["h24"]), "h24": ("h24w_1", RULES["h24w"])}

# Two plans measured within this of each other are a tie: in log 2026-11-27_22 h24 and h24u run
# the same code at B=1 T=64 and read 5.1 and 4.2 µs in the same two rounds.
TIE_FRACTION, TIE_US = 0.05, 0.5


def plan_checks(table: dict[str, dict[Shape, float]], base: str, dtype: str, sms: int, copy_gbps: float,
                p: dict[str, float]) -> list[str]:
    """Markdown rows: at each shape where a trial's plan differs from `base`'s, the two measured
    in the same rounds and as the model predicts them; whether the model picks the faster."""
    lines = []
    for name, times in table.items():
        if name == base or name not in RULES or base not in table:
            continue
        for shape, measured in times.items():
            mine, theirs = plan(shape, sms, RULES[base]), plan(shape, sms, RULES[name])
            if mine == theirs:
                continue
            ours = table[base][shape]
            model_ours = predict(shape, dtype, sms, copy_gbps, p, RULES[base])
            model_theirs = predict(shape, dtype, sms, copy_gbps, p, RULES[name])
            if abs(measured - ours) < max(TIE_FRACTION * min(measured, ours), TIE_US):
                verdict = "tie"
            else:
                verdict = "yes" if (model_theirs < model_ours) == (measured < ours) else "**no**"
            lines.append(f"| `{name}` | {shape.B} | {shape.H} | {shape.T} | {mine.name()} / {theirs.name()} | "
                         f"{ours:.1f} / {measured:.1f} | {model_ours:.1f} / {model_theirs:.1f} | {verdict} |")
    return lines


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
    parser = arguments.OneLineParser(prog="h23_cost_model.py", description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    parser.add_argument("--dtype", choices=precision.HALF, default=precision.BFLOAT16,
                        help="bfloat16 (default) or float16")
    parser.add_argument("--sms", type=int, default=132,
                        help=f"the GPU's SM count (default: 132, the H100 SXM's; at most {MAX_SMS})")
    parser.add_argument("--version", choices=tuple(NEXT_TRIAL), default="h23",
                        help="whose rows the model is fitted to, with its plan (default: h23)")
    parser.add_argument("--trials", type=arguments.path, nargs="*", default=[],
                        help="`harness try --shapes grid` logs whose variants are plans of RULES, read as a "
                             "check of the plans against the version's (with --version h24)")
    parser.add_argument("--copy-from", type=arguments.text, metavar="COMMIT",
                        help="the sweep whose copy rate the memory term takes (default: --commit's), for a run "
                             "that measured no decode benchmark, as h24's kernel rows at f6156f8cae8a")
    args = parser.parse_args(argv)
    problem = arguments.out_of_range("--sms", args.sms, 1, MAX_SMS, "no GPU has more multiprocessors")
    if problem:
        parser.error(problem)
    r = load_run(parser, args)
    version, rule = args.version, RULES[args.version]
    samples = sorted((x.shape, x.us_device_median) for x in r.measured_kernels
                     if x.provenance.commit == args.commit and x.backend == version and x.dtype == args.dtype
                     and x.us_device_median)
    if not samples:
        print(f"h23_cost_model: no {version} {args.dtype} rows at {args.commit}", file=sys.stderr)
        return 1
    copy_commit = args.copy_from or args.commit
    copy = copy_rate(r, copy_commit)
    if copy is None:
        print(f"h23_cost_model: no copy rate at {copy_commit} (the sweep ran no decode benchmark; --copy-from "
              "names another sweep of this GPU)", file=sys.stderr)
        return 1
    try:
        tables = [(path, try_table(path.read_text(), args.dtype)) for path in args.trials]
    except (OSError, ValueError) as err:
        parser.error(f"--trials: {err}")
    p = fit(samples, args.dtype, args.sms, copy, rule)
    flags = (f" --version {version}" if version != "h23" else "") + \
        (f" --copy-from {args.copy_from}" if args.copy_from else "") + \
        (" --trials " + " ".join(str(path) for path in args.trials) if args.trials else "")
    print(f"## {version}'s cost model: {r.gpu}, commit {args.commit}, {args.dtype}, {args.sms} SMs\n")
    print(f"Generated by `python experiments/tools/h23_cost_model.py --gpu {args.gpu} --commit {args.commit}"
          f"{flags}`.\n")
    where = "same sweep" if copy_commit == args.commit else f"the sweep at {copy_commit}, same GPU"
    print(f"Copy rate (measured, {where}): {copy:,.0f} GB/s. Fitted: "
          + ", ".join(f"{k} {v:.2f} µs" for k, v in p.items()) + "\n")
    trial, other = NEXT_TRIAL[version]
    print(f"| B | H | T | plan | measured µs | model µs | model / measured | {trial}'s plan | its model µs |")
    print("|---|---|---|---|---|---|---|---|---|")
    errors = []
    for shape, measured in samples:
        launch, alternative = plan(shape, args.sms, rule), plan(shape, args.sms, other)
        model = predict(shape, args.dtype, args.sms, copy, p, rule)
        errors.append(model / measured)
        trial_model = predict(shape, args.dtype, args.sms, copy, p, other)
        print(f"| {shape.B} | {shape.H} | {shape.T} | {launch.name()} | {measured:.1f} | {model:.1f} | "
              f"{model / measured:.2f} | {alternative.name()} | {trial_model:.1f} |")
    logs = [abs(math.log(e)) for e in errors]
    print(f"\n{len(errors)} shapes: model / measured {min(errors):.2f}-{max(errors):.2f}, median absolute error "
          f"{100 * (math.exp(statistics.median(logs)) - 1):.0f}%.")
    for path, table in tables:
        rows = plan_checks(table, version, args.dtype, args.sms, copy, p)
        print(f"\n### The plans of `{path.name}` against {version}'s\n")
        print(f"Measured in the same rounds (the log); the model's times from the fit above ({version}'s rows "
              "alone). Right: the model expects the faster of the two plans.\n")
        print(f"A tie: measured within {100 * TIE_FRACTION:.0f}% or {TIE_US} µs of each other, the rounds' "
              "noise at these sizes.\n")
        print(f"| trial | B | H | T | plans ({version} / trial) | measured µs | model µs | right |")
        print("|---|---|---|---|---|---|---|---|")
        print("\n".join(rows) if rows else "| – | | | | no shape where the plans differ | | | |")
        decided = [row for row in rows if not row.endswith("| tie |")]
        if decided:
            right = sum(row.endswith("| yes |") for row in decided)
            print(f"\nWhere the plans differ by more than a tie, the model picks the faster at {right} of "
                  f"{len(decided)} shapes ({len(rows) - len(decided)} ties).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
