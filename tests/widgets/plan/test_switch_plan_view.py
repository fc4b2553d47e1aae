"""SwitchPlanView's heat map, bars and table equal the plan's own figures."""

import pytest

from hotswitch.backend import Cluster
from hotswitch.backend.switch import plan_switch, switch_bounds
from hotswitch.backend.switch.planner import model_layouts
from hotswitch.widgets import SwitchPlanView, show
from hotswitch.widgets.plan.switch_traffic import message_rows


@pytest.fixture(scope="module")
def case():
    cluster = Cluster.of_gpus(32)
    a, b = model_layouts("32b", "dp2tp8pp2", "dp1tp16pp2", cluster)
    return a, b, cluster


@pytest.fixture(scope="module")
def view(case):
    return SwitchPlanView.compare(*case, itemsize=2)


@pytest.mark.parametrize("algorithm", ["balanced", "greedy", "naive"])
def test_heat_map_and_bars_equal_the_plan(view, algorithm):
    view.algorithm.value = algorithm
    plan = view.plans[algorithm]
    z = view.heat.data[0].z
    assert sum(map(sum, z)) == plan.bytes_moved
    for t in plan.transfers:
        if not t.local:
            assert z[t.sender][t.receiver] > 0
    send_intra, send_inter, recv_intra, recv_inter = (list(trace.y) for trace in view.bars.data)
    assert send_intra == [r.send_intra for r in plan.traffic]
    assert send_inter == [r.send_inter for r in plan.traffic]
    assert recv_intra == [r.recv_intra for r in plan.traffic]
    assert recv_inter == [r.recv_inter for r in plan.traffic]
    rows = message_rows(plan)
    assert len(rows) == len(plan.messages)
    assert sum(r["bytes"] for r in rows) == plan.bytes_moved


def test_node_borders_follow_the_cluster(view, case):
    cluster = case[2]
    rects = [s for s in view.heat.layout.shapes if s.type == "rect"]
    assert len(rects) == cluster.nodes
    assert rects[1].x0 == cluster.devices_per_node - 0.5


def test_comparison_holds_every_planner_and_the_bound(view, case):
    bound = switch_bounds(*case, 2)
    times = dict(zip(view.comparison.data[0].x, view.comparison.data[0].y))
    assert set(times) == {"balanced", "greedy", "naive", "bound"}
    assert times["bound"] == pytest.approx(bound.time_s * 1e3)
    assert times["balanced"] == pytest.approx(view.plans["balanced"].time_s * 1e3)
    assert min(times.values()) == times["bound"]


def test_show_of_one_plan(case):
    plan = plan_switch(*case, "greedy", itemsize=2)
    view = show(plan)
    assert isinstance(view, SwitchPlanView) and list(view.plans) == ["greedy"]
    assert sum(map(sum, view.heat.data[0].z)) == plan.bytes_moved
