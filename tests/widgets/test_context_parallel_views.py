"""Strategies with context parallelism (``dp2cp2tp2``, ``ul4``) draw in every view like any other."""

import json

import pytest

from hotswitch.backend import Cluster, Strategy, get_config
from hotswitch.backend.sim.scenario import Setup
from hotswitch.backend.sim.step import simulate_step
from hotswitch.backend.switch.planner import model_layouts
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan
from hotswitch.widgets import Dashboard, SwitchPlanView
from hotswitch.widgets.simulation.speedup import speedup_figure, speedup_series
from hotswitch.widgets.simulation.timeline import timeline_bars

from .recorded_events import recorded_events

CP, UL = "dp1cp2tp2pp1sp", "dp1ul4tp1pp1"


def test_the_dashboard_shows_cp_strategies_in_bands_and_controls():
    text = json.dumps(recorded_events(steps=12, switch_at=6, graphs={"logical": {}, "exec": {CP: {}, "dp4": {}}}))
    events = json.loads(text.replace('"tp4"', f'"{CP}"').replace('"dp2tp2"', f'"{UL}"'))
    view = Dashboard.replay(events)
    assert view.state.snapshot()["bands"] == [[0, 5, ["dp4", CP]], [5, 12, [UL]]]
    assert list(view.strategy.options) == ["auto", "dp4", CP, UL]
    assert f"switch strategy={UL}" in view.notices_html.value


def test_a_switch_between_cp_layouts_draws_the_plans_bytes():
    cluster = Cluster.of_gpus(8)
    view = SwitchPlanView.compare(*model_layouts("7b", "dp2cp2tp2", "dp1cp2tp4", cluster), cluster, itemsize=2)
    plan = view.plans["balanced"]
    assert sum(map(sum, view.heat.data[0].z)) == plan.bytes_moved > 0


def test_a_simulated_cp_step_and_the_context_comparison_draw():
    config = get_config("7b").with_(max_seq_len=65536)
    lengths = [65536] + [2048] * 15
    plan, instantiation = HotSwitchPlan.of([(CP, 4096), ("dp4", 0)]), Strategy.parse(CP)
    setup = Setup(config, 4, 65536, lengths, planned_switches=False)
    step = simulate_step(setup.cost_model(list(plan.strategies), instantiation), plan, lengths, instantiation, 4)
    assert ("compute", CP) in timeline_bars(step).traces
    rows = [
        {"model": "7b", "gpus": 8, "dataset": "github", "context": c, "speedup": x}
        for c, x in ((32768, 1.0), (65536, 1.4), (131072, 1.9))
    ]
    assert speedup_series(rows, {"with cp": "speedup"}) == {
        "7b/8 github with cp": {"contexts": [32768, 65536, 131072], "speedups": [1.0, 1.4, 1.9]}
    }
    assert len(speedup_figure(rows, {"with cp": "speedup"}).data) == 1


@pytest.mark.parametrize("name", [CP, UL, "dp2cp2tp2"])
def test_cp_names_round_trip(name):
    assert str(Strategy.parse(str(Strategy.parse(name)))) == str(Strategy.parse(name))
