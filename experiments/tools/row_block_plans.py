"""h12's row blocks against h13's, laid from T's end: key tiles per head, the split plan, and
the busiest SM's tiles when the hardware hands the work items out greedily. A model, no GPU;
h13's notes cite it for B=1, T = 1024, 2048 and 4096.

h12 lays 192-row blocks from row 0, so where 192 does not divide T the last (longest) block
is partial; h13 ends them at T rounded up to 64, so the partial block is the first. Both cut
row blocks into splits of L key tiles as h11's plan does (L the work over the SMs, at least
2, one tile longer where that fits every item in one wave). Each item costs its tiles plus a
fixed start (`--start-cost`, in tiles); blocks go to whichever SM frees first, longest
first (persistent_schedule.greedy; h10's work counter hands items out the same way).

    python experiments/tools/row_block_plans.py [--sms 132] [--start-cost 1.2 3.0]
"""
from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project, when run as a script
from backends import arguments  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from persistent_schedule import B_C, B_R, HEADS, MAX_SMS, WARPGROUP_ROWS, WARPGROUPS, greedy  # noqa: E402

SHAPES = ((1, 1024), (1, 2048), (1, 4096), (8, 1024), (8, 2048), (8, 4096))  # (B, T)


def lead_rows(T: int, from_the_end: bool) -> int:
    """Rows the first row block begins before row 0: 0 for h12, 0/64/128 for h13."""
    if not from_the_end:
        return 0
    return math.ceil(T / B_R) * B_R - math.ceil(T / WARPGROUP_ROWS) * WARPGROUP_ROWS


def tiles_per_row_block(T: int, from_the_end: bool) -> list[int]:
    """Key tiles of each row block (first to last): up to its last warpgroup's diagonal tile."""
    lead, T_c = lead_rows(T, from_the_end), math.ceil(T / B_C)
    return [min((i * B_R - lead + (WARPGROUPS - 1) * WARPGROUP_ROWS) // B_C + 1, T_c)
            for i in range(math.ceil(T / B_R))]


def split_length(tiles: Sequence[int], heads: int, sms: int) -> int:
    """L of plan_splits in versions/h11_one_wave_splits (and h12, h13): at least 2, capped at
    the longest row block (no split), one longer where that fits every item in one wave."""
    longest = max(tiles)

    def items_at(length: int) -> int:
        return heads * sum(math.ceil(n / length) for n in tiles)

    L = max(math.ceil(heads * sum(tiles) / sms), 2)
    if L < longest and items_at(L) > sms and items_at(L + 1) <= sms:
        L += 1
    return min(L, longest)


def work_items(batch: int, T: int, sms: int, from_the_end: bool, num_heads: int = HEADS) -> list[int]:
    """Tiles of each work item, longest row block first (every head's slot before the next
    slot), each row block's splits from its diagonal back; num_heads per sequence."""
    tiles = tiles_per_row_block(T, from_the_end)
    heads = batch * num_heads
    L = split_length(tiles, heads, sms)
    items = []
    for n_i in reversed(tiles):
        for split in range(math.ceil(n_i / L)):
            j_end = n_i - split * L
            items += [j_end - max(0, j_end - L)] * heads
    return items


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments.OneLineParser(prog="row_block_plans.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sms", type=int, default=132, help=f"multiprocessors (H100 SXM and H200: 132; at most "
                                                             f"{MAX_SMS})")
    parser.add_argument("--start-cost", type=float, nargs="+", default=[1.2, 3.0],
                        help="the fixed cost of an item, in key tiles (default: 1.2 3.0)")
    args = parser.parse_args(argv)
    if not 1 <= args.sms <= MAX_SMS or not all(0 <= c < math.inf for c in args.start_cost):
        parser.error(f"--sms must be positive (at most {MAX_SMS}) and --start-cost a finite number, not negative")
    print("busiest SM in key tiles (greedy hand-out); tiles per head and the split length L of each plan")
    print("shape           start   h12: tiles  L  items  makespan   h13: tiles  L  items  makespan  change")
    for batch, T in SHAPES:
        row = []
        for from_the_end in (False, True):
            tiles = tiles_per_row_block(T, from_the_end)
            items = work_items(batch, T, args.sms, from_the_end)
            row.append((sum(tiles), split_length(tiles, batch * HEADS, args.sms), items))
        for cost in args.start_cost:
            spans = [greedy(items, args.sms, cost) for _, _, items in row]
            cells = "   ".join(f"{tiles:10d} {L:2d} {len(items):6d} {span:9.1f}"
                               for (tiles, L, items), span in zip(row, spans))
            print(f"B={batch} T={T:<6d} {cost:6.1f} {cells} {100 * (spans[1] / spans[0] - 1):+6.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
