"""``hotswitch demo`` end to end: hot switching and the best static strategy on the same batches,
both equal to one device step by step, and nothing left running."""

import json
import subprocess
import sys

import psutil
import pytest

STEPS = 3


def hotswitch(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "hotswitch.kernel.cli", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_demo_compares_with_the_best_static_strategy_and_checks_every_step():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    out = hotswitch("demo", "--steps", str(STEPS), "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    verdict = json.loads(out.stdout)

    predicted = verdict["predicted_static_step_s"]
    best = verdict["best_static"]
    assert best == min(predicted, key=predicted.get), "the static run is the one predicted fastest"
    assert set(predicted).isdisjoint(verdict["infeasible_static"])
    assert verdict["infeasible_static"], "the memory budget must leave some strategy unable to hold the longest"
    assert list(verdict["runs"]) == ["hot switching", best]
    assert verdict["runs"][best]["strategies"] == [best] and verdict["runs"][best]["switches"] == 0

    reference = verdict["reference_losses"]
    assert len(reference) == STEPS and reference[-1] < reference[0]
    for run in verdict["runs"].values():
        assert len(run["losses"]) == STEPS
        worst = max(abs(a - b) / b for a, b in zip(run["losses"], reference, strict=True))
        assert run["max_relative_loss_difference"] == pytest.approx(worst)
        assert worst <= verdict["tolerance"]
    assert verdict["exact"] is True
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_demo_refuses_a_run_with_nothing_to_measure():
    out = hotswitch("demo", "--steps", "1", "--warmup", "1")
    assert out.returncode == 2
    assert "--steps 1 leaves nothing to measure after --warmup 1" in out.stderr
