"""What never reached the kernel is counted and said: output lines a rank sent that did not
arrive, messages a rank gave up on while the kernel was away, and messages the kernel refused."""

from hotswitch.kernel.channel.signing import ChannelStats
from hotswitch.kernel.notebook.jobs.channel_losses import channel_losses, losses_note
from hotswitch.kernel.notebook.jobs.rank_reports import RankReports


class Recorded:
    def __init__(self):
        self.writes = []

    def write(self, text, stream="stdout"):
        self.writes.append((stream, text))


def test_lines_that_never_arrived_are_counted_apart_from_the_ones_the_window_let_go():
    output = Recorded()
    reports = RankReports(output, on_started=lambda: None, on_failure=lambda: None, max_lines=10)
    for i in range(100):
        if not 40 <= i < 47:  # seven lines lost on the way
            reports.receive("rank-1", {"kind": "log", "stream": "stdout", "line": f"line {i}"})
    assert reports.losses() == {}  # unknown until the rank says how many it sent
    reports.receive("rank-1", {"kind": "finished", "lines": 100})
    head = reports.logs(1).splitlines()[:2]
    assert head == [
        "[hotswitch] 83 earlier lines of rank 1 were dropped",
        "[hotswitch] 7 lines of rank 1 never reached the kernel; the rank's own log file keeps every line",
    ]
    # dropped + kept + missing = 83 + 10 + 7: every line the rank sent accounted for
    assert reports.losses() == {1: {"missing_lines": 7, "unsent": 0}} and reports.kept_lines(1) == 10


def test_a_rank_that_gave_up_on_the_kernel_is_an_event_a_note_and_a_count():
    output = Recorded()
    reports = RankReports(output, on_started=lambda: None, on_failure=lambda: None)
    reports.receive("rank-0", {"kind": "unsent", "count": 12, "total": 12})
    reports.receive("rank-0", {"kind": "finished", "lines": 0})
    assert reports.log.of("unsent") == [{"type": "unsent", "rank": 0, "count": 12}]
    assert any("dropped 12 messages" in text for stream, text in output.writes if stream == "stderr")
    losses = channel_losses(ChannelStats(accepted=5, replayed=2), reports.losses())
    assert losses == {"refused": {"replayed": 2}, "ranks": {0: {"missing_lines": 0, "unsent": 12}}, "total": 14}
    note = losses_note(losses)
    assert "refused 2 messages (2 replayed)" in note and "rank 0 gave up on 12 messages" in note


def test_nothing_lost_says_nothing():
    losses = channel_losses(ChannelStats(accepted=9), {})
    assert losses == {"refused": {}, "ranks": {}, "total": 0} and losses_note(losses) == ""
