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
    short = model.plan(Shape(64, 12, 64), 132, model.RULES["h24"])
    assert short.narrow and short.short and short.workers == 264
    assert not model.plan(Shape(64, 12, 512), 132, model.RULES["h24"]).short  # T > 256: h23's


def test_a_narrow_blocks_tiles_reach_its_diagonal(model):
    """Row block i of 64 rows (lead 0) walks key tiles 0 .. (64 i + 63) // 128."""
    assert model.narrow_tiles(300) == [1, 1, 2, 2, 3]


def test_items_go_to_the_worker_that_frees_first(model):
    assert model.busiest([4, 3, 3, 2], 2, 0.0, 1.0) == 6.0  # the workers end at 4 + 2 and 3 + 3
    assert model.busiest([5], 8, 0.0, 1.0) == 5.0
    assert model.busiest([1] * 10, 3, 0.0, 2.0) == 8.0  # ceil(10 / 3) = 4 rounds of 2
    assert model.busiest([1, 1], 1, 0.5, 2.0) == pytest.approx(5.0)  # two items of 0.5 + 2


def test_the_trials_rules_are_their_patches_plans(model):
    """experiments/h24: h24w_1 moves B=2 and 4 at T=512 (192 and 384 narrow blocks: one to three
    waves of one per SM) to the short form and nothing else; h24u_1 every narrow T <= 512;
    h24v_1 lets short blocks take six waves (B=32 T=256: 1,536 blocks)."""
    rules = model.RULES
    for B in (2, 4):
        assert model.plan(Shape(B, 12, 512), 132, rules["h24w"]).short
        assert not model.plan(Shape(B, 12, 512), 132, rules["h24"]).short
    assert not model.plan(Shape(1, 12, 512), 132, rules["h24w"]).short  # 96 blocks: under one wave
    assert model.plan(Shape(1, 12, 512), 132, rules["h24u"]).short
    assert not model.plan(Shape(8, 12, 512), 132, rules["h24w"]).narrow  # 768: 192-row blocks
    assert model.plan(Shape(8, 12, 512), 132, rules["h24u"]).short
    six = model.plan(Shape(32, 12, 256), 132, rules["h24v"])
    assert six.short and len(six.items) == 1536 and not model.plan(Shape(32, 12, 256), 132, rules["h24"]).narrow


def try_log(model, times: dict[str, list[float]]) -> str:
    """A `harness try --shapes grid` log's final table (labels as try prints them: no H)."""
    names = list(times)
    lines = ["device time, µs, bfloat16: median of 2 round(s) (ratio to sdpa-cudnn of the same rounds)",
             "       shape " + " ".join(f"{n:>15}" for n in names)]
    for i, s in enumerate(model.GRID_SHAPES):
        lines.append(f"{f'B={s.B} T={s.T}':>12} " + " ".join(f"{times[n][i]:>8.1f} (1.00)" for n in names))
    return "\n".join(lines) + "\n"


def test_a_try_table_is_read_in_grid_order_and_a_short_one_is_refused(model):
    n = len(model.GRID_SHAPES)
    text = try_log(model, {"h24": [float(i + 1) for i in range(n)], "h24w": [2.0 * (i + 1) for i in range(n)]})
    table = model.try_table(text, "bfloat16")
    last = model.GRID_SHAPES[-1]  # xl, B=16 T=1024: its label is B=16 T=1024, as medium's and large's
    assert table["h24"][last] == float(n) and table["h24w"][model.GRID_SHAPES[0]] == 2.0
    with pytest.raises(ValueError, match="not the grid's"):
        model.try_table("\n".join(text.splitlines()[:-1]), "bfloat16")


def test_an_adopted_trial_is_read_as_its_version(model):
    """Log 2026-11-27_21 measured h24's code as the trial h23t: its column is h24's, so that the
    plans of h23 and h24 it measured in the same rounds are checked as such."""
    n = len(model.GRID_SHAPES)
    table = model.try_table(try_log(model, {"h23": [1.0] * n, "h23t": [2.0] * n}), "bfloat16")
    assert set(table) == {"h23", "h24"} and table["h24"][model.GRID_SHAPES[0]] == 2.0


def test_plan_checks_compare_only_where_the_plans_differ_and_call_small_gaps_ties(model):
    """h24w's plan differs from h24's at B=2 and B=4, T=512 alone; a gap under 5% is a tie."""
    n = len(model.GRID_SHAPES)
    index = {s: i for i, s in enumerate(model.GRID_SHAPES)}
    ours = [10.0] * n
    theirs = list(ours)
    theirs[index[Shape(4, 12, 512)]] = 7.0  # the trial clearly faster
    theirs[index[Shape(2, 12, 512)]] = 9.8  # 2% faster: a tie
    table = model.try_table(try_log(model, {"h24": ours, "h24w": theirs}), "bfloat16")
    p = {"t0": 1.0, "s1": 3.0, "s3": 3.5, "c1": 0.7, "c3": 1.2, "t_merge": 8.0, "s_s": 4.0, "c_s": 0.7}
    rows = model.plan_checks(table, "h24", "bfloat16", 132, 3000.0, p)
    assert [r.split(" | ")[1:4] for r in rows] == [["2", "12", "512"], ["4", "12", "512"]], rows
    assert rows[0].endswith("| tie |")
    faster = model.predict(Shape(4, 12, 512), "bfloat16", 132, 3000.0, p, model.RULES["h24w"]) < \
        model.predict(Shape(4, 12, 512), "bfloat16", 132, 3000.0, p, model.RULES["h24"])
    assert rows[1].endswith("| yes |" if faster else "| **no** |")
