"""The kernel keeps a bounded window of a job's events and output lines, indexed as if it kept
them all, and says when something was cut: older events and lines dropped, an overlong line."""

import pytest

from hotswitch.kernel.channel.line_limit import MAX_LINE_CHARS, cut_line
from hotswitch.kernel.notebook.jobs.event_log import EventLog, Window
from hotswitch.kernel.notebook.jobs.rank_reports import KEPT_LINE_CHARS, RankReports


class Recorded:
    def __init__(self):
        self.writes = []

    def write(self, text, stream="stdout"):
        self.writes.append((stream, text))


def _reports(**limits):
    output = Recorded()
    return RankReports(output, on_started=lambda: None, on_failure=lambda: None, **limits), output


def test_a_window_drops_oldest_first_and_keeps_absolute_indices():
    window = Window(5)
    for i in range(12):
        window.append(i)
    assert (len(window), window.dropped, list(window)) == (12, 7, [7, 8, 9, 10, 11])
    assert (window[7], window[11], window[-1], window[-5]) == (7, 11, 11, 7)
    assert window[10:] == [10, 11] and window[5:9] == [7, 8] and window[::3] == [9] and window[:3] == []
    assert window[-3:] == [9, 10, 11] and list(reversed(window)) == [11, 10, 9, 8, 7] and window == [7, 8, 9, 10, 11]
    with pytest.raises(IndexError, match=r"index 6 is not kept: 12 received, the newest 5 kept \(indices 7 to 11\)"):
        window[6]
    with pytest.raises(IndexError):
        window[12]


def test_events_beyond_the_window_are_dropped_and_since_still_counts_every_event():
    log = EventLog(capacity=100)
    for i in range(1000):
        log.append({"type": "step" if i % 2 else "switch", "step": i})
    assert len(log.events) == 1000 and len(list(log.events)) == 100 and log.events.dropped == 900
    assert len(log.received_at) == 1000 and len(list(log.received_at)) == 100
    assert log.events[900] == {"type": "switch", "step": 900} and log.events[-1]["step"] == 999
    assert [e["step"] for e in log.of("step", 990)] == [991, 993, 995, 997, 999]
    assert [e["step"] for e in log.of("step", 0)][:2] == [901, 903]  # the older ones are gone
    mark = len(log.events)
    log.append({"type": "control", "command": "pause"})
    assert log.of("control", mark) == [{"type": "control", "command": "pause"}]
    assert log.events[mark:] == log.of("control")
    assert log.counts == {"step": 500, "switch": 500, "control": 1}
    replayed = []
    log.subscribe(replayed.append)
    assert [e.get("step") for e in replayed][:1] == [901] and len(replayed) == 100


def test_200k_output_lines_keep_a_bounded_window_with_a_marker_and_one_note():
    reports, output = _reports(max_lines=1000)
    for i in range(200_000):
        reports.receive("rank-0", {"kind": "log", "stream": "stdout", "line": f"line {i}"})
    assert reports.kept_lines(0) == 1000
    logs = reports.logs(0).splitlines()
    assert logs[0] == "[hotswitch] 199000 earlier lines of rank 0 were dropped"
    assert logs[1] == "[stdout:0] line 199000" and logs[-1] == "[stdout:0] line 199999" and len(logs) == 1001
    notes = [text for _, text in output.writes if text.startswith("[hotswitch]")]
    assert notes == ["[hotswitch] job.logs(0) keeps the newest output of rank 0; older lines are dropped\n"]
    assert reports.logs(1) == "" and reports.kept_lines(1) == 0


def test_lines_are_also_bounded_by_characters():
    reports, _ = _reports(max_lines=10_000, max_chars=10_000)
    for _ in range(100):
        reports.receive(
            "rank-1", {"kind": "log", "stream": "stderr", "line": "x" * 988}
        )  # 1000 characters with its label
    assert reports.kept_lines(1) == 10 and "90 earlier lines of rank 1 were dropped" in reports.logs(1)


def test_events_past_the_window_note_it_once_in_the_cell():
    reports, output = _reports(max_events=10)
    for i in range(25):
        reports.receive("rank-0", {"kind": "event", "event": {"type": "step", "step": i}})
    assert len(reports.log.events) == 25 and [e["step"] for e in reports.log.events] == list(range(15, 25))
    assert output.writes == [("stderr", "[hotswitch] job.events keeps the newest 10 events; older ones are dropped\n")]


def test_an_overlong_line_is_cut_with_a_visible_marker():
    ten_mb = "é" * (5 * 1024 * 1024)  # 10 MiB of UTF-8
    cut = cut_line(ten_mb)
    assert cut == "é" * MAX_LINE_CHARS + f" [... {10 * 1024 * 1024 - 2 * MAX_LINE_CHARS} bytes cut]"
    assert cut_line("short") == "short"
    # The kernel keeps a line a rank already cut (marker and all), and cuts, visibly, one it did not.
    reports, _ = _reports()
    reports.receive("rank-0", {"kind": "log", "stream": "stdout", "line": cut})
    reports.receive("rank-0", {"kind": "log", "stream": "stdout", "line": "y" * (KEPT_LINE_CHARS + 10)})
    first, second = reports.logs(0).splitlines()
    assert first == f"[stdout:0] {cut}"
    assert second == f"[stdout:0] {'y' * KEPT_LINE_CHARS} [... 10 bytes cut]"
