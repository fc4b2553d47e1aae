"""A launcher whose cluster does not answer for a moment (an API server restarting, a slow
``scontrol``) does not end the watch, and one that never answers again ends it as a clear error
instead of a watcher thread dying and a job left ``running`` for ever."""

import threading
import time

import pytest

from hotswitch.kernel.launch.launcher import Launcher
from hotswitch.kernel.notebook.jobs import launch_watch
from hotswitch.kernel.notebook.jobs.launch_watch import LaunchUnanswered, wait_for_exit


class Flaky(Launcher):
    name = "flaky"
    status_every_s = 0.01

    def __init__(self, failures: int | None):
        self.failures, self.asked = failures, 0

    def submit(self, spec):
        return "flaky:1"

    def status(self, handle):
        self.asked += 1
        if self.failures is None or self.asked <= self.failures:
            raise ValueError("`scontrol show job` did not answer within 20 s")
        return 0

    def cancel(self, handle, force=False):
        pass

    def logs(self, handle, rank=None):
        return ""


def test_a_launcher_that_fails_for_a_moment_is_asked_again():
    launcher = Flaky(failures=3)
    assert wait_for_exit(launcher, "flaky:1", threading.Event(), None, lambda: 0.0) == 0
    assert launcher.asked == 4


def test_a_launcher_that_never_answers_ends_the_watch_naming_why():
    with pytest.raises(LaunchUnanswered, match=r"--launcher flaky has not answered for 0.2 s \(`scontrol show job`"):
        wait_for_exit(Flaky(failures=None), "flaky:1", threading.Event(), None, lambda: 0.0, unanswered_s=0.2)


class EndsItself(Launcher):
    """A launch whose own agent ends it at the ``polls``-th status poll; records each cancel."""

    name = "ends-itself"
    status_every_s = 0.0

    def __init__(self, polls: int):
        self.polls, self.asked, self.cancels = polls, 0, []

    def submit(self, spec):
        return "ends-itself:1"

    def status(self, handle):
        self.asked += 1
        return 1 if self.asked >= self.polls else None

    def cancel(self, handle, force=False):
        self.cancels.append(force)

    def logs(self, handle, rank=None):
        return ""


def test_a_teardown_leaves_the_launch_its_agents_grace_to_end_by_itself(monkeypatch):
    """Its agent then reports which rank ended first; a signalled agent would die without saying."""
    teardown = threading.Event()
    teardown.set()
    monkeypatch.setattr(launch_watch, "AGENT_TEARDOWN_S", float("inf"))
    launcher = EndsItself(polls=3)
    assert wait_for_exit(launcher, "ends-itself:1", teardown, None, lambda: 0.0) == 1
    assert launcher.cancels == []
    monkeypatch.setattr(launch_watch, "AGENT_TEARDOWN_S", 0.0)  # grace spent: SIGTERM at once
    launcher = EndsItself(polls=3)
    assert wait_for_exit(launcher, "ends-itself:1", teardown, None, lambda: 0.0) == 1
    assert launcher.cancels == [False]


def test_at_the_deadline_a_launch_has_the_time_on_timeout_grants_to_end_by_itself(monkeypatch):
    """A trainer asked to stop at its --timeout ends its step and writes its checkpoint first."""
    monkeypatch.setattr(launch_watch, "WATCH_EVERY_S", 0.001)
    granted = []
    launcher = EndsItself(polls=50)
    passed = time.time() - 1  # the deadline, a time.time()
    assert wait_for_exit(launcher, "ends-itself:1", threading.Event(), passed, lambda: granted.append(1) or 3600.0) == 1
    assert launcher.cancels == [] and granted == [1]  # asked once, and never ended by force
    launcher = EndsItself(polls=50)
    assert wait_for_exit(launcher, "ends-itself:1", threading.Event(), passed, lambda: 0.0) == 1
    assert launcher.cancels[0] is False  # nothing granted: SIGTERM at the deadline
