"""One definition of a run's figures: a recorded run's tokens/s are the same in the command
line's table, the dashboard and the demo report."""

import re

import pytest

from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.loop.compare import HOT
from hotswitch.backend.train.loop.run_totals import summarize
from hotswitch.kernel.cli import demo_report, progress
from hotswitch.widgets.dashboard_state import DashboardState


def record_run(rank: int, world: int) -> list[dict]:
    """Two ranks training with a hot switch every step; rank 0's events."""
    from hotswitch.backend import get_config
    from hotswitch.backend.data import BatchStream, stdlib_documents
    from hotswitch.backend.train.loop.trainer import Trainer

    events = []
    stream = BatchStream(stdlib_documents(), 8, 128, seed=0)
    plan = [["tp2", 112], ["dp2", 0]]
    Trainer(get_config("tiny"), stream, {"plan": plan, "token_budget": 512}, sink=events.append).train(4)
    return events


@pytest.fixture(scope="module")
def recorded():
    return spawn_ranks(record_run, 2, timeout=600)[0]


def test_a_recorded_runs_tokens_per_second_agree_in_table_dashboard_and_report(recorded):
    steps = [e for e in recorded if e["type"] == "step"]
    assert len(steps) == 4 and sum(e["switches"] for e in steps) > 0  # a real hot-switched run
    expected = sum(e["tokens"] for e in steps) / sum(e["seconds"]["total"] for e in steps)
    figures = summarize(recorded)
    assert figures["tokens_per_s"] == pytest.approx(expected, rel=1e-12)

    shown = re.search(r"throughput\s+([\d,]+) tokens/s", progress.table(figures)).group(1)
    assert int(shown.replace(",", "")) == round(expected)

    dashboard = DashboardState()
    for e in recorded:
        dashboard.ingest(e)
    assert dashboard.summary()["tokens_per_s"] == figures["tokens_per_s"]

    report = demo_report.runs([{**e, "run": HOT} for e in recorded], warmup=0)
    assert report[HOT]["tokens_per_s"] == figures["tokens_per_s"]
    assert report[HOT]["switches"] == figures["switches"]


def test_the_warmup_leaves_the_same_steps_out_of_every_report(recorded):
    figures = summarize(recorded, warmup=1)
    later = [e for e in recorded if e["type"] == "step"][1:]
    assert figures["tokens_per_s"] == pytest.approx(
        sum(e["tokens"] for e in later) / sum(e["seconds"]["total"] for e in later), rel=1e-12
    )
    assert (
        demo_report.runs([{**e, "run": HOT} for e in recorded], warmup=1)[HOT]["tokens_per_s"]
        == figures["tokens_per_s"]
    )


def test_the_table_shows_the_held_out_loss_where_the_run_evaluated(recorded):
    evals = [{"type": "eval", "step": s, "loss": loss, "tokens": 64, "seconds": 0.1} for s, loss in ((2, 6.5), (4, 5))]
    lines = progress.table(summarize([*recorded, *evals])).splitlines()
    assert "eval loss        6.5000 -> 5.0000" in lines, lines
    assert not any(line.startswith("eval loss") for line in progress.table(summarize(recorded)).splitlines())


def test_the_table_says_where_checkpoints_and_the_export_went(recorded):
    assert "checkpoint" not in progress.table(summarize(recorded))
    saved = [
        {"type": "checkpoint", "step": 2, "path": "ckpts/step-2", "format": "hotswitch"},
        {"type": "checkpoint", "step": 4, "path": "ckpts/step-4", "format": "hotswitch"},
        {"type": "checkpoint", "step": 4, "path": "out", "format": "hf"},
    ]
    lines = progress.table(summarize([*recorded, *saved])).splitlines()
    assert "checkpoints      2, the last ckpts/step-4" in lines
    assert "exported         out (Hugging Face: model and tokenizer)" in lines
    assert "checkpoint       ckpts/step-2" in progress.table(summarize([*recorded, saved[0]])).splitlines()


def test_the_table_numbers_the_steps_of_a_resumed_or_stopped_run(recorded):
    steps = [e for e in recorded if e["type"] == "step"]
    assert [e["step"] for e in steps] == [1, 2, 3, 4] and steps[-1]["steps"] == 4

    def first_line(events):
        return next(line for line in progress.table(summarize(events)).splitlines() if line.startswith("steps"))

    assert first_line(recorded) == "steps            4"
    assert first_line(steps[2:]) == "steps            2  (steps 3-4 of 4; resumed after step 2)"
    assert first_line(steps[:3]) == "steps            3  (steps 1-3 of 4)"
