"""experiments/tools/item_timeline.py, which h10's notes quote: it reads only the last launch of a
file and recovers a known per-item cost from synthetic timeline lines."""
import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def timeline():
    return load_script("experiments/tools/item_timeline.py")


def synthetic(fixed: int, per_tile: int, first_launch_per_tile: int) -> str:
    """Two launches of 4 blocks x 3 items; only the second has the given cost."""
    lines = []
    for cost in (first_launch_per_tile, per_tile):
        k = 0
        for block in range(4):
            clock = 1_000
            for q, n in enumerate((8, 4, 2)):
                duration = fixed + cost * n
                lines.append(f"TL {k} {block} {q} {n} {clock} {clock // 2} {clock + duration - 5} "
                             f"{clock + duration}")
                clock += duration - 300  # the next item starts 300 cycles before this one ends
                k += 1
    return "\n".join(lines) + "\n"


def test_recovers_the_last_launchs_cost(timeline, tmp_path, capsys):
    path = tmp_path / "t.txt"
    path.write_text("build output\n" + synthetic(fixed=3_000, per_tile=2_700, first_launch_per_tile=9_999))
    assert timeline.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "12 items on 4 blocks" in out
    assert "item cycles = 3,000 + 2,700 x tiles" in out, out
    assert "median -300" in out, out


def test_a_file_without_timeline_lines_says_so(timeline, tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("no timeline here\n")
    with pytest.raises(SystemExit, match="no 'TL' lines"):
        timeline.main([str(path)])


@pytest.mark.parametrize("text,message", [
    ("TL 0 1 2\n", "expected 'TL' and 8 integers"),
    ("TL 0 0 0 2 10 5 x 20\n", "expected 'TL' and 8 integers"),
    ("TL 3 0 0 2 10 5 15 20\n", "no line for item 0"),
])
def test_malformed_timelines_say_what_is_wrong(timeline, tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(SystemExit, match=message):
        timeline.main([str(path)])


def test_one_item_of_one_size_is_summarised_without_a_fit(timeline, tmp_path, capsys):
    path = tmp_path / "one.txt"
    path.write_text("TL 0 0 0 4 1000 500 4900 5000\n")
    assert timeline.main([str(path)]) == 0
    assert "every item has 4 tiles, so no fit (median 4,000)" in capsys.readouterr().out


def test_q_wait_lines_add_the_first_warpgroups_wait_and_part(timeline, tmp_path, capsys):
    """h24t_1's "TQ" lines: each item's start minus the clock before the Q wait, and the first
    warpgroup's end minus the start; a launch's items without them are refused."""
    text = synthetic(fixed=3_000, per_tile=2_700, first_launch_per_tile=9_999)
    starts = {int(line.split()[1]): int(line.split()[5]) for line in text.splitlines()}  # the last launch's
    q_lines = [f"TQ {k} {start - 400 - 10 * k} {start + 1_500}" for k, start in starts.items()]
    path = tmp_path / "t.txt"
    path.write_text(text + "\n".join(q_lines) + "\n")
    assert timeline.main([str(path)]) == 0
    out = capsys.readouterr().out
    waits = sorted(400 + 10 * k for k in starts)
    assert f"waiting for the item's Q (its wait to the Q landed), cycles: median {(waits[5] + waits[6]) / 2:,.0f}" in out
    assert "(the Q landed to its last S done), cycles: median 1,500" in out, out
    path.write_text(text + "\n".join(q_lines[:5]) + "\n")
    with pytest.raises(SystemExit, match="'TQ' lines for 5 of the last launch's 12 items"):
        timeline.main([str(path)])
    path.write_text(text + "TQ 1 2\n")
    with pytest.raises(SystemExit, match="expected 'TQ' and 3 integers"):
        timeline.main([str(path)])
