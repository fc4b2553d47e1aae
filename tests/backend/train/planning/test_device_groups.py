"""Device groups: strategies placed on part of the ranks, packed into side-by-side stages.

Their training is checked against one device by the gradient oracle (``loop/test_gradient_oracle.py``)
and packed (``loop/test_packing_exact.py``); here, how plans name, place and order them.
"""

import pytest

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.layout import param_layout
from hotswitch.backend.models.config import get_config
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.switch.planner import plan_switch
from hotswitch.backend.train.loop.stages import as_stages
from hotswitch.backend.train.planning.dispatch import (
    HotSwitchPlan,
    check_device_groups,
    execution_order,
    instantiation_strategy,
)

S = Strategy.parse


def test_a_group_is_placed_on_its_ranks_and_reads_back():
    group = S("dp2tp2@4-7")
    assert group.is_group and list(group.ranks) == [4, 5, 6, 7]
    assert group.coords(6) == (0, 1, 0, 0) and group.tp_group(6) == (6, 7) and group.dp_group(5) == (5, 7)
    assert group.stage_ranks == ((4, 5, 6, 7),)
    assert S(str(group)) == group and str(S("tp2@2")) == "dp1tp2pp1@2-3"
    assert S("tp2@0-1") != S("tp2"), "a group on ranks 0-1 is not a strategy over a 2-device job"
    with pytest.raises(ValueError, match="outside"):
        group.coords(3)


@pytest.mark.parametrize(
    "text, match",
    [("tp2@1-3", "places 2 devices on ranks 1-3"), ("tp2@a", "cannot parse the ranks"), ("tp2@", "cannot parse")],
)
def test_misplaced_groups_are_refused_naming_the_fix(text, match):
    with pytest.raises(ValueError, match=match):
        S(text)


def test_a_group_must_lie_within_the_devices():
    S("tp2@2-3").check_fits(4)
    with pytest.raises(ValueError, match="needs ranks 3-4 but the cluster has 4 devices"):
        S("tp2@3-4").check_fits(4)
    with pytest.raises(ValueError, match="reach past the plan's 4 devices"):
        HotSwitchPlan.of([("tp4", 100), ("dp2@3-4", 0)])


def test_the_layout_of_a_group_lives_on_its_ranks_only():
    layout = param_layout(get_config("tiny"), S("tp2@2-3"))
    assert {r for p in layout.values() for r in p.state.devices} == {2, 3}


def test_groups_share_one_stage_and_keep_the_master_weights_data_parallel():
    plan = HotSwitchPlan.of([("tp2@0-1", 200), ("dp2@2-3", 0)])
    instantiation = instantiation_strategy(plan.strategies)
    assert instantiation == S("dp4"), "groups alone keep the master weights data-parallel over their ranks"
    order = execution_order(plan.strategies, instantiation, lambda a, b: 0.0)
    assert order == ((S("dp2@2-3"), S("tp2@0-1")), instantiation)


def test_overlapping_groups_and_idle_ranks_are_refused_naming_the_group_and_the_fix():
    with pytest.raises(ValueError, match=r"dp1tp2pp1@0-1 and dp2tp1pp1@1-2 share rank 1.*disjoint ranks"):
        HotSwitchPlan.of([("tp2@0-1", 200), ("dp2@1-2", 0)])
    plan = HotSwitchPlan.of([("tp2@0-1", 200), ("dp1@2", 0)])
    with pytest.raises(ValueError, match=r"leave ranks \[3\] of 4 idle.*place a group on them"):
        check_device_groups(plan.strategies, 4)
    check_device_groups(plan.strategies, 3)
    check_device_groups([S("dp4")], 4)  # no groups: nothing to cover


def test_a_whole_strategy_holds_the_master_weights_beside_groups():
    plan = HotSwitchPlan.of([("tp4", 160), ("tp2@0-1", 64), ("dp2@2-3", 0)])
    assert instantiation_strategy(plan.strategies) == S("tp4")
    order = execution_order(plan.strategies, S("tp4"), lambda a, b: 0.0)
    assert order == ((S("dp2@2-3"), S("tp2@0-1")), S("tp4"))


def test_strategies_over_every_device_cannot_share_a_stage():
    with pytest.raises(ValueError, match="span every device"):
        as_stages([(S("dp4"), S("tp2@0-1"))])
    with pytest.raises(ValueError, match="share rank 1"):
        as_stages([(S("tp2@0-1"), S("dp2@1-2"))])


def test_an_adding_switch_adds_every_slice_and_zeroes_nothing():
    config, cluster = get_config("tiny"), Cluster.local(4)
    plan = plan_switch(param_layout(config, S("tp2@0-1")), param_layout(config, S("dp4")), cluster)
    adding = plan.adding()
    assert all(t.accumulate for t in adding.transfers) and not adding.zero_first
    assert [(t.name, t.box, t.sender, t.receiver) for t in adding.transfers] == [
        (t.name, t.box, t.sender, t.receiver) for t in plan.transfers
    ]
    assert {t.sender for t in plan.transfers} <= {0, 1}, "only the group's ranks hold its gradients"


def test_a_plan_with_strategies_the_cost_model_never_measured_is_refused_naming_them():
    from hotswitch.backend.sim.scenario import Setup
    from hotswitch.backend.train.planning.auto import check_feasible

    plan = HotSwitchPlan.of([("tp2@0-1", 200), ("dp2@2-3", 0)])
    setup = Setup("7b", 4, 1024, [512, 1024])
    whole = setup.cost_model([S("dp4")], S("dp4"))  # a profile of other strategies
    unmeasured = r"\['dp1tp2pp1@0-1', 'dp2tp1pp1@2-3'\] have no profile in this run's cost model.*\(dp4tp1pp1\)"
    with pytest.raises(ValueError, match=unmeasured):
        check_feasible(plan, whole, 1024)
    check_feasible(plan, setup.cost_model(list(plan.strategies), S("dp4")), 1024)  # priced: checked


def test_a_profile_measures_each_group_once_beside_the_group_it_would_train_beside():
    from hotswitch.backend.train.planning.profile import measuring_stages
    from hotswitch.backend.train.planning.side_by_side import group_candidates

    groups = group_candidates(get_config("tiny"), 4)
    stages = measuring_stages([S("dp4"), S("tp4"), *groups])
    assert stages[:2] == [(S("dp4"),), (S("tp4"),)], "a strategy over every device is measured alone"
    measured = [s for stage in stages[2:] for s in stage]
    assert sorted(map(str, measured)) == sorted(map(str, groups)), "every group exactly once"
    for stage in stages[2:]:  # a pair: a group at rank 0 and one on the ranks after it; else a group alone
        assert len(stage) == 1 or (stage[0].first == 0 and stage[1].first == stage[0].world_size), stage
    assert sum(len(stage) == 2 for stage in stages) >= 8, "groups of the same split are paired, not measured alone"
