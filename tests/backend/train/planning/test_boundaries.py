"""Searches of one batch under cost models that differ in memory share their results
(``planning.boundaries.Shared``) and find exactly what each finds alone."""

from hotswitch.backend import Strategy
from hotswitch.backend.train.planning.auto import auto_plan
from hotswitch.backend.train.planning.boundaries import Shared
from hotswitch.backend.train.planning.cost import CostModel, LinkProfile, Quadratic, StrategyCost

DP4, DP2TP2, TP4 = (Strategy.parse(s) for s in ("dp4", "dp2tp2", "tp4"))
LENGTHS = [10] * 40 + [30] * 12 + [60] * 10 + [100] * 8 + [900] * 2


def model(budget: float, static: float) -> CostModel:
    """Three strategies; ``static`` bytes the instantiation leaves on every device."""
    costs = {
        DP4: StrategyCost(Quadratic(0, 1.0, 0), Quadratic(0, 4.0, 0), static, 0.0, overhead=5.0),
        DP2TP2: StrategyCost(Quadratic(0, 1.5, 0), Quadratic(0, 2.0, 0), static, 0.0, overhead=5.0),
        TP4: StrategyCost(Quadratic(0, 2.5, 0), Quadratic(0, 1.0, 0), static, 0.0, overhead=5.0),
    }
    switches = {(w, a, b): 0.01 for w in ("params", "grads") for a in costs for b in costs if a != b}
    return CostModel(costs, budget, LinkProfile(1e9, 1e-5, 1e9), 0.0, switches, token_budget=400)


def test_shared_searches_find_what_each_finds_alone_where_memory_limits_and_where_it_does_not():
    roomy, roomier, tight = model(1e6, 0.0), model(1e6, 1e3), model(1000.0, 0.0)
    assert roomy.max_rows(DP4, 10) == roomier.max_rows(DP4, 10) == 40  # the token budget limits
    assert tight.max_rows(DP4, 10) == 25  # memory limits: 1000 bytes over 40 a sequence
    shared = Shared()
    for cost in (roomy, roomier, tight):
        plan, predicted = auto_plan(LENGTHS, cost, TP4, 900)
        plan_shared, predicted_shared = auto_plan(LENGTHS, cost, TP4, 900, shared=shared)
        assert (str(plan_shared), predicted_shared) == (str(plan), predicted)
    # roomy and roomier number their three strategies alike (their searches are one); under the
    # tight budget dp4 and dp2tp2 hold fewer tokens, so its candidate boundaries, and with them
    # all three of its numbers, are its own
    assert len(shared.numbers) == 6
