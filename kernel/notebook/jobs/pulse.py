"""Liveness without pids, kernel side: on the job's watcher thread, a heartbeat to every rank
that runs every ``HEARTBEAT_S``, and the ranks that have been silent too long (any message
counts), so the job can be marked lost. Ranks send a heartbeat every second themselves
(``worker.heartbeat``); the timeout is the same ``$HOTSWITCH_HEARTBEAT_TIMEOUT_S``."""

from __future__ import annotations

import time

from hotswitch.kernel.channel.kernel_end import KernelChannel
from hotswitch.kernel.notebook.jobs.rank_reports import RankReports
from hotswitch.kernel.worker.heartbeat import HEARTBEAT_S, heartbeat_timeout


class Pulse:
    def __init__(self, channel: KernelChannel, reports: RankReports, timeout: float | None = None):
        self.channel = channel
        self.reports = reports
        self.timeout = timeout if timeout is not None else heartbeat_timeout()
        self._beat_at = 0.0

    def tick(self) -> dict[int, float]:
        """Beat if it is time; the ranks silent for longer than the timeout, with their silence."""
        now = time.monotonic()
        if now - self._beat_at >= HEARTBEAT_S:
            self._beat_at = now
            for rank in self.reports.running_ranks():
                self.channel.send(rank, {"kind": "heartbeat"})
        if self.timeout is None:
            return {}
        return {r: s for r, s in self.reports.silences().items() if s > self.timeout}
