"""A trained step on a device timeline: side-by-side device groups on their own ranks at the same
time, sequential stages one after another, the step's measured totals after them."""

import pytest

from hotswitch.backend.train.loop.step_report import plan_event
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, execution_order, instantiation_strategy
from hotswitch.widgets.plan.step_timeline import measured_step, step_timeline

PLAN = HotSwitchPlan.of([("tp4", 160), ("tp2@0-1", 64), ("dp2@2-3", 0)])


def _plan_event() -> dict:
    instantiation = instantiation_strategy(PLAN.strategies)
    order = execution_order(PLAN.strategies, instantiation, lambda a, b: 0.0)
    return plan_event(0, PLAN, list(order), instantiation, None, "buckets")


STEP = {
    "step": 3,
    "strategies": {
        "dp1tp4pp1": {"tokens": 400, "seconds": 0.5},
        "dp1tp2pp1@0-1": {"tokens": 300, "seconds": 0.25},
        "dp2tp1pp1@2-3": {"tokens": 900, "seconds": 0.375},
    },
    "seconds": {"compute": 0.875, "switch": 0.125, "grad_sync": 0.0, "update": 0.0625, "total": 1.1},
}


def test_groups_share_a_stage_on_their_own_ranks_and_the_whole_strategy_follows():
    event = _plan_event()
    assert event["order"] == ["dp2tp1pp1@2-3 + dp1tp2pp1@0-1", "dp1tp4pp1"]
    laid = measured_step(event, STEP, 4)
    compute = {(b.strategy, b.rank): (b.start, b.end) for b in laid.segments if b.kind == "compute"}
    assert compute[("dp1tp2pp1@0-1", 1)] == (0.0, 0.25) and ("dp1tp2pp1@0-1", 2) not in compute
    assert compute[("dp2tp1pp1@2-3", 3)] == (0.0, 0.375), "the groups start together"
    assert compute[("dp1tp4pp1", 0)] == (0.375, 0.875), "the next stage waits for the slower group"
    assert laid.seconds == pytest.approx(0.875 + 0.125 + 0.0625)
    kinds = {b.kind for b in laid.segments}
    assert kinds == {"compute", "switch", "update"}, "a total of zero seconds draws nothing"


def test_the_figure_draws_a_bar_trace_per_strategy_and_total():
    fig = step_timeline(_plan_event(), STEP, 4)
    assert {t.name for t in fig.data} == {
        "dp1tp4pp1 compute",
        "dp1tp2pp1@0-1 compute",
        "dp2tp1pp1@2-3 compute",
        "switch",
        "update",
    }
    assert "step 3" in fig.layout.title.text
