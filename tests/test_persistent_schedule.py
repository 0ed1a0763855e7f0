"""experiments/persistent_schedule.py, the model h06's notes cite: its work items are the
kernels' (counts from h04's plan), and it reproduces the notes' table."""
import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "experiments" / "persistent_schedule.py"


@pytest.fixture(scope="module")
def schedule():
    spec = importlib.util.spec_from_file_location("persistent_schedule", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("batch,T,items,tiles", [(1, 512, 60, 108), (1, 4096, 264, 4608), (8, 4096, 2112, 36864)])
def test_work_items_are_h04s(schedule, batch, T, items, tiles):
    """B H row blocks (x splits); the causal key tiles of 192-row blocks over 128-key tiles."""
    real = [n for n in schedule.work_items(batch, T, 132) if n is not None]
    assert (len(real), sum(real)) == (items, tiles)


def test_round_robin_is_what_costs_h06_at_b1_t4096(schedule):
    items = schedule.work_items(1, 4096, 132)
    ratio = schedule.round_robin(items, 132, 1.0) / schedule.greedy(items, 132, 1.0)
    assert 1.35 < ratio < 1.40, f"h06 / h04 at B=1 T=4096: {ratio:.2f}, the notes say 1.38"


def test_a_bad_argument_is_one_line(schedule, capsys):
    with pytest.raises(SystemExit) as stopped:
        schedule.main(["--sms", "0"])
    assert stopped.value.code == 2 and "--sms must be positive" in capsys.readouterr().err
