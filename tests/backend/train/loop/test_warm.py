"""A ``WarmTrainer`` kept across cells gives each cell's job what a fresh job gets: its events
begin with the plan in force and the executable graphs, so that job's dashboard shows a plan
and offers the strategies, though the trainer was built (and reported them) before."""

import pytest

from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.widgets.dashboard_state import DashboardState

from .loop_workers import warm_cells

DP2, TP2 = "dp2tp1pp1", "dp1tp2pp1"


@pytest.fixture(scope="module")
def cells():
    return spawn_ranks(warm_cells, 2, timeout=600)[0]


def test_each_cells_job_begins_with_the_plan_in_force_and_the_graphs(cells):
    for events, first_step in zip(cells, (1, 3), strict=True):
        plan, graphs = events[0], events[1]
        assert (plan["type"], graphs["type"]) == ("plan", "graphs")
        assert plan["step"] == first_step - 1, "in force from the step the job starts at"
        assert plan["instantiation"] == TP2 and {DP2, TP2} <= set(graphs["exec"])
        assert [e["step"] for e in events if e["type"] == "step"] == [first_step, first_step + 1]
    first, second = ([e["buckets"] for e in events if e["type"] == "plan"] for events in cells)
    assert first == [[[DP2, 0]]]
    assert second == [[[DP2, 0]], [[TP2, 0]]], "the plan it started under, then the switch at its first boundary"


def test_the_dashboard_of_every_cells_job_has_a_plan_and_strategies_to_offer(cells):
    for events in cells:
        state = DashboardState()
        for e in events:
            state.ingest(e)
        assert state.plan is not None and not any("could not be shown" in n for n in state.notices)
        assert {DP2, TP2} <= set(state.strategies)
    assert state.summary()["plan_changes"] == 1  # the second cell's switch, not its announcement
