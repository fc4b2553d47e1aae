"""A job's event log: every subscriber sees every event once and in order, waits end with the job."""

import threading
import time

import pytest

from hotswitch.kernel.notebook.jobs.event_log import EventLog, JobEnded


def test_a_subscriber_joining_mid_stream_sees_every_event_once_in_order():
    log = EventLog()
    seen = []
    writer = threading.Thread(target=lambda: [log.append({"type": "step", "step": i}) for i in range(2000)])
    writer.start()
    time.sleep(0.001)
    unsubscribe = log.subscribe(seen.append)
    writer.join()
    assert [e["step"] for e in seen] == list(range(2000))
    unsubscribe()
    log.append({"type": "step", "step": 2000})
    assert len(seen) == 2000


def test_a_raising_callback_is_reported_and_the_others_still_hear():
    log, seen = EventLog(), []

    def broken(event):
        raise KeyError("oops")

    log.subscribe(broken)
    log.subscribe(seen.append)
    log.append({"type": "warning", "message": "m"})
    assert seen == [{"type": "warning", "message": "m"}]
    assert "KeyError('oops')" in log.errors[0] and "on a warning" in log.errors[0]


def test_of_selects_by_type_index_and_fields():
    log = EventLog()
    for e in ({"type": "control", "command": "pause"}, {"type": "step"}, {"type": "control", "command": "stop"}):
        log.append(e)
    assert log.of("control") == [{"type": "control", "command": "pause"}, {"type": "control", "command": "stop"}]
    assert log.of("control", 1) == [{"type": "control", "command": "stop"}]
    assert log.of("control", command="pause") == [{"type": "control", "command": "pause"}]


def test_wait_until_returns_the_value_raises_when_the_job_ends_first_or_on_timeout():
    log, ended = EventLog(), []
    threading.Timer(0.05, lambda: log.append({"type": "step"})).start()
    assert log.wait_until(lambda: log.of("step"), 30, lambda: None) == [{"type": "step"}]

    def end():
        ended.append("failed: rank 1 raised ZeroDivisionError")
        log.wake()

    threading.Timer(0.05, end).start()
    with pytest.raises(JobEnded, match=r"ended \(failed: rank 1 raised ZeroDivisionError\)"):
        log.wait_until(lambda: log.of("done"), 30, lambda: ended[0] if ended else None)
    with pytest.raises(TimeoutError, match=r"not within 0\.1 s; the job is still running"):
        log.wait_until(lambda: False, 0.1, lambda: None)
