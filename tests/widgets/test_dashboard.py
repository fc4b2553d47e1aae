"""The dashboard folds events into bounded state, throttles redraws and drives the job."""

import itertools
import threading
import time
from html import unescape
from types import SimpleNamespace

import pytest

from hotswitch.backend.train.loop.run_totals import summarize
from hotswitch.kernel.notebook.jobs.event_log import EventLog
from hotswitch.widgets import Dashboard, show
from hotswitch.widgets.dashboard_state import throughput_text
from hotswitch.widgets.series import BoundedSeries
from hotswitch.widgets.throttle import Throttle
from tests.widgets.recorded_events import recorded_events


class FakeJob:
    """What the dashboard needs of a Job; events arrive on a thread like the channel's, through
    the event log a Job keeps."""

    def __init__(self):
        self.log = EventLog()
        self.calls: list[tuple] = []
        self.done = False
        self.status = "running"
        self.done_callbacks = []
        self.spec = SimpleNamespace(nproc=2, nodes=1)

    @property
    def events(self):
        return self.log.events

    def on_event(self, callback, replay=True):
        return self.log.subscribe(callback, replay)

    def add_done_callback(self, callback):
        if self.done:
            callback(self)
        else:
            self.done_callbacks.append(callback)

    def feed(self, events, every_s=0.0, status="succeeded"):
        def run():
            for e in events:
                self.log.append(e)
                if every_s:
                    time.sleep(every_s)
            self.done, self.status = True, status
            for callback in self.done_callbacks:
                callback(self)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    def logs(self, rank):
        return f"[stdout:{rank}] hello from {rank}\n"

    def switch(self, strategy="auto"):
        self.calls.append(("switch", strategy))

    def pause(self):
        self.calls.append(("pause",))

    def resume(self):
        self.calls.append(("resume",))

    def stop(self):
        self.calls.append(("stop",))

    def checkpoint(self, path=None):
        raise RuntimeError("job 'x' has already ended (succeeded)")


def test_points_bands_and_marks_match_the_events():
    events = recorded_events(steps=30, switch_at=12)
    view = Dashboard.replay(events)
    steps = [e for e in events if e["type"] == "step"]
    assert list(view.live.data[0].x) == [e["step"] for e in steps]
    assert list(view.live.data[0].y) == [e["tokens_per_s"] for e in steps]
    assert list(view.live.data[1].y) == [e["loss"] for e in steps]
    evals = [e for e in events if e["type"] == "eval"]
    assert len(evals) == 3 and view.live.data[3].name == "held-out loss"
    assert list(view.live.data[3].x) == [10, 20, 30] and list(view.live.data[3].y) == [e["loss"] for e in evals]
    assert list(view.breakdown.data[0].y) == [e["seconds"]["compute"] for e in steps]
    assert [t.name for t in view.breakdown.data] == ["compute", "switch", "grad_sync", "update"]
    assert view.state.snapshot()["bands"] == [[0, 11, ["dp4", "tp4"]], [11, 30, ["dp2tp2"]]]
    assert list(view.live.data[2].x) == [11.5]
    assert len(view.live.layout.shapes) == 2
    assert view.progress.value == view.progress.max == 30
    assert "finished" in view.progress_text.value
    summary = view.state.summary()
    assert summary["tokens"] == 512 * 30 and summary["plan_changes"] == 1 and summary["hot_switches"] == 22
    assert "run summary" in view.summary_html.value
    assert list(view.strategy.options) == ["auto", "dp4", "tp4", "dp2tp2"]
    assert view.strategy.disabled  # a replay without a job has nothing to control
    assert view.logs.layout.display == "none"  # no rank output to show
    assert "step 11: switch strategy=dp2tp2" in view.notices_html.value
    assert "data: train: 1900 of 2000 documents from 3 file(s), bpe:512 tokens; 100 held out" in view.plan_html.value


def test_the_strategy_control_offers_every_strategy_the_job_compiled():
    graphs = {"logical": {}, "exec": {"dp4": {}, "tp4": {}, "dp1tp2pp2": {}}}
    view = Dashboard.replay(recorded_events(steps=3, switch_at=2, graphs=graphs))
    assert list(view.strategy.options) == ["auto", "dp4", "tp4", "dp1tp2pp2", "dp2tp2"]


def test_the_header_and_the_summary_show_the_one_throughput_written_alike():
    events = recorded_events(steps=30, switch_at=12)
    view = Dashboard.replay(events)
    figure = throughput_text(summarize(events)["tokens_per_s"])
    last_step = throughput_text(next(e for e in reversed(events) if e["type"] == "step")["tokens_per_s"])
    assert figure != last_step  # the run's throughput, not the last step's
    assert f"{figure} tokens/s" in view.progress_text.value and last_step not in view.progress_text.value
    assert f"<td style='padding:2px 8px'>tokens_per_s</td><td style='padding:2px 8px'>{figure}</td>" in (
        view.summary_html.value
    )


def test_the_summary_gives_seconds_per_step_and_names_their_sum_a_total():
    events = recorded_events(steps=30, switch_at=12)
    totals = [e["seconds"]["total"] for e in events if e["type"] == "step"]
    summary = Dashboard.replay(events).state.summary()
    assert "step_seconds" not in summary
    assert summary["seconds_per_step"] == pytest.approx(sum(totals) / len(totals))
    assert summary["total_step_seconds"] == pytest.approx(sum(totals))
    assert summary["tokens"] / summary["total_step_seconds"] == pytest.approx(summary["tokens_per_s"])


def test_a_plan_announced_again_is_not_a_plan_change():
    events = recorded_events(steps=30, switch_at=12)
    again = {**next(e for e in events if e["type"] == "plan"), "step": 5}  # the plan in force, re-announced
    at = next(i for i, e in enumerate(events) if e["type"] == "step" and e["step"] == 6)
    view = Dashboard.replay([*events[:at], again, *events[at:]])
    assert view.state.summary()["plan_changes"] == 1
    assert view.state.snapshot()["bands"] == [[0, 11, ["dp4", "tp4"]], [11, 30, ["dp2tp2"]]]


def test_eta_uses_the_recent_pace():
    events = [e for e in recorded_events(steps=30, switch_at=12) if e["type"] != "done"][:20]
    view = Dashboard.replay(events)
    done, planned = view.state.progress
    totals = [e["seconds"]["total"] for e in events if e["type"] == "step"]
    assert view.state.eta_s == pytest.approx((planned - done) * sum(totals) / len(totals))
    assert "ETA" in view.progress_text.value


def test_live_events_from_a_thread_are_coalesced_and_replay_gives_the_same_state():
    job = FakeJob()
    events = recorded_events(steps=400, switch_at=150)
    view = Dashboard(job, interval=0.1)
    began = time.monotonic()
    job.feed(events, every_s=0.0005).join()
    assert view.wait_idle(10)
    elapsed = time.monotonic() - began
    assert view.state.events == len(events)
    assert view.renders - 1 <= elapsed / 0.1 + 2  # one render at construction
    assert view.renders - 1 < len(events) / 10
    assert view.state.snapshot() == Dashboard.replay(events).state.snapshot()
    assert [view.logs.get_title(i) for i in range(len(view.logs.children))] == ["rank 0", "rank 1"]
    assert view.logs.layout.display is None
    view.close()


def test_a_job_that_ends_without_its_ranks_done_event_shows_how_it_ended():
    # stopped mid-step (the ranks were ended before a step boundary): no "done" event ever comes
    job = FakeJob()
    view = Dashboard(job, interval=0.05)
    steps = [e for e in recorded_events(steps=5, switch_at=3) if e["type"] != "done"]
    job.feed(steps, status="stopped").join()
    assert view.wait_idle(10)
    assert view.state.done is None and "<b>stopped</b>" in view.progress_text.value
    view.close()


def test_throttle_runs_at_most_once_per_interval():
    calls = []
    throttle = Throttle(lambda: calls.append(time.monotonic()), interval=0.05)
    deadline = time.monotonic() + 0.5
    requests = 0
    while time.monotonic() < deadline:
        throttle.request()
        requests += 1
        time.sleep(0.001)
    time.sleep(0.1)
    assert 2 <= len(calls) <= 12 < requests
    assert all(b - a >= 0.045 for a, b in itertools.pairwise(calls))


def test_long_runs_keep_bounded_memory():
    series = BoundedSeries(["step", "y"], capacity=100)
    for i in range(100_000):
        series.append({"step": i, "y": 1.0})
    assert len(series) <= 101 and series.appended == 100_000
    assert series.column("y") == [1.0] * len(series)
    steps = series.column("step")
    assert steps[0] == (series.stride - 1) / 2  # the mean of the first bucket
    assert steps[-1] > 99_000 and all(b > a for a, b in itertools.pairwise(steps))
    view = Dashboard.replay(recorded_events(steps=5000, switch_at=10))
    assert len(view.live.data[0].x) <= 2001


def test_controls_call_the_job_and_show_errors():
    job = FakeJob()
    view = Dashboard.replay(recorded_events(steps=5, switch_at=3), job=job)
    view.strategy.value = "dp2tp2"
    view.strategy.value = "auto"
    view.pause_button.click()
    view.resume_button.click()
    view.stop_button.click()
    assert job.calls == [("switch", "dp2tp2"), ("switch", "auto"), ("pause",), ("resume",), ("stop",)]
    view.checkpoint_button.click()
    assert "checkpoint failed: job 'x' has already ended" in unescape(view.status.value)


def test_show_of_an_event_list_is_a_replay():
    events = recorded_events(steps=4, switch_at=2)
    assert show(events).state.snapshot() == Dashboard.replay(events).state.snapshot()


def test_a_file_of_other_records_is_refused_not_drawn_empty(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"text": "a document"}\n')
    with pytest.raises(ValueError, match=r"corpus\.jsonl holds no hotswitch events; give a run folder"):
        Dashboard.replay(tmp_path / "corpus.jsonl")
    (tmp_path / "events.jsonl").write_text("")  # a run that recorded nothing yet: an empty dashboard
    Dashboard.replay(tmp_path).close()


def test_events_a_body_emits_itself_never_stop_the_dashboard():
    view = Dashboard.replay([{"type": "step", "step": 1, "sent": 0.5}, {"type": "step", "step": "two"}])
    assert view.state.events == 2 and view.state.progress[0] == 1
    assert any("could not be shown" in n for n in view.state.notices)
    view.close()


def test_a_redraw_that_fails_on_the_timer_thread_is_shown_and_the_next_one_draws(monkeypatch):
    import hotswitch.widgets.dashboard as dashboard

    job = FakeJob()
    view = Dashboard(job, interval=0.05)
    drawn = dashboard.band_shapes
    monkeypatch.setattr(dashboard, "band_shapes", lambda *a: 1 / 0)
    job.feed(recorded_events(steps=3, switch_at=2)).join()
    assert view.wait_idle(10)
    assert "drawing failed: ZeroDivisionError" in view.status.value
    assert view.progress_text.value == "0 / 0 steps"  # as first drawn: the failing redraw never got there
    monkeypatch.setattr(dashboard, "band_shapes", drawn)
    job.feed([e for e in recorded_events(steps=5, switch_at=2) if e.get("step") == 4]).join()
    assert view.wait_idle(10)
    assert len(view.live.data[0].x) == view.state.progress[0] > 0
    view.close()


def test_the_plots_are_sent_whole_and_at_most_once_a_second_while_events_stream():
    job = FakeJob()
    view = Dashboard(job, interval=0.05)
    began = time.monotonic()
    job.feed(recorded_events(steps=200, switch_at=80), every_s=0.005).join()
    assert view.wait_idle(10)
    elapsed = time.monotonic() - began
    assert view.live_plot.redraws - 1 <= elapsed / 1.0 + 2  # one redraw at construction
    (shown,) = view.live_plot.outputs  # one output: the whole figure as it is now
    drawn = shown["data"]["application/vnd.plotly.v1+json"]["data"]
    assert drawn[0]["x"] == list(view.live.data[0].x) and len(drawn[0]["x"]) == view.state.progress[0]
    assert drawn[2]["x"] == list(view.live.data[2].x) != []  # the plan change's mark
    bars = view.breakdown_plot.outputs[0]["data"]["application/vnd.plotly.v1+json"]["data"]
    assert [b["name"] for b in bars] == ["compute", "switch", "grad_sync", "update"] and bars[0]["y"]
    view.close()


def test_the_notices_say_where_a_checkpoint_and_the_export_went():
    saved = [
        {"type": "checkpoint", "step": 30, "path": "runs/ckpt", "format": "hotswitch"},
        {"type": "checkpoint", "step": 30, "path": "runs/out", "format": "hf"},
    ]
    view = Dashboard.replay([*recorded_events(steps=30, switch_at=12), *saved])
    assert "step 30: checkpoint saved to runs/ckpt" in view.notices_html.value
    assert "step 30: exported to runs/out (Hugging Face: model and tokenizer)" in view.notices_html.value
