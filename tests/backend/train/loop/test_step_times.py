"""A step's time split (``StepTimes``), read from marks in the device's work at the step's end
(``runtime.devices.DeviceMarks``): every phase that ran has its seconds, on every rank, and
device groups side by side each report their own, the step's compute the slower of them, and
switches are counted and timed the same way."""

import pytest

from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.strategy import Strategy

from ..train_workers import MAX_LEN, step_times


def test_one_strategy_reports_its_compute_reduction_and_update():
    for times in spawn_ranks(step_times, 2, [("dp2", 0)]):
        assert times["compute"] > 0 and times["update"] > 0 and times["grad_sync"] > 0, times
        assert times["per_strategy"][str(Strategy.parse("dp2"))]["seconds"] == times["compute"]
        assert times["switches"] == 0 and times["switch"] == 0 and times["first_switches"] == []


def test_groups_side_by_side_each_report_their_seconds_on_every_rank():
    """The groups' stage, then the master weights' whole strategy (it always runs, holding
    the gradients in the master layout): the step's compute is the slower group plus that."""
    ranks = spawn_ranks(step_times, 4, [("tp2@0-1", 200), ("dp2@2-3", 0)])
    names = [str(Strategy.parse(s)) for s in ("tp2@0-1", "dp2@2-3")]
    (whole,) = set(ranks[0]["per_strategy"]) - set(names)
    for times in ranks:
        seconds = {name: entry["seconds"] for name, entry in times["per_strategy"].items()}
        assert seconds[names[0]] > 0 and seconds[names[1]] > 0, times
        assert [seconds[name] for name in names] == [ranks[0]["per_strategy"][name]["seconds"] for name in names]
        assert times["compute"] == pytest.approx(max(seconds[name] for name in names) + seconds[whole]), times
        assert times["update"] > 0
        # parameters into each group, then both groups' gradients into the whole strategy, added
        assert times["switches"] == 4 and times["switch"] > 0, times
        firsts = times["first_switches"]
        assert sorted(f["what"] for f in firsts) == ["grads", "grads+add", "params", "params"], firsts
        assert all(f["seconds"] > 0 for f in firsts), firsts
    assert ranks[2]["grad_sync"] > 0, "the data-parallel group reduces its gradients"


def test_one_group_on_part_of_the_ranks_reports_its_seconds_on_every_rank():
    """Every sequence in the group on rank 1 (the bound above any length): rank 0 computes
    nothing in that stage, yet reports the group's seconds, and counts them in its compute."""
    ranks = spawn_ranks(step_times, 2, [("dp1@0", MAX_LEN + 1), ("dp1@1", 0)])
    idle, busy = (str(Strategy.parse(s)) for s in ("dp1@0", "dp1@1"))
    (whole,) = set(ranks[0]["per_strategy"]) - {busy}
    for times in ranks:
        seconds = {name: entry["seconds"] for name, entry in times["per_strategy"].items()}
        assert times["per_strategy"][busy]["tokens"] > 0 and idle not in seconds, times
        assert seconds[busy] == ranks[1]["per_strategy"][busy]["seconds"] > 0, times
        assert times["compute"] == pytest.approx(seconds[busy] + seconds[whole]), times
