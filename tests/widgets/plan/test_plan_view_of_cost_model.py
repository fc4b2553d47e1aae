"""PlanView.of draws what the cost model predicts and what the dispatcher assigns."""

import pytest

from hotswitch.backend import Strategy
from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.train.planning.auto import auto_plan
from hotswitch.backend.train.planning.cost import CostModel, LinkProfile, Quadratic, StrategyCost
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan
from hotswitch.widgets import PlanView, show

DP4, DP2TP2, TP4 = (Strategy.parse(s) for s in ("dp4", "dp2tp2", "tp4"))
NAMES = [str(s) for s in (DP4, DP2TP2, TP4)]
BATCH = [12, 30, 30, 45, 60, 80, 110, 150, 200, 260]
PLAN = HotSwitchPlan.of([("tp4", 100), ("dp4", 0)])


@pytest.fixture(scope="module")
def cost():
    # per replica tp is slower per sequence but splits activations and model states over more devices
    costs = {
        DP4: StrategyCost(Quadratic(2e-6, 1e-4, 1e-3), Quadratic(60.0, 8e3, 0), 2e6, 0.01),
        DP2TP2: StrategyCost(Quadratic(1.5e-6, 2e-4, 1e-3), Quadratic(30.0, 4e3, 0), 1e6, 0.01),
        TP4: StrategyCost(Quadratic(1e-6, 3e-4, 2e-3), Quadratic(15.0, 2e3, 0), 5e5, 0.0),
    }
    switches = {(w, a, b): 0.005 for w in ("params", "grads") for a in costs for b in costs if a != b}
    return CostModel(costs, 4.5e6, LinkProfile(1e9, 1e-5, 1e10), 0.02, switches, token_budget=512)


def test_one_time_and_one_memory_curve_per_strategy_from_the_cost_model(cost):
    view = PlanView.of(cost, PLAN, BATCH)
    data = view.fig.data
    assert [t.name for t in data] == NAMES * 3
    assert [t.type for t in data] == ["scatter"] * 6 + ["histogram"] * 3
    for strategy, time, memory in zip(cost.strategies, data[:3], data[3:6]):
        c = cost.strategies[strategy]
        assert time.x[0] == 1 and time.x[-1] == max(BATCH)
        assert list(time.y) == pytest.approx([c.time(n) / strategy.dp for n in time.x])
        assert list(memory.y) == pytest.approx([(c.static_bytes + c.memory(n)) / 1e6 for n in memory.x])
    assert "(MB)" in view.fig.layout.annotations[1].text


def test_memory_limit_at_the_budget_and_a_line_at_each_bucket_boundary(cost):
    shapes = PlanView.of(cost, PLAN, BATCH).fig.layout.shapes
    assert [(s.y0, s.y1) for s in shapes if s.line.dash == "dash"] == [(4.5, 4.5)]
    assert [(s.x0, s.x1) for s in shapes if s.line.dash == "dot"] == [(100, 100)] * 3  # across the three panels


def test_the_histogram_holds_each_strategys_sequences_as_the_dispatcher_assigns_them(cost):
    view = PlanView.of(cost, PLAN, BATCH)
    groups = PLAN.assign([Sequence(i, (0,) * (n + 1)) for i, n in enumerate(BATCH)])
    histograms = view.fig.data[6:]
    for strategy, histogram, curve in zip(cost.strategies, histograms, view.fig.data):
        assert sorted(histogram.x) == sorted(s.length for s in groups.get(strategy, []))
        assert histogram.marker.color == curve.line.color
    assert [len(h.x) for h in histograms] == [6, 0, 4]
    assert {h.bingroup for h in histograms} == {"batch"}  # stacked on the same bins


def test_auto_shows_the_plan_auto_plan_picks_with_its_predicted_step(cost):
    view = PlanView.of(cost, "auto", BATCH)
    plan, predicted = auto_plan(BATCH, cost, TP4, max(BATCH))
    assert view.prediction.plan == plan
    assert view.prediction.predicted_step_s == pytest.approx(predicted)
    assert view.buckets == [[str(b.strategy), b.above] for b in plan.buckets]
    assert f"{predicted:.3g} s predicted" in view.fig.layout.title.text


def test_a_fixed_plan_predicts_its_step_like_the_cost_model(cost):
    view = PlanView.of(cost, [("tp4", 100), ("dp4", 0)], BATCH)
    groups = {TP4: [n for n in BATCH if n > 100], DP4: [n for n in BATCH if n <= 100]}
    assert view.prediction.predicted_step_s == pytest.approx(cost.ordered_step_s(groups, [DP4, TP4], TP4))


def test_without_a_batch_the_curves_reach_the_longest_sequence_any_strategy_holds(cost):
    view = PlanView.of(cost, plan=None)
    assert view.fig.data[0].x[-1] == cost.longest(TP4, 1 << 17)
    assert [len(h.x) for h in view.fig.data[6:]] == [0, 0, 0] and view.buckets == []


def test_plans_the_cost_model_cannot_predict_are_refused(cost):
    with pytest.raises(ValueError, match=r"no profile of \['dp1tp2pp2'\]"):
        PlanView.of(cost, [("tp2pp2", 100), ("dp4", 0)], BATCH)
    with pytest.raises(ValueError, match="pass the batch's lengths"):
        PlanView.of(cost, "auto")


def test_show_draws_a_cost_model_and_a_plan_against_it(cost):
    assert show(cost).buckets == [] and len(show(cost).fig.data) == 9
    view = show((cost, PLAN, BATCH))
    assert view.prediction == PlanView.of(cost, PLAN, BATCH).prediction
    with pytest.raises(TypeError, match=r"show\(\(cost_model, plan, batch_lengths\)\)"):
        show(PLAN)
