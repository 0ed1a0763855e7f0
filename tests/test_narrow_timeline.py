"""experiments/tools/narrow_timeline.py, which versions 22-24's notes quote: it keeps the last
call's blocks, and its step and split columns are differences of the recorded cycles."""
import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def timeline():
    return load_script("experiments/tools/narrow_timeline.py")


def ts_line(block: int, readings: dict[int, int], entry: int = 1_000) -> str:
    row = [0] * 80
    row[0] = entry
    for field, value in readings.items():
        row[field] = value
    return "TS " + " ".join(str(x) for x in [block, *row])


def two_step_block(block: int, entry: int = 1_000) -> str:
    """A block of 2 tiles: step 0 done at +500; step 1's waits at +600, S at +1,500, softmax
    at +2,300, P V at +2,400; the producer's tile 1 landed at +300, K split in 200 cycles
    after its release at +310, V in 150 after its release at +520."""
    e = entry
    return ts_line(block, {1: 2, 5: e + 500, 6: e + 600, 7: e + 1_500, 8: e + 2_300, 9: e + 2_400,
                           38: e + 3_000, 39: e + 3_500, 45: e + 300, 46: e + 310, 47: e + 510,
                           48: e + 520, 49: e + 670}, entry=e)


def test_steps_and_splits_are_differences_of_the_readings(timeline):
    [block] = timeline.last_call([two_step_block(0)])
    assert timeline.step_rows(block) == [(1, 100, 900, 800, 100)]
    rows = timeline.producer_rows(block)
    assert rows[1] == (1, 300, 200, 150)
    assert rows[0] == (0, None, None, None)  # tile 0 not recorded in this synthetic block


def test_keeps_only_the_last_call(timeline):
    first_call = [ts_line(0, {1: 9}), ts_line(1, {1: 9})]
    last_call = [two_step_block(0, entry=50_000), two_step_block(1, entry=60_000)]
    blocks = timeline.last_call(["# call 0", *first_call, "# call 1", *last_call])
    assert [b.index for b in blocks] == [0, 1]
    assert all(b.tiles == 2 for b in blocks)
    assert blocks[1].at(39) == 3_500  # relative to its own entry


def test_bad_input_is_refused_with_a_message(timeline, tmp_path, capsys):
    with pytest.raises(ValueError, match="no 'TS' lines"):
        timeline.last_call(["nothing here"])
    with pytest.raises(ValueError, match="readings"):
        timeline.last_call(["TS 0 1 2 3"])
    path = tmp_path / "t.txt"
    path.write_text(two_step_block(0) + "\n")
    assert timeline.main([str(path), "--blocks", "7"]) == 2
    assert "block 7 is not in the recording" in capsys.readouterr().err
    assert timeline.main([str(path)]) == 0
    assert "step 0 done at 500" in capsys.readouterr().out


def test_overview_groups_blocks_by_tiles_and_role_and_names_the_last(timeline, tmp_path, capsys):
    e = 1_000
    whole = ts_line(0, {1: 2, 3: e + 400, 39: e + 9_000, 40: e + 300}, entry=e)
    piece_0 = ts_line(1, {1: 2, 3: e + 500, 35: e + 7_000, 37: e + 8_000, 39: e + 9_500,
                          40: e + 350}, entry=e)
    piece_1 = ts_line(2, {1: 2, 3: e + 450, 35: e + 6_000, 36: e + 7_400, 40: e + 320}, entry=e)
    blocks = timeline.last_call([whole, piece_0, piece_1])
    assert [timeline.role(b) for b in blocks] == ["whole", "piece 0", "piece 1"]
    assert [timeline.end(b) for b in blocks] == [9_000, 9_500, 7_400]
    text = timeline.overview(blocks)
    assert text.startswith("3 blocks; the last to end: block 1 (2 tiles, piece 0) at 9500 cycles")
    [piece_1_row] = [line for line in text.splitlines() if "piece 1" in line]
    assert piece_1_row.split()[-5:] == ["1400", "/", "1400", "/", "1400"]  # 7,400 - 6,000
    assert timeline.spread([None, 3, 1, 2]) == "1 / 2 / 3"
    assert timeline.spread([None]) == "-"
    path = tmp_path / "t.txt"
    path.write_text("\n".join([whole, piece_0, piece_1]) + "\n")
    assert timeline.main([str(path), "--overview"]) == 0
    assert "the last to end: block 1" in capsys.readouterr().out
