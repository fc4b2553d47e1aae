"""``benchmarks/moe_sim.py --smoke --json``: one simulated cell of a mixture of experts with expert
parallelism, its promised keys and figures that agree with each other."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.common import promised

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # a process of its own, tens of seconds on 2 cores


@pytest.fixture(scope="module")
def smoke() -> dict:
    command = [sys.executable, "-m", "benchmarks.moe_sim", "--smoke", "--json"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, f"moe_sim --smoke exited {done.returncode}:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout)


def test_the_smoke_run_prints_every_promised_key(smoke):
    from benchmarks import moe_sim

    assert promised.missing_keys(smoke, moe_sim.OUTPUT_KEYS) == []
    assert smoke["smoke"] == moe_sim.SMOKE


def test_each_cells_figures_are_the_ratios_of_its_step_times(smoke):
    (cell,) = smoke["cells"]
    assert "ep" in cell["best_static"]  # the static baseline splits its experts
    assert cell["speedup"] == pytest.approx(cell["best_static_s"] / cell["auto_s"])
    assert cell["ceiling"] == pytest.approx(cell["best_static_s"] / cell["floor_s"])
    assert cell["floor_s"] <= cell["auto_s"]  # no plan beats the floor
    assert smoke["summary"]["cells_run"] == 1
    assert smoke["summary"]["speedup_geomean"] == pytest.approx(cell["speedup"])
    for measured in smoke["imbalance"]:
        assert measured["route"] >= 1.0 and measured["uniform"] >= 1.0
