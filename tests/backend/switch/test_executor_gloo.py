"""Hot switches executed by real gloo processes, checked element by element."""

import pytest

from hotswitch.backend.runtime.spawn import spawn_ranks

from .switch_workers import switch_every_pair, switch_gradients

STRATEGIES = ["dp4", "tp4", "dp2tp2", "tp2pp2", "dp2pp2", "pp4"]


@pytest.mark.parametrize(("nodes", "algorithm"), [(1, "balanced"), (2, "balanced"), (2, "greedy"), (2, "naive")])
def test_every_pair_of_strategies_is_bit_exact_there_and_back(nodes, algorithm):
    results = spawn_ranks(switch_every_pair, 4, "tiny", STRATEGIES, nodes, algorithm)
    assert [bad for bad, _ in results] == [[]] * 4
    digests = [d for _, d in results]
    assert len(digests[0]) == len(STRATEGIES) * (len(STRATEGIES) - 1)
    assert all(d == digests[0] for d in digests), "ranks computed different plans"


@pytest.mark.parametrize(("src", "dst"), [("dp4", "tp2pp2"), ("dp2tp2", "dp4"), ("dp2pp2", "dp2tp2")])
def test_unreduced_gradients_arrive_summed(src, dst):
    assert spawn_ranks(switch_gradients, 4, "tiny", src, dst, 2) == [[]] * 4
