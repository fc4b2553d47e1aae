"""The switch-time bound ``auto``'s search uses in place of planning every pair."""

import pytest

from hotswitch.backend.sim.setup import Setup
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
