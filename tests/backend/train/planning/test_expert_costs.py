"""What the cost model and ``auto`` make of expert parallelism: the profile's measured
all-to-all and router imbalance exposed per strategy, and a layout with and without its experts
split weighed in either bucket order (no processes), measured on 4 gloo ranks (slow)."""

import pytest

from hotswitch.backend import Strategy
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.planning.auto import auto_plan, bucket_orders
from hotswitch.backend.train.planning.cost import CostModel, ExpertExchange, LinkProfile, Quadratic, StrategyCost

from . import expert_workers

DP4, EP4, DP2TP2, TP4 = (Strategy.parse(s) for s in ("dp4", "ep4", "dp2tp2", "tp4"))
DP2EP2TP2 = Strategy.parse("ep2tp2")


def cost_model(costs: dict[Strategy, StrategyCost], token_budget: int = 1) -> CostModel:
    switches = {(w, a, b): 1e-3 for w in ("params", "grads") for a in costs for b in costs if a != b}
    return CostModel(costs, 1e12, LinkProfile(1e9, 1e-5, 1e9), 0.0, switches, token_budget)


def flat(b: float, a: float = 0.0) -> StrategyCost:
    return StrategyCost(Quadratic(a, b, 0.0), Quadratic(0, 1.0, 0), 0.0, 0.0)


def test_a_layout_with_and_without_its_experts_split_is_weighed_in_either_order():
    assert bucket_orders([DP4, EP4]) == [(EP4, DP4), (DP4, EP4)]  # longest bucket first
    assert bucket_orders([DP4, DP2TP2]) == [(DP2TP2, DP4)]  # tp takes the long ones, as ever
    orders = bucket_orders([DP4, EP4, DP2TP2, DP2EP2TP2])
    assert len(orders) == 4 and all({o[0], o[1]} == {DP2TP2, DP2EP2TP2} for o in orders)


def test_auto_gives_short_sequences_to_wide_ep_where_it_measured_faster_there():
    # ep4 cheaper per token, dearer per attention (L^2): the short bucket is its; the profile's
    # order lists dp4 first, which alone would have sent ep4 the long sequences
    costs = {DP4: flat(1.5), EP4: flat(1.0, a=1e-3)}
    lengths = [64] * 64 + [2048] * 4
    plan, _ = auto_plan(lengths, cost_model(costs), DP4, max_len=2048)
    assert [b.strategy for b in plan.buckets] == [DP4, EP4] and 64 <= plan.buckets[0].above < 2048
    # and where ep measured slower at every length, it is left out
    slower = {DP4: flat(1.0), EP4: flat(1.2)}
    plan, _ = auto_plan(lengths, cost_model(slower), DP4, max_len=2048)
    assert list(plan.strategies) == [DP4]


def test_the_cost_model_exposes_each_ep_strategys_measured_exchange():
    exchange = ExpertExchange((64, 128), (0.01, 0.03), (1.25, 1.5))
    ep = StrategyCost(Quadratic(0, 1e-3, 0), Quadratic(0, 1.0, 0), 0.0, 0.0, overhead=0.02, experts=exchange)
    model = cost_model({DP4: flat(1e-3), EP4: ep}, token_budget=256)
    shown = model.expert_exchanges()
    assert list(shown) == [str(EP4)]  # dp4 splits no experts: nothing to show
    row = shown[str(EP4)]
    assert row["lengths"] == [64, 128] and row["exchange_s"] == [0.01, 0.03] and row["imbalance"] == [1.25, 1.5]
    assert row["share"] == pytest.approx([0.01 / ep.micro_batch_s(4, 64), 0.03 / ep.micro_batch_s(2, 128)])


@pytest.mark.slow
def test_the_imbalance_is_the_busiest_ep_ranks_load_over_the_mean_as_routed():
    results = spawn_ranks(expert_workers.skewed, 4, timeout=300)
    assert all(r == pytest.approx((4.0, 1.0)) for r in results)  # all to one of 4 ranks; an even split


@pytest.mark.slow
def test_a_profile_records_each_ep_strategys_all_to_all_and_imbalance_at_every_length():
    shown = spawn_ranks(expert_workers.profiled, 4, timeout=900)[0]
    ep = [str(Strategy.parse(s)) for s in expert_workers.STRATEGIES if Strategy.parse(s).ep > 1]
    assert sorted(shown) == sorted(ep)
    for name, row in shown.items():
        assert row["lengths"] == expert_workers.LENGTHS, name
        assert all(s > 0 for s in row["exchange_s"]), (name, row)
        assert all(r >= 1.0 for r in row["imbalance"]), (name, row)
        assert all(s > 0 for s in row["share"]), (name, row)
