"""experiments/tools/row_block_plans.py, the model h13's notes cite: its tile counts are the
kernels' (h12's and h13's row blocks), and it gives the notes' makespans."""
import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def plans():
    return load_script("experiments/tools/row_block_plans.py")


@pytest.mark.parametrize("T,h12,h13", [(256, 4, 3), (512, 9, 8), (1024, 32, 27), (2048, 101, 96), (4096, 384, 363)])
def test_tiles_per_head_are_the_notes(plans, T, h12, h13):
    assert sum(plans.tiles_per_row_block(T, False)) == h12
    assert sum(plans.tiles_per_row_block(T, True)) == h13


@pytest.mark.parametrize("T", [1, 63, 64, 65, 129, 192, 511, 513, 1000, 2047, 4096, 16385])
def test_rows_from_the_end_start_and_end_where_the_kernel_needs(plans, T):
    """h13's row blocks end at T rounded up to 64 and start at most 128 rows before row 0, so
    the first block's last warpgroup always has rows and no block lies wholly past T."""
    lead = plans.lead_rows(T, True)
    blocks = len(plans.tiles_per_row_block(T, True))
    end = blocks * plans.B_R - lead  # one past the last block's last row
    assert lead in (0, 64, 128), f"T={T}: lead {lead}"
    assert end % plans.WARPGROUP_ROWS == 0 and 0 <= end - T < plans.WARPGROUP_ROWS, f"T={T}: ends at {end}"
    assert (plans.WARPGROUPS - 1) * plans.WARPGROUP_ROWS - lead >= 0, f"T={T}: first block has no rows"


def test_h11s_one_wave_rule_is_in_the_plan(plans):
    """B=1 T=1024: L = 3 would make 144 items on 132 SMs; L = 4 makes 120 (h11's notes)."""
    tiles = plans.tiles_per_row_block(1024, False)
    assert plans.split_length(tiles, 12, 132) == 4
    assert len(plans.work_items(1, 1024, 132, False)) == 120


def test_the_makespans_h13s_notes_quote(plans):
    """B=1 T=4096: -5.3% at a start cost of 1.2 tiles; T = 1024 and 2048: no change."""
    def change(T: int) -> float:
        h12, h13 = (plans.greedy(plans.work_items(1, T, 132, end), 132, 1.2) for end in (False, True))
        return h13 / h12 - 1
    assert change(4096) == pytest.approx(-0.053, abs=0.001)
    assert change(2048) == 0 and change(1024) == 0
