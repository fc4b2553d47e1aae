"""A job's run folder: every event as it arrives in events.jsonl, the body, how it ended; and
the dashboard redrawn from the folder equals the one drawn from the events."""

import json
import stat
from types import SimpleNamespace

from hotswitch.backend.train.loop.events import read_events
from hotswitch.kernel.notebook.jobs.run_record import RunRecord, new_run_dir
from hotswitch.widgets.dashboard import Dashboard
from tests.widgets.recorded_events import recorded_events


def test_a_run_folder_records_events_body_and_outcome_and_replays(tmp_path):
    folder = new_run_dir("demo", tmp_path)
    assert folder.name.startswith("demo-") and stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert new_run_dir("demo", tmp_path) != folder  # a second job of the same name gets its own
    record = RunRecord(folder, "print('body')\n")
    events = recorded_events(steps=12, switch_at=5)
    for e in events:
        record.write({**e, "rank": 0})
    job = SimpleNamespace(name="demo", status="succeeded", exit_reason=None, started_at=1.0, ended_at=2.0)
    record.finish(job)
    record.write({"type": "late"})  # after the end: ignored, never an error
    assert (folder / "body.py").read_text() == "print('body')\n"
    assert json.loads((folder / "job.json").read_text())["status"] == "succeeded"
    replayed = read_events(folder)
    assert replayed == [{**e, "rank": 0} for e in events]
    assert Dashboard.replay(folder).state.snapshot() == Dashboard.replay(replayed).state.snapshot()


def test_a_line_cut_short_by_a_crash_is_left_out(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text('{"type": "step", "step": 1}\n{"type": "st')
    assert read_events(path) == [{"type": "step", "step": 1}]
