"""The kernel benchmark's rule for R (calls per graph replay) and the number of replays, and
how its rounds are ordered and pooled."""
import pytest

from harness.bench_kernels import in_rounds
from harness.device_timing import MAX_REPS, MIN_REPLAYS, CallTiming, Repetitions, alternating, pooled, repetitions

FLUSH_S = 35e-6  # a 100 MB write on an H100


@pytest.mark.parametrize("call_s,reps,replays", [
    (10e-6, MAX_REPS, 10),  # GPT-2's batch-1 calls: many calls per replay
    (6e-3, 1, 6),  # sdpa-efficient at B=8, T=4096
    (265e-3, 1, MIN_REPLAYS),  # v01 at B=8, T=4096: one call per replay, never fewer than 3 replays
])
def test_repetitions_follow_the_stated_rule(call_s, reps, replays):
    plan = repetitions(call_s, FLUSH_S)
    assert (plan.reps, plan.replays) == (reps, replays)


def test_every_measurement_costs_about_the_same_gpu_time():
    costs = [(lambda p: p.reps * p.replays * (t + FLUSH_S))(repetitions(t, FLUSH_S)) for t in (50e-6, 200e-6, 1e-3)]
    assert max(costs) / min(costs) < 1.5, costs


def timing(device: tuple[float, ...] | None, calls: tuple[float, ...] = (20.0,), not_captured: str | None = None,
           plan: Repetitions = Repetitions(50, 10)) -> CallTiming:
    return CallTiming(plan, device, calls, not_captured)


def test_pooled_takes_every_replay_of_every_round():
    one = pooled([timing((10.0, 11.0)), timing((30.0,)), timing((12.0, 13.0))])
    assert one.us_device == (10.0, 11.0, 30.0, 12.0, 13.0)
    assert one.us_device_median == 12.0  # the outlying round moves the median by one replay, not by a third
    assert one.us_call == (20.0, 20.0, 20.0)
    assert one.rounds == 3 and one.repetitions == Repetitions(50, 10)


def test_pooled_has_no_device_time_unless_every_round_has_one():
    one = pooled([timing((10.0,)), timing(None, not_captured="not capturable (RuntimeError: x)")])
    assert one.us_device is None and one.us_device_median is None
    assert one.not_captured == "not capturable (RuntimeError: x)"


def test_pooled_refuses_nothing_to_pool():
    with pytest.raises(ValueError, match="at least one"):
        pooled([])


def test_alternating_reverses_every_other_round():
    names = ["sdpa-cudnn", "h10", "h11"]
    assert [alternating(names, r) for r in range(3)] == [names, names[::-1], names]
    assert names == ["sdpa-cudnn", "h10", "h11"]  # the caller's list is left as it was


def test_in_rounds_times_each_backend_once_per_round_in_alternating_order():
    calls = []

    def time_one(name: str, plan: Repetitions | None) -> CallTiming:
        calls.append((name, plan))
        return timing((float(len(calls)),), plan=plan or Repetitions(len(calls), 10))

    combined = in_rounds(["a", "b"], 3, time_one)
    assert [name for name, _ in calls] == ["a", "b", "b", "a", "a", "b"]
    # the first round sizes each backend's plan; later rounds reuse it
    assert [plan for _, plan in calls] == [None, None, Repetitions(2, 10), Repetitions(1, 10), Repetitions(1, 10),
                                           Repetitions(2, 10)]
    assert combined["a"].us_device == (1.0, 4.0, 5.0) and combined["a"].rounds == 3
    assert combined["b"].us_device == (2.0, 3.0, 6.0) and combined["b"].repetitions == Repetitions(2, 10)
