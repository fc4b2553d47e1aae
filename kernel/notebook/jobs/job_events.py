"""What a job's events say: the events the ranks emitted, subscriptions to them, selections of
them, and waits on them, over the ranks' reports' log (``event_log``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hotswitch.kernel.notebook.jobs.event_log import EventLog


class JobEvents:
    """The events of one job, read from its ``log``; ``ended()`` says how the job ended (None
    while it runs), so that a wait ends with it."""

    def __init__(self, log: EventLog, ended: Callable[[], str | None]):
        self.log = log
        self.ended = ended

    @property
    def events(self) -> Sequence[dict]:
        """The events the ranks emitted (with "rank"), in arrival order; grows while the job runs.
        A bounded window (``event_log.Window``): ``len`` counts every event received, indices are
        absolute, and the oldest are dropped once the window is full."""
        return self.log.events

    @property
    def received_at(self) -> Sequence[float]:
        """The kernel's ``time.time()`` when each of ``events`` arrived."""
        return self.log.received_at

    def on_event(self, callback: Callable[[dict], None], replay: bool = True) -> Callable[[], None]:
        """Call ``callback(event)`` for every event, in order: first those already received (with
        ``replay``), then each as it arrives, on the channel thread (keep it quick). Returns a
        function that unsubscribes."""
        return self.log.subscribe(callback, replay)

    def of(self, kind: str, since: int = 0, **fields) -> list[dict]:
        """The events of type ``kind`` from index ``since`` of ``events`` on, whose ``fields``
        have the given values: ``job.events_of("control", mark, command="pause")``."""
        return self.log.of(kind, since, **fields)

    def wait_until(self, predicate: Callable[[], object], timeout: float = 300.0) -> object:
        """Block until ``predicate()`` is truthy (looked at whenever an event arrives) and return
        its value: ``job.wait_until(lambda: job.events_of("step"))``. Raises ``JobEnded`` with the
        job's status if it ends first, ``TimeoutError`` after ``timeout`` seconds."""
        return self.log.wait_until(predicate, timeout, self.ended)

    def last(self, kind: str) -> dict | None:
        """The newest event of type ``kind``, or None."""
        return next((e for e in reversed(self.events) if e.get("type") == kind), None)
