"""``hotswitch train`` end to end: torchrun ranks, progress, summary, clean exit."""

import json
import subprocess
import sys

import psutil
import pytest


def hotswitch(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "hotswitch.kernel.cli", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_headless_training_reports_a_summary_and_leaves_nothing_behind(tmp_path):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    out = hotswitch(
        "train",
        "-n",
        "2",
        "--steps",
        "3",
        "--plan",
        "tp2:95,dp2:0",  # the stdlib units mostly fill 96 tokens; shorter ones go to dp2
        "--batch-size",
        "6",
        "--max-len",
        "96",
        "--checkpoint",
        str(tmp_path / "ckpt"),
        "--json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["status"] == "succeeded" and summary["steps"] == 3
    assert set(summary["strategies"]) == {"dp1tp2pp1", "dp2tp1pp1"}
    assert summary["tokens"] == sum(v["tokens"] for v in summary["strategies"].values())
    assert (tmp_path / "ckpt" / "hotswitch.json").is_file()
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_bad_plans_are_refused_before_anything_launches(tmp_path):
    out = hotswitch("train", "-n", "4", "--plan", "tp3")
    assert out.returncode == 2 and "uses 3 devices but the cluster has 4" in out.stderr
    out = hotswitch("train", "-n", "4", "--plan", "tp4:100,dp4:50")
    assert out.returncode == 2 and "one of them 0" in out.stderr
    (tmp_path / "taken").mkdir()
    out = hotswitch("train", "-n", "2", "--plan", "dp2", "--checkpoint", str(tmp_path / "taken"))
    assert out.returncode == 2 and "already exists" in out.stderr
