"""The kernel benchmark's rule for R (calls per graph replay) and the number of replays."""
import pytest

from harness.device_timing import MAX_REPS, MIN_REPLAYS, repetitions

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
