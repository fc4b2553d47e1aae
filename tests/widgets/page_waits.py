"""Waiting on a live JupyterLab page while a job runs: conditions checked on the page, and
what counts as progress (the kernel's and its processes' CPU, the page's text), so that a busy
machine slows a browser test down but never fails it."""

from __future__ import annotations

import contextlib
import time

import psutil

# Waits end when their condition holds. They fail only once nothing has progressed for STALL_S
# (the ranks and the kernel idle, nothing new on the page), or once the test has run CAP_S in
# all, before pytest's own limit, so that a failure prints what the job was doing: a busy machine
# slows the test down, it never fails it.
STALL_S = 180
CAP_S = 800
POLL_S = 0.25  # between checks of a condition on the page
BUSY = 0.2  # a process spending more CPU than this share of the time works (idle threads poll)


class Progress:
    """CPU the kernel and the processes it launched spend, and the page's text: what moves
    while work goes on."""

    def __init__(self, page, lab):
        self.page, self.lab = page, lab
        self.started = time.monotonic()
        self.seen = self._sample()

    def _sample(self) -> tuple:
        kernels = self.lab.kernels()
        cpu = [0.0, 0.0]  # the kernels', the rest's
        for process in self.lab.descendants():
            with contextlib.suppress(psutil.Error):  # it ended meanwhile
                cpu[process not in kernels] += sum(process.cpu_times()[:2])
        return time.monotonic(), cpu, self.page.evaluate("document.body.innerText.length")

    def look(self) -> None:
        """Note the time if anything worked since it was last noted."""
        now, cpu, text = sample = self._sample()
        then, cpu_then, text_then = self.seen
        if text != text_then or any((c - c0) > BUSY * (now - then) for c, c0 in zip(cpu, cpu_then)):
            self.seen = sample

    def idle_s(self) -> float:
        return time.monotonic() - self.seen[0]


def wait_for(progress: Progress, script: str, what: str):
    """Wait until ``script`` is truthy; fail saying ``what`` never happened once nothing has
    progressed for ``STALL_S`` seconds (or the test has run ``CAP_S``)."""
    started = time.monotonic()
    while True:
        if done := holds_within(progress.page, script, 2.0):
            print(f"{time.strftime('%H:%M:%S')} {what}: after {time.monotonic() - started:.0f} s")
            return done
        progress.look()
        if progress.idle_s() > STALL_S:
            raise AssertionError(f"{what} did not happen: nothing progressed for {progress.idle_s():.0f} s")
        if time.monotonic() - progress.started > CAP_S:
            raise AssertionError(f"{what} did not happen: the test ran {CAP_S} s")


def holds_within(page, script: str, seconds: float):
    """``script``'s value once it is truthy within ``seconds``, else None. Each check is one
    evaluation that waits its turn on the page: playwright's wait_for_function raced its own
    timeout on a page busy redrawing, and under load it timed out for minutes while its
    condition held."""
    deadline = time.monotonic() + seconds
    while True:
        if value := page.evaluate(script):
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(POLL_S)
