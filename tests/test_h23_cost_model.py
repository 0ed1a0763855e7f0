"""experiments/tools/h23_cost_model.py: its copy of h23's plan agrees with what h23's source
says of it, and the placement of items on the SMs is list scheduling."""
from __future__ import annotations

import pytest

from harness.study import Shape
from tests.scripts import load_script


@pytest.fixture(scope="module")
def model():
    return load_script("experiments/tools/h23_cost_model.py")


def test_narrow_blocks_up_to_three_waves(model):
    """h23's notes: at B=1, H=12 the narrow blocks take at most three waves up to T = 2,112."""
    narrow = model.plan(Shape(1, 12, 2112), 132)
    assert narrow.narrow and len(narrow.items) == 12 * 33 and narrow.workers == 132
    assert not model.plan(Shape(1, 12, 2113), 132).narrow


def test_short_prompts_at_batch_64_fall_back_to_192_row_blocks_and_h23t_1_keeps_them_narrow(model):
    """B=64 T=64: 768 narrow blocks are over three waves of 132 SMs, so h23 runs 768 items of
    one key tile on the 192-row kernel; h23t_1's two blocks per SM make it 768 <= 792."""
    wide = model.plan(Shape(64, 12, 64), 132)
    assert not wide.narrow and not wide.split and wide.items == (1,) * 768
    short = model.plan(Shape(64, 12, 64), 132, short_blocks=True)
    assert short.narrow and short.short and short.workers == 264
    assert not model.plan(Shape(64, 12, 512), 132, short_blocks=True).short  # T > 256: h23's


def test_a_narrow_blocks_tiles_reach_its_diagonal(model):
    """Row block i of 64 rows (lead 0) walks key tiles 0 .. (64 i + 63) // 128."""
    assert model.narrow_tiles(300) == [1, 1, 2, 2, 3]


def test_items_go_to_the_worker_that_frees_first(model):
    assert model.busiest([4, 3, 3, 2], 2, 0.0, 1.0) == 6.0  # the workers end at 4 + 2 and 3 + 3
    assert model.busiest([5], 8, 0.0, 1.0) == 5.0
    assert model.busiest([1] * 10, 3, 0.0, 2.0) == 8.0  # ceil(10 / 3) = 4 rounds of 2
    assert model.busiest([1, 1], 1, 0.5, 2.0) == pytest.approx(5.0)  # two items of 0.5 + 2
