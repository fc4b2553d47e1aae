"""Following a job's launch to its end, on the job's watcher thread: teardown when asked or when
the timeout passes, then the channel's last messages before it closes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from hotswitch.kernel.channel.kernel_end import KernelChannel
from hotswitch.kernel.launch.launcher import Launcher
from hotswitch.kernel.notebook.jobs.rank_reports import RankReports

WATCH_EVERY_S = 0.1
KILL_AFTER_S = 5.0
# A teardown asked for by the job (a rank failed, the ranks went silent) first leaves the launch
# this long to end by itself: torchrun, the agent of every launcher, ends a node's other ranks
# once one fails and then reports which rank it saw end first and how; an agent signalled
# before that dies without its report, and the job's exit reason would blame a survivor.
AGENT_TEARDOWN_S = 3.0
# After the processes exit, wait this long without messages before closing the channel;
# after a clean exit, first wait (up to DRAIN_CLEAN_MAX_S) for every rank's "finished" marker,
# so that a slow receiving thread on a busy machine loses no trailing event.
DRAIN_QUIET_S = 0.2
DRAIN_MAX_S = 2.0
DRAIN_CLEAN_MAX_S = 10.0
# A launcher that cannot say how a job is (a cluster's API that does not answer) is asked again
# at the next poll; once it has failed this long the job is given up as lost.
UNANSWERED_S = 120.0
RETRY = object()


class LaunchUnanswered(RuntimeError):
    """The launcher has failed to answer for ``UNANSWERED_S``."""


class Asking:
    """Calls to a launcher: a failing call returns ``RETRY`` until the launcher has failed for
    ``unanswered_s`` in a row, then raises ``LaunchUnanswered`` with its last error."""

    def __init__(self, launcher: Launcher, unanswered_s: float = UNANSWERED_S):
        self.launcher = launcher
        self.unanswered_s = unanswered_s
        self.failing_since: float | None = None

    def __call__(self, method: Callable, *args, **kwargs):
        try:
            result = method(*args, **kwargs)
        except Exception as error:
            self.failing_since = self.failing_since or time.monotonic()
            if time.monotonic() - self.failing_since > self.unanswered_s:
                raise LaunchUnanswered(
                    f"--launcher {self.launcher.name} has not answered for {self.unanswered_s:g} s ({error}); "
                    "the job may still run: see the cluster's own tools"
                ) from error
            return RETRY
        self.failing_since = None
        return result


def wait_for_exit(
    launcher: Launcher,
    handle: str,
    teardown: threading.Event,
    deadline: float | None,
    on_timeout: Callable[[], float],
    on_tick: Callable[[], None] = lambda: None,
    unanswered_s: float = UNANSWERED_S,
) -> int:
    """Follow the launch ``handle`` until every process of it has exited; return its exit status.

    Once ``teardown`` has been set for ``AGENT_TEARDOWN_S`` (and the launch has not ended by
    itself meanwhile) or ``deadline`` (a ``time.time()``) has passed, every process gets
    SIGTERM, and SIGKILL ``KILL_AFTER_S`` later. ``on_timeout`` is called once the deadline has
    passed and returns how many seconds more the launch may take to end by itself (a trainer
    ending its step); ``on_tick`` is called at every poll. The launcher is asked (and told to kill) at most
    every ``status_every_s`` (a remote call for some); ``LaunchUnanswered`` once it has failed
    to answer for ``unanswered_s``.
    """
    ask = Asking(launcher, unanswered_s)
    terminated_at = None
    asked_at = 0.0
    killed_at = 0.0
    teardown_at = None
    ending: float | None = None  # after the deadline: what on_timeout granted
    while True:
        now = time.monotonic()
        if now - asked_at >= launcher.status_every_s:
            asked_at = now
            code = ask(launcher.status, handle)
            if code is not None and code is not RETRY:
                return code
        on_tick()
        timed_out = deadline is not None and time.time() > deadline
        if timed_out and ending is None:
            ending = on_timeout()
        if teardown.is_set() and teardown_at is None:
            teardown_at = now
        ended = timed_out and deadline is not None and time.time() > deadline + (ending or 0.0)
        due = ended or (teardown_at is not None and now - teardown_at >= AGENT_TEARDOWN_S)
        if due and terminated_at is None and ask(launcher.cancel, handle) is not RETRY:
            terminated_at = now
        if (
            terminated_at is not None
            and now - terminated_at > KILL_AFTER_S
            and now - killed_at >= launcher.status_every_s
        ):
            killed_at = now
            ask(launcher.cancel, handle, force=True)
        time.sleep(WATCH_EVERY_S)


def drain(channel: KernelChannel, reports: RankReports, clean: bool) -> None:
    """Let the last messages in, then close ``channel``.

    After a ``clean`` exit, first wait (up to ``DRAIN_CLEAN_MAX_S``) until every rank that
    started has reported its end; then until the channel has been quiet for ``DRAIN_QUIET_S``
    (``DRAIN_MAX_S`` at most).
    """
    began = time.monotonic()
    while clean and not reports.every_started_rank_ended() and time.monotonic() - began < DRAIN_CLEAN_MAX_S:
        time.sleep(DRAIN_QUIET_S / 4)
    began = time.monotonic()
    while channel.quiet_for() < DRAIN_QUIET_S and time.monotonic() - began < DRAIN_MAX_S:
        time.sleep(DRAIN_QUIET_S / 4)
    channel.close()
