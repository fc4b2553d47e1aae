"""What a job's events say, mixed into ``Job``: the events the ranks emitted, subscriptions to
them, selections of them, and waits on them (``event_log``, the ranks' reports' log)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hotswitch.kernel.notebook.jobs.rank_reports import RankReports


class JobEvents:
    """Reads ``_reports.log`` of the ``Job`` it is mixed into; ``_ended_reason`` says how the
    job ended (None while it runs)."""

    _reports: RankReports

    def _ended_reason(self) -> str | None:
        raise NotImplementedError

    @property
    def events(self) -> Sequence[dict]:
        """The events the ranks emitted (with "rank"), in arrival order; grows while the job runs.
        A bounded window (``event_log.Window``): ``len`` counts every event received, indices are
        absolute, and the oldest are dropped once the window is full."""
        return self._reports.log.events

    @property
    def event_received_at(self) -> Sequence[float]:
        """The kernel's ``time.time()`` when each of ``events`` arrived."""
        return self._reports.log.received_at

    def on_event(self, callback: Callable[[dict], None], replay: bool = True) -> Callable[[], None]:
        """Call ``callback(event)`` for every event, in order: first those already received (with
        ``replay``), then each as it arrives, on the channel thread (keep it quick). Returns a
        function that unsubscribes."""
        return self._reports.log.subscribe(callback, replay)

    def events_of(self, kind: str, since: int = 0, **fields) -> list[dict]:
        """The events of type ``kind`` from index ``since`` of ``events`` on, whose ``fields``
        have the given values: ``job.events_of("control", mark, command="pause")``."""
        return self._reports.log.of(kind, since, **fields)

    def wait_until(self, predicate: Callable[[], object], timeout: float = 300.0) -> object:
        """Block until ``predicate()`` is truthy (looked at whenever an event arrives) and return
        its value: ``job.wait_until(lambda: job.events_of("step"))``. Raises ``JobEnded`` with the
        job's status if it ends first, ``TimeoutError`` after ``timeout`` seconds."""
        return self._reports.log.wait_until(predicate, timeout, self._ended_reason)

    @property
    def plan(self) -> dict | None:
        """The last "plan" event, or None."""
        return self._last_event("plan")

    @property
    def graphs(self) -> dict | None:  # the last "graphs" event, or None
        return self._last_event("graphs")

    def _last_event(self, kind: str) -> dict | None:
        return next((e for e in reversed(self.events) if e.get("type") == kind), None)
