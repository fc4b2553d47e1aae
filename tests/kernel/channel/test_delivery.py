"""Nothing a rank sends is lost when the kernel falls behind: the kernel confirms what it folded
in, a flooding rank waits for it (bounded in flight), and closing waits for the last message."""

import threading
import time

from hotswitch.kernel.channel import worker_end
from hotswitch.kernel.channel.kernel_end import KernelChannel
from hotswitch.kernel.channel.signing import new_key
from hotswitch.kernel.channel.worker_end import WorkerChannel

from ..kernel_session import wait_until

LIMIT = 64 * 1024


def test_a_flood_into_a_slow_kernel_arrives_whole_in_order_and_never_runs_ahead_by_more_than_a_window(monkeypatch):
    monkeypatch.setattr(worker_end, "WINDOW_MESSAGES", 64)
    key = new_key()
    received, ahead = [], []
    worker = None

    def slow_kernel(sender, body):  # a busy kernel: every message takes a while to fold in
        time.sleep(0.0005)
        if body["kind"] == "event":
            received.append(body["n"])
            ahead.append(worker.unconfirmed)

    channel = KernelChannel(key, slow_kernel, max_bytes=LIMIT)
    worker = WorkerChannel(channel.address, key, rank=0, max_bytes=LIMIT)
    beats = threading.Thread(target=lambda: [worker.try_send({"kind": "heartbeat"}) for _ in range(200)])
    try:
        beats.start()  # heartbeats from another thread interleave without breaking the order
        for n in range(3000):
            worker.send({"kind": "event", "n": n})
        beats.join()
        assert worker.close() == 0  # every message confirmed before the socket closed
        assert received == list(range(3000))
        assert max(ahead) <= 64 and channel.stats.replayed == 0 and channel.stats.dropped == 0
    finally:
        channel.close()


def test_lines_printed_faster_than_the_kernel_reads_go_gathered_in_order_and_all_arrive():
    key = new_key()
    lines, messages = [], []

    def slow_kernel(sender, body):
        time.sleep(0.002)
        messages.append(body)
        if body["kind"] == "log":
            lines.extend(body["lines"] if "lines" in body else [[body["stream"], body["line"]]])

    channel = KernelChannel(key, slow_kernel, max_bytes=LIMIT)
    worker = WorkerChannel(channel.address, key, rank=0, max_bytes=LIMIT)
    try:
        for n in range(20_000):
            worker.send_line("stderr" if n % 7 == 0 else "stdout", f"line {n}")
            if n == 10_000:
                worker.send({"kind": "event", "n": n})  # an event keeps its place among the lines
        assert worker.close() == 0 and worker.lines_sent == 20_000
        assert lines == [["stderr" if n % 7 == 0 else "stdout", f"line {n}"] for n in range(20_000)]
        events = [i for i, body in enumerate(messages) if body["kind"] == "event"]
        before = sum(len(b.get("lines", [0])) for b in messages[: events[0]] if b["kind"] == "log")
        assert before == 10_001  # lines 0..10000 went before the event, the rest after
        assert len(messages) < 20_000 // 10  # gathered: far fewer messages than lines
    finally:
        channel.close()


def test_a_rank_gives_up_on_a_kernel_that_is_gone_counts_what_it_dropped_and_says_so(monkeypatch):
    monkeypatch.setattr(worker_end, "WINDOW_MESSAGES", 8)
    monkeypatch.setattr(worker_end, "AWAY_S", 0.5)
    key = new_key()
    got = []
    channel = KernelChannel(key, lambda sender, body: got.append(body), max_bytes=LIMIT)
    worker = WorkerChannel(channel.address, key, rank=0, max_bytes=LIMIT)
    notes = []
    worker.on_note = notes.append
    worker.send({"kind": "started"})
    assert wait_until(lambda: worker.receive_all() == [] and worker.unconfirmed == 0)
    channel.close()  # the kernel is gone
    for n in range(20):
        worker.send_line("stdout", str(n))
    assert worker.lines_sent == 20
    lost = worker.close()
    # 8 went out unconfirmed before the window filled, the other 12 were given up on
    assert (worker.unsent, lost) == (12, 20)
    assert len(notes) == 1 and "silent" in notes[0]
    assert got == [{"kind": "started"}]


def test_a_line_longer_than_a_small_channel_carries_is_cut_saying_so_not_fatal():
    key = new_key()
    lines = []

    def kernel(sender, body):
        if body["kind"] == "log":
            lines.extend(body["lines"] if "lines" in body else [[body["stream"], body["line"]]])

    channel = KernelChannel(key, kernel, max_bytes=4096)
    worker = WorkerChannel(channel.address, key, rank=0, max_bytes=4096)
    try:
        worker.send_line("stdout", "y" * 9000)
        worker.send_line("stdout", "\U0001f389" * 9000)  # 12 bytes each, escaped in JSON
        for _ in range(50):  # gathered lines of wide characters stay within the limit too
            worker.send_line("stdout", "\u00e9" * 300)
        assert worker.close() == 0
        assert channel.stats.dropped == 0
        assert lines[0][1].startswith("y" * worker.line_chars) and lines[0][1].endswith(" bytes cut]")
        assert lines[1][1].endswith(f"[... {4 * (9000 - worker.line_chars)} bytes cut]")
        assert len(lines) == 52
    finally:
        channel.close()
