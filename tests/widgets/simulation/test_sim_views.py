"""The simulated step's timeline and the speedup chart draw exactly what the simulator computed."""

import pytest

from hotswitch.backend import Strategy
from hotswitch.backend.sim.datasets import batch_lengths
from hotswitch.backend.sim.scenario import Setup
from hotswitch.backend.sim.step import simulate_step
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan
from hotswitch.widgets.simulation.speedup import speedup_figure, speedup_series
from hotswitch.widgets.simulation.timeline import timeline_bars, timeline_figure


@pytest.fixture(scope="module")
def step():
    lengths = batch_lengths("github", 8192, size=64)
    setup = Setup("7b", 8, 8192, lengths)
    plan = HotSwitchPlan.of([("dp1tp4pp2sp", 4096), ("dp8", 0)])
    instantiation = Strategy.parse("dp1tp4pp2sp")
    return simulate_step(setup.cost_model(list(plan.strategies), instantiation), plan, lengths, instantiation, 8)


def test_the_timeline_has_a_bar_per_segment_each_ranks_bars_filling_the_step(step):
    bars = timeline_bars(step)
    assert bars.world == 8 and bars.seconds == step.seconds
    assert ("compute", "dp8tp1pp1") in bars.traces and ("compute", "dp1tp4pp2sp") in bars.traces
    for rank in range(8):
        widths = [w for bar in bars.traces.values() for r, w in zip(bar["ranks"], bar["widths"]) if r == rank]
        assert sum(widths) == pytest.approx(step.seconds)
    fig = timeline_figure(step)
    assert len(fig.data) == len(bars.traces)
    assert {t.name for t in fig.data} >= {"dp8tp1pp1 compute", "switch", "update"}


ROWS = [
    {"model": "7b", "gpus": 8, "dataset": "github", "context": c, "auto_vs_static": a, "c1_vs_static": b}
    for c, a, b in ((8192, 1.2, None), (4096, 1.1, 1.0))
]


def test_speedup_lines_follow_context_and_leave_out_what_did_not_fit():
    series = speedup_series(ROWS)
    assert series["7b/8 github auto"] == {"contexts": [4096, 8192], "speedups": [1.1, 1.2]}
    assert series["7b/8 github c1"] == {"contexts": [4096], "speedups": [1.0]}
    fig = speedup_figure(ROWS)
    assert [list(t.x) for t in fig.data] == [[4096, 8192], [4096]]
