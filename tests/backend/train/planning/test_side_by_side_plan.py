"""``auto``'s side-by-side search: two device groups, the bound between them balancing their
predicted compute, the pair with the least predicted step."""

import bisect

import pytest

from hotswitch.backend.sim.contenders import group_candidates
from hotswitch.backend.sim.datasets import batch_lengths
from hotswitch.backend.sim.scenario import Setup
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan
from hotswitch.backend.train.planning.side_by_side import (
    balanced_bound,
    group_pairs,
    group_splits,
    mixed_plan,
    side_by_side_plan,
)

CONTEXT = 16384
LENGTHS = batch_lengths("commoncrawl", CONTEXT, size=128)
DP8 = Strategy(dp=8)


@pytest.fixture(scope="module")
def cost():
    setup = Setup("7b", 8, CONTEXT, LENGTHS, planned_switches=False)
    return setup.cost_model(group_candidates(setup), DP8)


def test_the_world_splits_in_halves_and_quarters_the_long_group_first():
    assert group_splits(8) == [2, 4, 6]
    assert group_splits(2) == [1]
    assert group_splits(1) == []


def test_every_pair_splits_the_world_and_the_long_group_starts_at_rank_zero(cost):
    pairs = list(group_pairs(cost, 8, LENGTHS, CONTEXT))
    assert pairs, "some groups are on the Pareto front of their ranks"
    for long, short in pairs:
        assert long.first == 0 and short.first == long.world_size
        assert long.world_size + short.world_size == 8


def test_the_bound_makes_the_slower_group_as_fast_as_any_bound_does(cost):
    ordered = sorted(LENGTHS)
    long, short = Strategy.parse("tp4@0-3"), Strategy.parse("dp2tp2@4-7")

    def slower(bound):
        split = bisect.bisect_right(ordered, bound)
        return max(
            cost.group_s(long, ordered[split:]) + cost.sync_s(long),
            cost.group_s(short, ordered[:split]) + cost.sync_s(short),
        )

    bound = balanced_bound(ordered, cost, long, short, CONTEXT)
    assert bound is not None and ordered[0] <= bound < ordered[-1]
    assert cost.fits(short, bound), "the short group holds the longest sequence it is sent"
    every = [n for n in sorted(set(ordered[:-1])) if cost.fits(short, n)]
    assert slower(bound) == pytest.approx(min(slower(n) for n in every))


def test_the_plan_is_the_fastest_pair_and_groups_beat_the_same_layouts_over_every_device(cost):
    plan, predicted = side_by_side_plan(LENGTHS, cost, DP8, CONTEXT)
    assert [s.is_group for s in plan.strategies] == [True, True]
    assert predicted == pytest.approx(cost.step_s(plan, LENGTHS, DP8))
    for long, short in group_pairs(cost, 8, LENGTHS, CONTEXT):  # no pair does better at its own best bound
        if not cost.fits(long, CONTEXT):
            continue
        bound = balanced_bound(sorted(LENGTHS), cost, long, short, CONTEXT)
        if bound is not None:
            other = HotSwitchPlan.of([(long, bound), (short, 0)])
            assert predicted <= cost.step_s(other, LENGTHS, DP8) + 1e-9


def test_no_pair_holds_the_context_then_there_is_no_plan():
    setup = Setup("7b", 2, CONTEXT, LENGTHS, planned_switches=False)  # one device cannot hold 7B at 16K
    cost = setup.cost_model(group_candidates(setup), Strategy(dp=2))
    assert side_by_side_plan(LENGTHS, cost, Strategy(dp=2), CONTEXT) is None


def test_a_mixture_keeps_a_sequential_bucket_for_the_longest_and_groups_for_the_rest():
    setup = Setup("7b", 8, CONTEXT, LENGTHS, planned_switches=False)
    tp8 = Strategy.parse("tp8sp")
    cost = setup.cost_model([*group_candidates(setup), tp8], tp8)
    first = HotSwitchPlan.of([(tp8, 8192), ("dp8", 0)]).buckets[0]
    plan, predicted = mixed_plan(LENGTHS, cost, tp8, CONTEXT, first)
    assert plan.buckets[0] == first and [s.is_group for s in plan.strategies] == [False, True, True]
    assert plan.buckets[1].above < 8192, "the groups share the sequences up to the bucket's bound"
    assert predicted == pytest.approx(cost.step_s(plan, LENGTHS, tp8))
    rest = [n for n in LENGTHS if n <= 8192]
    groups, _ = side_by_side_plan(rest, cost, tp8, 8192)
    assert [b.strategy for b in plan.buckets[1:]] == list(groups.strategies), "the best pair for the rest"


def test_the_trainers_auto_takes_groups_where_they_are_predicted_faster_and_buckets_elsewhere():
    """``best_plan`` (the trainer's ``auto`` with ``side_by_side``) over the trainer's own
    candidates and groups (``auto_strategies``): two long documents among many short ones go to a
    group beside the rest; a batch of equal lengths gains nothing from groups and stays sequential."""
    from hotswitch.backend.train.planning.auto import auto_plan
    from hotswitch.backend.train.planning.dispatch import instantiation_strategy
    from hotswitch.backend.train.planning.side_by_side import auto_strategies, best_plan

    for lengths, grouped in (([8192] * 2 + [512] * 200, True), ([2048] * 64, False)):
        setup = Setup("7b", 8, 8192, lengths, planned_switches=False)
        strategies = auto_strategies(setup.config, 8, 8192, False, side_by_side=True)
        whole = [s for s in strategies if not s.is_group]
        instantiation = instantiation_strategy(whole)
        plan, predicted = best_plan(lengths, setup.cost_model(strategies, instantiation), instantiation, 8192)
        _, sequential = auto_plan(lengths, setup.cost_model(whole, instantiation), instantiation, 8192)
        assert any(s.is_group for s in plan.strategies) == grouped, plan
        assert predicted < sequential if grouped else predicted == pytest.approx(sequential), (plan, sequential)
