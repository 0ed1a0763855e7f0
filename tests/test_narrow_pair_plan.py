"""experiments/tools/narrow_pair_plan.py: the paired narrow plan computes every causal tile once,
and the check catches a mapping that does not."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "tools"))
import narrow_pair_plan as npp  # noqa: E402


@pytest.mark.parametrize("heads", [1, 2, 3, 12, 24])
def test_every_tile_is_computed_once(heads):
    for row_blocks in range(1, 12):
        if heads * row_blocks <= 2 * npp.SLOTS:
            assert npp.coverage_errors(heads, row_blocks) == [], (heads, row_blocks)


def test_b1_t512_pairs_and_cuts_at_four_tiles():
    assert npp.plan(12, 8) == npp.Plan(L=4, paired=1, blocks=132)


def test_a_mapping_that_forgets_the_pairs_second_row_block_is_caught():
    def without_second(x, heads, row_blocks, p):
        return [t for t in npp.block_tiles(x, heads, row_blocks, p) if not (t[1] == 0 and p.paired)]
    errors = npp.coverage_errors(12, 8, decode=without_second)
    assert errors and "computed 0 times" in errors[0], errors
