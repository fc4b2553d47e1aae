"""The step floor is below every plan's step and is each sequence at its fastest layout."""

import pytest

from hotswitch.backend import Strategy
from hotswitch.backend.sim.contenders import group_candidates, sim_candidates
from hotswitch.backend.sim.datasets import batch_lengths
from hotswitch.backend.sim.floor import step_floor
from hotswitch.backend.sim.paper.compare import compare
from hotswitch.backend.sim.scenario import Setup


@pytest.fixture(scope="module")
def comparison():
    setup = Setup("7b", 8, 16384, batch_lengths("commoncrawl", 16384, size=128))
    return compare(setup, model_name="7b", side_by_side=True)


def test_no_contender_of_a_setting_steps_below_its_floor(comparison):
    setup = comparison.setup
    floor = step_floor(setup, [*sim_candidates(setup), *group_candidates(setup)])
    ran = [*comparison.statics, *comparison.hot.values(), comparison.auto, comparison.auto_groups]
    steps = [c.step_s for c in ran if c.step is not None]
    assert len(steps) > 3 and comparison.auto_groups.step is not None
    assert 0 < floor < min(steps)
    assert floor > 0.5 * comparison.auto_groups.step_s, "a floor, not zero: the compute is in it"


def test_the_floor_is_the_batch_s_least_work_or_its_longest_sequence_alone():
    dp8, tp8 = Strategy(dp=8), Strategy(tp=8)
    many = Setup("7b", 8, 4096, [1024] * 6 + [4096] * 2)
    cost = many.exact_model(many.cost_model([dp8, tp8], tp8))  # tp8's master share: the roomiest
    work = 6 * min(cost.sequence_s(s, 1024) for s in (dp8, tp8)) + 2 * min(cost.sequence_s(s, 4096) for s in (dp8, tp8))
    alone = min(cost.strategies[s].micro_batch_s(1, 4096) for s in (dp8, tp8))
    assert work > alone, "eight sequences on eight devices: the work bounds the step"
    assert step_floor(many, [dp8, tp8]) == pytest.approx(work)
    assert step_floor(many, [dp8, tp8]) <= 6 * cost.sequence_s(dp8, 1024) + 2 * cost.sequence_s(dp8, 4096)
    one = Setup("7b", 8, 4096, [4096] + [128] * 4)
    assert step_floor(one, [dp8, tp8]) == pytest.approx(alone), "one long sequence: no step ends before it"


def test_a_length_no_layout_holds_is_named():
    setup = Setup("13b", 8, 32768, [32768])
    with pytest.raises(ValueError, match="no candidate layout holds a sequence of 32768 tokens on 8 devices"):
        step_floor(setup, [Strategy(dp=8)])
