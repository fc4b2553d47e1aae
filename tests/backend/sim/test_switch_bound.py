"""The switch-time bound ``auto``'s search uses in place of planning every pair."""

import pytest

from hotswitch.backend.sim.scenario import Setup
from hotswitch.backend.strategy import Strategy


def test_the_bound_is_near_the_planned_parameter_switch():
    setup = Setup("7b", 16, 4096, [100])
    switches = setup.switches
    pairs = [("dp2tp4pp2", "dp16"), ("dp16", "dp4tp4"), ("dp2tp8", "dp4tp2pp2")]
    switches.allow([Strategy.parse(s) for pair in pairs for s in pair])
    for src, dst in pairs:
        key = ("params", Strategy.parse(src), Strategy.parse(dst))
        planned = switches[key]
        switches.estimate = True
        bound = switches[key]
        switches.estimate = False
        assert bound == pytest.approx(planned, rel=0.5), (src, dst)  # an estimate: even-layer shards


def test_a_rank_already_holding_its_destination_shard_receives_nothing():
    setup = Setup("7b", 8, 4096, [100], planned_switches=False)
    setup.switches.allow([Strategy.parse("dp8"), Strategy.parse("dp4pp2")])
    assert setup.switches[("params", Strategy.parse("dp4pp2"), Strategy.parse("dp8"))] > 0.0
    setup.switches.allow([Strategy.parse("dp4tp2"), Strategy.parse("dp2tp2pp2")])
    assert setup.switches[("params", Strategy.parse("dp8"), Strategy.parse("dp4tp2"))] == 0.0  # dp8 holds all


def test_device_groups_bound_their_switches_like_strategies_over_every_device():
    # parameters into a group: near the plan; gradients out of one into a dp-partial layout: a
    # lower bound, as for strategies over every device (the planner spreads the regions over
    # the replicas; the bound lets each stay where it is)
    setup = Setup("7b", 16, 4096, [100])
    switches = setup.switches
    pairs = [
        ("params", "dp16", "tp4@0-3"),
        ("params", "dp2tp4pp2", "dp2tp4@8-15"),
        ("grads", "tp8@0-7", "dp16"),
        ("grads", "dp2tp4@8-15", "dp2tp4pp2"),
        ("grads", "dp2tp8", "dp16"),  # the same holds without groups
    ]
    switches.allow([Strategy.parse(s) for _, *pair in pairs for s in pair])
    for what, src, dst in pairs:
        key = (what, Strategy.parse(src), Strategy.parse(dst))
        planned = switches[key]
        switches.estimate = True
        bound = switches[key]
        switches.estimate = False
        if what == "params":
            assert bound == pytest.approx(planned, rel=0.5), (what, src, dst)
        else:
            assert 0 < bound <= planned * (1 + 1e-9), (what, src, dst)
