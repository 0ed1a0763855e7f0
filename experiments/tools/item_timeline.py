"""Summarises the per-item timeline that experiments/h10/h10t_1_timeline.patch prints (lines
"TL k block q n clock_start ns_start clock_wg1_done clock_wg2_done", one per work item, after
each launch): where a persistent block's SM time goes, item by item.

    python -m harness call --dtype bfloat16 --B 8 --T 4096 --repeat 2 \\
        t=h10+experiments/h10/h10t_1_timeline.patch > timeline.txt
    python experiments/tools/item_timeline.py timeline.txt [more.txt ...]

Only the last launch in each file is read (its items are the last ones printed). Clock
readings are SM cycles, comparable within a block (one block per SM); the global timer (ns)
places the items of different blocks.

A timeline may also print "TQ k clock_before_q_wait clock_wg0_end" per item
(experiments/h24/h24t_1_item_timeline.patch, where an item's start is the first warpgroup's
clock once the item's Q has landed): then the summary adds how long that warpgroup waited for
the Q, and its own part of the item.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project, when run as a script
from backends import arguments  # noqa: E402

FIELDS = 8  # k, block, q, n, clock_start, ns_start, clock_wg1_done, clock_wg2_done
Q_FIELDS = 3  # k, clock_before_q_wait, clock_wg0_done (optional "TQ" lines)
# Cycles per ns where a block ran one item and its clock cannot be mapped to the global
# timer: an H100's clock under this load (1.76-1.79 GHz in the timelines).
FALLBACK_GHZ = 1.77


def tagged_lines(path: Path, tag: str, count: int) -> list[tuple[int, ...]]:
    """The integers of every line of `path` that starts with `tag`, `count` of them each, in
    file order; a line of that tag with other fields stops the script, naming it."""
    rows = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.startswith(f"{tag} "):
            continue
        fields = line.split()[1:]
        if len(fields) != count or not all(f.lstrip("-").isdigit() for f in fields):
            raise SystemExit(f"{path}:{number}: expected '{tag}' and {count} integers, got {line!r}")
        rows.append(tuple(int(f) for f in fields))
    return rows


def read_last_launch(path: Path) -> list[tuple[int, ...]]:
    rows = tagged_lines(path, "TL", FIELDS)
    if not rows:
        raise SystemExit(f"{path}: no 'TL' lines (was the timeline patch applied?)")
    # Item numbers restart at 0 with each launch.
    starts = [i for i, r in enumerate(rows) if r[0] == 0]
    if not starts:
        raise SystemExit(f"{path}: no line for item 0, so no launch starts here (is the file cut?)")
    return rows[starts[-1]:]


def read_q_waits(path: Path) -> dict[int, tuple[int, int]]:
    """Item k -> (clock before the first warpgroup waited for its Q, that warpgroup's end), from
    the "TQ" lines; a later launch's line for k replaces an earlier one's."""
    return {k: (before, end) for k, before, end in tagged_lines(path, "TQ", Q_FIELDS)}


def _spread(values: Sequence[float]) -> str:
    """'median M, 10% A, 90% B' (the quantiles only from two values on)."""
    text = f"median {statistics.median(values):,.0f}"
    if len(values) >= 2:
        q = statistics.quantiles(values, n=10)
        text += f", 10% {q[0]:,.0f}, 90% {q[-1]:,.0f}"
    return text


def summarise(path: Path) -> None:
    rows = read_last_launch(path)
    by_block: dict[int, list[tuple[int, ...]]] = {}
    for k, block, q, n, c0, ns0, c1, c2 in rows:
        by_block.setdefault(block, []).append((q, k, n, c0, ns0, c1, c2))
    durations, tiles, gaps, busy, last_end = [], [], [], [], []
    for items in by_block.values():
        items.sort()
        busy.append(sum(c2 - c0 for _, _, _, c0, _, _, c2 in items))
        for (_, _, n, c0, _, _, c2) in items:
            durations.append(c2 - c0)
            tiles.append(n)
        for prev, nxt in zip(items, items[1:]):
            gaps.append(nxt[3] - prev[6])  # next start - this item's last products; < 0: overlap
        last_end.append(items[-1][6] - items[0][3])  # the block's span from its first start
    print(f"== {path.name}: {len(rows)} items on {len(by_block)} blocks")
    if len(set(tiles)) > 1:
        mean_n = statistics.fmean(tiles)
        mean_d = statistics.fmean(durations)
        slope = (sum((n - mean_n) * (d - mean_d) for n, d in zip(tiles, durations))
                 / sum((n - mean_n) ** 2 for n in tiles))
        print(f"  item cycles = {mean_d - slope * mean_n:,.0f} + {slope:,.0f} x tiles "
              f"(least squares over the items; {len(set(tiles))} distinct tile counts)")
    else:
        print(f"  item cycles: every item has {tiles[0]} tiles, so no fit (median "
              f"{statistics.median(durations):,.0f})")
    print(f"  cycles per block from its first item's start to its last item's products: "
          f"mean {statistics.fmean(last_end):,.0f}, max {max(last_end):,.0f}")
    print(f"  sum of item durations per block (overlaps count twice): mean {statistics.fmean(busy):,.0f}")
    if len(gaps) >= 2:
        q = statistics.quantiles(gaps, n=10)
        print(f"  next item's start - this item's last products, cycles: median {statistics.median(gaps):,.0f}, "
              f"10% {q[0]:,.0f}, 90% {q[-1]:,.0f}")
    # The global timer places the items of all blocks: each block's clock is mapped to ns
    # through its first and last starts.
    spans = []
    for items in by_block.values():
        first, last = items[0], items[-1]
        ns_per_cycle = ((last[4] - first[4]) / (last[3] - first[3])) if last[3] > first[3] else None
        for (_, k, n, c0, ns0, _, c2) in items:
            spans.append((ns0, ns0 + (c2 - c0) * (ns_per_cycle or 1 / FALLBACK_GHZ), k, n))
    t0, t1 = min(a for a, *_ in spans), max(b for _, b, *_ in spans)
    window = []
    for frac in (0.1, 0.3, 0.5, 0.7, 0.9):
        t = t0 + frac * (t1 - t0)
        ks = [k for a, b, k, _ in spans if a <= t < b]
        window.append(f"{len(ks)} items spanning {max(ks) - min(ks) + 1 if ks else 0}")
    print(f"  in flight at 10/30/50/70/90% of the run: {'; '.join(window)}")
    quarters = []
    for lo in (0.0, 0.25, 0.5, 0.75):
        per_tile = [(b - a) / n for a, b, _, n in spans
                    if n >= 8 and lo <= (a - t0) / (t1 - t0) < lo + 0.25]
        quarters.append(f"{statistics.median(per_tile) / 1000:.2f}" if per_tile else "-")
    print(f"  µs per tile of items of 8 or more tiles, by the quarter of the run they start in: "
          f"{' / '.join(quarters)}")
    if q_waits := read_q_waits(path):
        starts = {k: c0 for k, _, _, _, c0, *_ in rows}
        mine = [k for k in starts if k in q_waits]
        if len(mine) < len(starts):
            raise SystemExit(f"{path}: 'TQ' lines for {len(mine)} of the last launch's {len(starts)} items")
        print(f"  first warpgroup waiting for the item's Q (its wait to the Q landed), cycles: "
              f"{_spread([starts[k] - q_waits[k][0] for k in mine])}")
        print(f"  first warpgroup's part of the item (the Q landed to its last S done), cycles: "
              f"{_spread([q_waits[k][1] - starts[k] for k in mine])}")
    for n in sorted(set(tiles)):
        ds = [d for d, m in zip(durations, tiles) if m == n]
        print(f"    {n:3d} tiles: {len(ds):5d} items, median {statistics.median(ds):9,.0f} cycles, "
              f"per tile {statistics.median(ds) / n:7,.0f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments.OneLineParser(prog="item_timeline.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=arguments.path, help="printed output of `harness call` with the patch")
    args = parser.parse_args(argv)
    for path in args.files:
        if not path.is_file():
            parser.error(f"{path} is a folder, not a file" if path.is_dir() else f"{path}: no such file")
        summarise(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
