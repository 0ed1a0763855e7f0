"""How evenly h04's grid, h06's persistent grid and h07's head-major grid spread the causal
work over the SMs: a model, no GPU. Why h06 (a persistent grid) gained nothing at B=8 T=4096
and lost 31% at B=1 T=4096 against h04, and h07 45% there.

Both kernels cut the work into the same items: every (batch, head) x row block x split of
h04's plan (B_r = 192 rows, B_c = 128 keys, three 64-row warpgroups), numbered longest row
block first. An item costs its key tiles plus a fixed start (`--start-cost`, in tiles: the
first Q and K/V loads and a softmax with nothing to overlap).
- h04: one block per item; the hardware hands the next block to whichever SM frees first,
  in block order: greedy list scheduling of longest-first items (close to the optimum).
- h06: one block per SM, item k goes to block k mod (SMs), fixed in advance: round-robin.
- h07: h04's blocks numbered head-major (every row block of head 0, longest first, then head
  1, ...), handed out greedily. `--group G` also models groups of G heads, each group's
  blocks longest-first (G = 1 is h07's order; G = B H is h04's).
The makespan (the busiest SM's tiles) is the kernel's time in tiles.

    python experiments/tools/persistent_schedule.py [--sms 132] [--start-cost 0.5 1.0] [--group 16]
"""
from __future__ import annotations

import argparse
import heapq
import math
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project, when run as a script
from backends import arguments  # noqa: E402

HEADS = 12  # GPT-2 small
MAX_SMS = 1024  # --sms: an H100 and an H200 have 132; the schedules hand work to each (a mistyped 10**9 never ends)
B_R, B_C, WARPGROUP_ROWS, WARPGROUPS = 192, 128, 64, 3  # h04's and h06's tiles
SHAPES = ((1, 512), (1, 4096), (8, 4096))  # (B, T): the shapes whose results the notes explain


def tiles_of_row_block(i: int, T_c: int) -> int:
    """Key tiles row block i walks: up to its last warpgroup's diagonal tile, within T."""
    return min((i * B_R + (WARPGROUPS - 1) * WARPGROUP_ROWS) // B_C + 1, T_c)


def work_items(batch: int, T: int, sms: int) -> list[int | None]:
    """Tiles of each work item in h04's block order (None: a split slot a row block does not
    use), as plan_splits and decode in versions/h06_persistent/attention.cu cut them."""
    T_r, T_c = math.ceil(T / B_R), math.ceil(T / B_C)
    heads = batch * HEADS
    work = sum(tiles_of_row_block(i, T_c) for i in range(T_r))
    longest = tiles_of_row_block(T_r - 1, T_c)
    L = max(math.ceil(heads * work / sms), 2)
    max_splits = 1 if L >= longest else math.ceil(longest / L)
    L = min(L, longest)
    items: list[int | None] = []
    for k in range(heads * T_r * max_splits):
        slot = k // heads
        i, split = T_r - 1 - slot // max_splits, slot % max_splits
        n_i = tiles_of_row_block(i, T_c)
        if split >= math.ceil(n_i / L):
            items.append(None)
            continue
        j_end = n_i - split * L
        items.append(j_end - max(0, j_end - L))
    return items


def grouped(items: Sequence[int | None], heads: int, group: int) -> list[int | None]:
    """The items (in h04's order: item k is slot k // heads of head k % heads) renumbered in
    groups of `group` heads, each group's items in h04's order among its own heads."""
    assert len(items) % heads == 0, "h04's order has the same slots for every head"

    def key(k: int) -> tuple[int, int, int]:
        head, slot = k % heads, k // heads
        return head // group, slot, head % group

    return [items[k] for k in sorted(range(len(items)), key=key)]


def round_robin(items: Sequence[int | None], sms: int, start_cost: float) -> float:
    """h06: item k on SM k mod sms; the busiest SM's load."""
    load = [0.0] * sms
    for k, n in enumerate(items):
        if n is not None:
            load[k % sms] += n + start_cost
    return max(load)


def greedy(items: Sequence[int | None], sms: int, start_cost: float) -> float:
    """h04: each block in order to the SM that frees first (an unused slot's block exits at once)."""
    free_at = [(0.0, sm) for sm in range(sms)]
    for n in items:
        t, sm = heapq.heappop(free_at)
        heapq.heappush(free_at, (t + (n + start_cost if n is not None else 0.0), sm))
    return max(t for t, _ in free_at)


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments.OneLineParser(prog="persistent_schedule.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sms", type=int, default=132, help=f"multiprocessors (H100 SXM and H200: 132; at most "
                                                             f"{MAX_SMS})")
    parser.add_argument("--start-cost", type=float, nargs="+", default=[0.5, 1.0],
                        help="the fixed cost of starting an item, in key tiles (default: 0.5 1.0)")
    parser.add_argument("--group", type=int, default=16,
                        help="heads per group for the grouped head-major order (default: 16)")
    args = parser.parse_args(argv)
    if not 1 <= args.sms <= MAX_SMS or not all(0 <= c < math.inf for c in args.start_cost) or args.group < 1:
        parser.error(f"--sms and --group must be positive (--sms at most {MAX_SMS}) and --start-cost a finite "
                     "number, not negative")
    print(f"makespan in key tiles; h07 = head-major, grouped = groups of {args.group} heads, longest-first in each")
    print("shape          items  start  h04 greedy  h06 round-robin  h07 greedy  grouped  ideal")
    for batch, T in SHAPES:
        heads = batch * HEADS
        items = work_items(batch, T, args.sms)
        real = [n for n in items if n is not None]
        for cost in args.start_cost:
            ideal = (sum(real) + cost * len(real)) / args.sms
            g, r = greedy(items, args.sms, cost), round_robin(items, args.sms, cost)
            h07 = greedy(grouped(items, heads, 1), args.sms, cost)
            gg = greedy(grouped(items, heads, args.group), args.sms, cost)
            print(f"B={batch} T={T:<6d} {len(real):6d} {cost:6.2f} {g:11.1f} {r:16.1f} {h07:11.1f} {gg:8.1f} "
                  f"{ideal:6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
