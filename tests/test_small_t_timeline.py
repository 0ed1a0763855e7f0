"""experiments/tools/small_t_timeline.py, which h15's and the experiments' notes quote: it keeps
only each shape's last call, and its medians are the synthetic blocks' readings in µs."""
import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def timeline():
    return load_script("experiments/tools/small_t_timeline.py")


def block_line(block: int, n: int, stored_cycles: int, fields: int = 24) -> str:
    """A 'TS' line: entry at cycle 1,000 and global time 5,000 ns; rows stored
    `stored_cycles` after entry; every other reading absent (-1)."""
    row = [-1] * fields
    row[0], row[1] = n, block
    row[2], row[3] = 5_000, 1_000  # NS_ENTRY, CLK_ENTRY
    row[15], row[16] = 1_000 + stored_cycles, 5_000 + stored_cycles  # CLK_STORED, NS_END (1 GHz)
    return "TS " + " ".join(str(x) for x in [block, *row])


def test_keeps_the_last_call_of_each_shape(timeline, tmp_path, capsys):
    ghz = timeline.GHZ
    first = [block_line(b, 1, 99_999) for b in range(2)]  # a first call, to be replaced
    last = [block_line(0, 1, round(2.0 * ghz * 1e3)), block_line(1, 2, round(4.0 * ghz * 1e3))]
    text = "\n".join(["# B=1 T=64: h14 device time 5.0 us", "# B=1 T=64 call 0", *first,
                      "# B=1 T=64 call 1", *last]) + "\n"
    path = tmp_path / "t.txt"
    path.write_text(text)
    sections = timeline.read(path)
    assert list(sections) == ["B=1 T=64"]
    assert len(sections["B=1 T=64"]) == 2, "the first call's rows should have been replaced"
    timeline.main(["summarise", str(path)])
    out = capsys.readouterr().out
    assert "2 blocks" in out
    assert "n=2 (1 blocks)" in out and "rows stored 4.00" in out  # the longest blocks' steps
    assert "n=1 (1 blocks), µs after entry, median: rows stored 2.00" in out


def test_reads_the_first_patchs_20_fields(timeline, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("# B=1 T=64 call 0\n" + block_line(0, 1, 1_000, fields=20) + "\n")
    assert len(timeline.read(path)["B=1 T=64"][0]) == 20


@pytest.mark.parametrize("text", ["TS 0 1 2 3\n", "# B=1 T=64 call 0\nTS 0 1 2 3\n"])
def test_refuses_a_line_outside_a_call_or_of_the_wrong_width(timeline, tmp_path, text):
    path = tmp_path / "t.txt"
    path.write_text(text)
    with pytest.raises(SystemExit, match="TS"):
        timeline.read(path)
