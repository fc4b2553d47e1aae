"""``benchmarks/moe.py --ranks 4``: every static expert layout and hot switching train the same
batches on 4 CPU ranks side by side, each checked against one device (its ``--smoke`` size)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.common.moe_layouts import HOT, LAYOUTS

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # 4 processes profile 14 strategies, then train 8 contenders


@pytest.fixture(scope="module")
def layouts(tmp_path_factory) -> dict:
    cache = tmp_path_factory.mktemp("cache")
    command = [sys.executable, "-m", "benchmarks.moe", "--smoke", "--ranks", "4", "--json"]
    env = {**os.environ, "HOTSWITCH_CACHE": str(cache)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)["layouts"]


def test_every_layout_and_hot_switching_train_the_same_losses_as_one_device(layouts):
    assert set(layouts["step_s"]) == {*LAYOUTS, HOT}
    assert set(layouts["loss_error"]) == set(layouts["step_s"])
    assert layouts["losses_match_one_device"], layouts["loss_error"]


def test_the_best_static_is_the_fastest_layout_and_hot_is_measured_against_it(layouts):
    step_s = layouts["step_s"]
    best = layouts["best_static"]
    assert best in LAYOUTS and step_s[best] == min(step_s[name] for name in LAYOUTS)
    assert layouts["hot_over_best_static"] == pytest.approx(step_s[HOT] / step_s[best])


def test_hot_switching_reports_its_plans_and_its_profiles_expert_exchanges(layouts):
    hot = layouts["hot"]
    assert sum(hot["plans"].values()) == 1  # the smoke's one timed step
    ep = {name for name in hot["profiled"] if "ep" in name}
    assert ep and set(hot["expert_exchanges"]) == ep  # auto weighs ep layouts, each measured
    for row in hot["expert_exchanges"].values():
        assert len(row["exchange_s"]) == len(row["imbalance"]) == len(row["lengths"])
        assert min(row["imbalance"]) >= 1.0
