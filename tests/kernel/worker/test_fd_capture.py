"""What a rank writes below Python (to fd 1 and 2 directly, or from a subprocess) reaches the
channel line by line, labelled with its stream, and still reaches the original descriptors
(the agent's log), its rank log too; a subprocess left running is waited for a bounded time."""

import os
import subprocess
import time

from hotswitch.kernel.worker.fd_capture import BelowPython


class Lines:
    def __init__(self):
        self.got = []

    def __call__(self, stream, line):
        self.got.append((stream, line))

    def of(self, stream):
        return [line for s, line in self.got if s == stream]


def test_below_python_lines_are_sent_and_kept(capfd, tmp_path):
    sink, log = Lines(), open(tmp_path / "rank.log", "w", buffering=1)  # noqa: SIM115  # closed below, after stop()
    below = BelowPython(sink, log)
    out, err = below.start()
    os.write(1, b"one\ntw")
    os.write(2, "naïve\n".encode())
    subprocess.run(["sh", "-c", "echo from a child; echo child error >&2"], check=True)
    os.write(1, b"o\nh\xc3")  # a character split between two writes
    os.write(1, b"\xa9llo")  # and a last line without its newline
    assert below.stop()
    out.write("python's own, written through\n")  # Python's streams write to the original directly
    out.close()
    err.close()
    log.close()
    assert sink.of("stdout") == ["one", "twfrom a child", "o", "héllo"]
    assert sink.of("stderr") == ["naïve", "child error"]
    seen = capfd.readouterr()
    assert seen.out == "one\ntwfrom a child\no\nhéllo" + "python's own, written through\n"
    assert seen.err == "naïve\nchild error\n"
    assert sorted((tmp_path / "rank.log").read_text().splitlines()) == sorted(line for _, line in sink.got)
    assert os.write(1, b"") == 0  # the descriptors are back and open


def test_a_subprocess_left_running_is_waited_for_a_bounded_time():
    sink = Lines()
    below = BelowPython(sink, None)
    out, err = below.start()
    child = subprocess.Popen(["sh", "-c", "sleep 1; echo late"])
    began = time.monotonic()
    assert below.stop(linger_s=0.2) is False
    assert time.monotonic() - began < 0.9
    out.close()
    err.close()
    child.wait(30)
    deadline = time.monotonic() + 30
    while "late" not in sink.of("stdout") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sink.of("stdout") == ["late"]


def test_a_sink_that_fails_stops_sending_but_the_log_keeps_every_line(capfd):
    def closed(stream, line):
        raise RuntimeError("the channel is closed")

    below = BelowPython(closed, None)
    out, err = below.start()
    os.write(2, b"first\nsecond\n")
    out.close()
    err.close()
    assert below.stop()
    assert below.sink_failed and capfd.readouterr().err == "first\nsecond\n"
