"""A job's events in arrival order, with subscribers and waiters.

The channel thread appends; any thread reads, subscribes or waits. Subscribers get every
event exactly once and in order, from one thread at a time: ``subscribe`` replays what has
already arrived and registers the callback under the same lock that delivery takes, so no
event falls between the two.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

Callback = Callable[[dict], None]
WAIT_SLICE_S = 0.1  # waits wake at least this often, so that a kernel interrupt gets through


class JobEnded(RuntimeError):
    """The job ended before what was waited for happened."""


class EventLog:
    def __init__(self):
        self.events: list[dict] = []
        self.received_at: list[float] = []  # the kernel's time.time() when events[i] arrived
        self.errors: list[str] = []  # subscribers that raised, as messages
        self._subscribers: list[Callback] = []
        self._delivery = threading.RLock()  # one delivery at a time, in order; a callback may subscribe
        self._changed = threading.Condition()

    def append(self, event: dict) -> None:
        with self._delivery:
            with self._changed:
                self.events.append(event)
                self.received_at.append(time.time())
                self._changed.notify_all()
            for callback in list(self._subscribers):
                self._call(callback, event)

    def subscribe(self, callback: Callback, replay: bool = True) -> Callable[[], None]:
        """Call ``callback(event)`` for every event from now on (after those already received,
        when ``replay``). Callbacks run on the channel thread: keep them quick. A callback that
        raises is reported in ``errors`` and stays subscribed. Returns a function that unsubscribes."""
        with self._delivery:
            for event in list(self.events) if replay else []:
                self._call(callback, event)
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._delivery:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def of(self, kind: str, since: int = 0, **fields) -> list[dict]:
        """The events of type ``kind`` from index ``since`` on whose ``fields`` have those values."""
        with self._changed:
            recent = self.events[since:]
        return [e for e in recent if e.get("type") == kind and all(e.get(k) == v for k, v in fields.items())]

    def wake(self) -> None:
        """Wake waiters to look again (the job's status changed)."""
        with self._changed:
            self._changed.notify_all()

    def wait_until(self, predicate: Callable[[], object], timeout: float, ended: Callable[[], str | None]) -> object:
        """Block until ``predicate()`` is truthy and return its value. ``ended()`` returns why the
        job is over (or None while it runs): once it is over, the predicate gets a last look and
        ``JobEnded`` is raised with that reason; ``TimeoutError`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                reason = ended()  # read before the predicate: an event that ended the job is seen
                value = predicate()
                if value:
                    return value
                if reason is not None:
                    raise JobEnded(f"the job ended ({reason}) before that happened; {len(self.events)} events")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"not within {timeout:g} s; the job is still running, {len(self.events)} events")
                self._changed.wait(min(WAIT_SLICE_S, left))

    def _call(self, callback: Callback, event: dict) -> None:
        try:
            callback(event)
        except Exception as error:  # a notebook's callback must not kill the channel thread
            self.errors.append(f"{getattr(callback, '__name__', callback)!r} raised {error!r} on a {event.get('type')}")
