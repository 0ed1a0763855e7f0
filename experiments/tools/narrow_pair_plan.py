"""The narrow plan of `v28p_1_pair_row_blocks_0_and_1.patch`, mirrored (no GPU): which key
tiles each block of the grid computes, and whether every (head, row block, key tile) of the
causal triangle is computed exactly once.

The patch's launcher cuts row blocks of L tiles and more into two pieces (a cluster of two
blocks), pairs the unsplit ones two to a cluster, and, where it pairs row blocks 1 and 0 of
a head into one block, lowers L by one. This script repeats that arithmetic and the
kernel's block mapping line by line, so that a change to either can be checked here first:

    python experiments/tools/narrow_pair_plan.py --heads 12 --max-row-blocks 11

`v28q_1_pair_by_compile_time_roles.patch` has the same plan and mapping. Both were measured
on the H200 and not adopted (slower at every narrow shape: experiments/v25/README.md, "the
float32 narrow kernel after version 25").
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project, when run as a script
from backends import arguments  # noqa: E402

SLOTS = 132            # SMs of an H100 or H200, one narrow block each
MAX_PIECES = 2         # kMaxPieces
MIN_TILES_SAVED = 2    # kMinTilesSaved (version 28)
PAIR_MIN_TILES = 4     # kPairMinTiles (the patch)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def narrow_blocks(heads: int, row_blocks: int, L: int, paired: int) -> int:
    if L >= row_blocks:
        return heads * row_blocks
    units = heads * (L - paired)  # unsplit row blocks, a pair counted once
    return MAX_PIECES * (heads * (row_blocks - L) + (units + 1) // 2)


@dataclass(frozen=True)
class Plan:
    L: int
    paired: int
    blocks: int


def plan(heads: int, row_blocks: int, slots: int = SLOTS) -> Plan:
    """narrow_plan of the patch (row_blocks = T_n, at most two waves of the SMs)."""
    L = row_blocks
    if heads * row_blocks <= slots:
        while L - 1 >= ceil_div(row_blocks, MAX_PIECES) and narrow_blocks(heads, row_blocks, L - 1, 0) <= slots:
            L -= 1
    if row_blocks - L < MIN_TILES_SAVED:
        L = row_blocks
    paired = 0
    if (L < row_blocks and L - 1 >= max(PAIR_MIN_TILES, ceil_div(row_blocks, MAX_PIECES))
            and narrow_blocks(heads, row_blocks, L - 1, 1) <= slots):
        L, paired = L - 1, 1
    return Plan(L, paired, narrow_blocks(heads, row_blocks, L, paired))


def block_tiles(x: int, heads: int, row_blocks: int, p: Plan) -> list[tuple[int, int, int]]:
    """(head, row block, key tile) computed by block x, as the kernel decodes it."""
    L = p.L
    bh, i, s, pair = x % heads, row_blocks - 1 - x // heads, 0, False
    if L < row_blocks:
        c, rank, split = x // MAX_PIECES, x % MAX_PIECES, heads * (row_blocks - L)
        if c < split:
            bh, i, s = c % heads, row_blocks - 1 - c // heads, rank
        else:
            u = MAX_PIECES * (c - split) + rank
            if u >= heads * (L - p.paired):
                return []  # the idle rank
            bh, i = u % heads, L - 1 - u // heads
            pair = bool(p.paired) and i == 1
    pieces = ceil_div(i + 1, L)
    first = i + 1 if pieces == 1 else (L - 1 if i + 2 - L <= L else L)
    j_end = i + 1 if s == 0 else i + 1 - first
    j_begin = i + 1 - first if s == 0 else 0
    items = [(i, j_begin, j_end)] + ([(0, 0, 1)] if pair else [])
    return [(bh, row, j) for row, begin, end in items for j in range(begin, end)]


def coverage_errors(heads: int, row_blocks: int, decode=block_tiles) -> list[str]:
    """Tiles of the causal triangle computed other than exactly once (empty: the plan is whole)."""
    p = plan(heads, row_blocks)
    seen = Counter(t for x in range(p.blocks) for t in decode(x, heads, row_blocks, p))
    want = {(bh, i, j) for bh in range(heads) for i in range(row_blocks) for j in range(i + 1)}
    errors = [f"{t} computed {seen[t]} times" for t in sorted(want) if seen[t] != 1]
    errors += [f"{t} is not a tile of the triangle" for t in sorted(set(seen) - want)]
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = arguments.OneLineParser(prog="narrow_pair_plan.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heads", type=int, default=12, help="B H (default 12: B=1, GPT-2 small)")
    parser.add_argument("--max-row-blocks", type=int, default=11,
                        help="T_n = ceil(T / 64) from 1 to this (default 11: T up to 704)")
    args = parser.parse_args(argv)
    if args.heads < 1 or args.max_row_blocks < 1:
        parser.error("--heads and --max-row-blocks must be at least 1")
    if problem := arguments.out_of_range("--heads", args.heads, 1, 2 * SLOTS,
                                         "more heads than two per SM are the three-consumer kernel's, not the "
                                         "narrow plan's"):
        parser.error(problem)
    failed = False
    for row_blocks in range(1, args.max_row_blocks + 1):
        if args.heads * row_blocks > 2 * SLOTS:
            break  # beyond the narrow plan: the three-consumer kernel's
        p = plan(args.heads, row_blocks)
        errors = coverage_errors(args.heads, row_blocks)
        failed |= bool(errors)
        print(f"T_n={row_blocks}: L={p.L} paired={p.paired} blocks={p.blocks}: "
              + ("every tile once" if not errors else f"{len(errors)} errors, first: {errors[0]}"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
