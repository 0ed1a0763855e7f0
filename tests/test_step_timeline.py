"""experiments/tools/step_timeline.py and experiments/tools/sass_stalls.py, which h21's notes and the
experiments notes quote: the timeline summary reads only the last launch and recovers known
phase lengths; the SASS reader sums the control bits' fixed stalls of the right function,
region by region."""
import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def timeline():
    return load_script("experiments/tools/step_timeline.py")


@pytest.fixture(scope="module")
def sass():
    return load_script("experiments/tools/sass_stalls.py")


def steps(phases: tuple[int, ...], period: int) -> str:
    """One launch: 3 warpgroups x 6 steps (t = 0, 1, 2 twice), events `phases` apart."""
    lines = []
    for w in range(3):
        for x in range(6):
            start = x * period + w * 100
            events = [start]
            for length in phases:
                events.append(events[-1] + length)
            lines.append(f"TS {w} {x} {x % 3} " + " ".join(map(str, events)))
    return "\n".join(lines) + "\n"


def test_the_summary_reads_the_last_launch_phase_by_phase(timeline, tmp_path, capsys):
    path = tmp_path / "t.txt"
    path.write_text("build output\n" + steps((9, 9, 9, 9, 9, 9, 9), 999)
                    + steps((10, 20, 30, 40, 50, 60, 70), 1_000))
    timeline.main([str(path)])
    out = capsys.readouterr().out
    loop = out.split("the loop's steps")[1].split("an item's first step")[0]
    for label, length in (("wait for the tile", 10), ("wait for the turn", 20), ("issue S", 30),
                          ("softmax", 60), ("wait for P V", 70)):
        line = next(row for row in loop.splitlines() if row.strip().startswith(label))
        assert line.split()[-3:] == [str(length)] * 3, line
    assert "step start to next start        1000    1000    1000" in loop
    assert "block 0, 18 steps" in out  # the first launch's 18 are not counted


@pytest.mark.parametrize("text,message", [
    ("nothing here\n", "no 'TS' lines"),
    ("TS 0 0 0 1 2 3\n", "expected 'TS' and 11 integers"),
    ("TS 1 0 0 1 2 3 4 5 6 7 8\n", "a step before warpgroup 0's first"),
])
def test_bad_timelines_are_refused_with_the_line(timeline, tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(SystemExit, match=message):
        timeline.main([str(path)])


def instruction(address: int, text: str, stall: int) -> str:
    """Two lines of cuobjdump -sass: the instruction and its second word, whose bits 41-44
    (of that word) hold the fixed stall."""
    return (f"        /*{address:04x}*/                   {text} ;   /* 0x000000000000{address:04x} */\n"
            f"                                                         /* 0x{stall << 41:016x} */\n")


def function(name: str, body: list[tuple[str, int]]) -> str:
    text = f"\t\tFunction : {name}\n"
    for index, (code, stall) in enumerate(body):
        text += instruction(16 * index, code, stall)
    return text


def test_fixed_stalls_are_summed_per_region_and_variant(sass, tmp_path, capsys):
    softmax = [("WARPGROUP.DEPBAR.LE gsb0, 0x1", 1), ("FMNMX.FTZ R1, R2, R3, !PT", 2),
               ("MUFU.EX2 R4, R4", 8), ("MUFU.EX2 R5, R5", 8), ("BRA 0x100", 5),
               ("@P0 BRA 0x40", 3), ("FFMA.FTZ R6, R6, R7, R8", 1),
               ("WARPGROUP.DEPBAR.LE gsb0, 0x0", 1)]
    path = tmp_path / "k.sass"
    path.write_text(function("_Z6kernelI6__halfEv", [("MUFU.EX2 R1, R1", 15)])
                    + function("_Z6kernelI13__nv_bfloat16Ev", softmax))
    sass.main([str(path), "--function", "kernel", "--dtype", "bf16"])
    out = capsys.readouterr().out
    # The first variant ends at the unconditional branch; the predicated one does not end it.
    assert "4 instructions, 23 cycles of fixed stalls" in out, out
    assert "2 instructions, 4 cycles of fixed stalls" in out, out
    assert "MUFU.EX2 2 instructions 16 cycles" in " ".join(out.split()), out
    assert "15 cycles" not in out  # the float16 instantiation is not read


def test_the_sass_reader_says_what_it_did_not_find(sass, tmp_path):
    path = tmp_path / "k.sass"
    path.write_text(function("_Z6kernelI6__halfEv", [("FADD R1, R1, R2", 1)]))
    with pytest.raises(SystemExit, match="no function matching 'other'"):
        sass.main([str(path), "--function", "other"])
    with pytest.raises(SystemExit, match="no region from"):
        sass.main([str(path), "--function", "kernel", "--dtype", "f16"])


def test_a_missing_file_is_a_usage_error(timeline, sass, tmp_path, capsys):
    for script in (timeline, sass):
        with pytest.raises(SystemExit) as stop:
            script.main([str(tmp_path / "missing.txt")])
        assert stop.value.code == 2
        assert "missing.txt: no such file" in capsys.readouterr().err
