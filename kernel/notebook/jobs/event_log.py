"""A job's events in arrival order, with subscribers and waiters; memory stays bounded.

The channel thread appends; any thread reads, subscribes or waits. Subscribers get every
event exactly once and in order, from one thread at a time: ``subscribe`` replays what has
already arrived and registers the callback under the same lock that delivery takes, so no
event falls between the two.

Only the newest ``capacity`` events are kept (a long run sends events without end); ``events``
is a ``Window``: indices count every event ever received, so ``len(events)``, ``events[i]``,
``events[mark:]`` and ``of(kind, since)`` mean the same as on a list that kept them all, except
that events older than the window are gone. ``counts`` counts every event by type.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Sequence

Callback = Callable[[dict], None]
WAIT_SLICE_S = 0.1  # waits wake at least this often, so that a kernel interrupt gets through
EVENT_WINDOW = 20_000  # events a job keeps in the kernel; older ones are dropped


class Window(Sequence):
    """The newest ``capacity`` items of an append-only sequence, indexed as if none were dropped.

    ``len`` counts every item ever appended; ``dropped`` how many fell out (oldest first), so
    the items kept are those at indices ``dropped`` to ``len - 1``. A slice returns (as a list)
    the kept items in its range; an int index below ``dropped`` raises IndexError; iterating
    yields the kept items. Thread-safe: one appender, any number of readers.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"a window keeps at least 1 item; got capacity={capacity}")
        self.capacity = capacity
        self.dropped = 0
        self._items: collections.deque = collections.deque(maxlen=capacity)
        self._lock = threading.Lock()

    def append(self, item) -> None:
        with self._lock:
            if len(self._items) == self.capacity:
                self.dropped += 1
            self._items.append(item)

    def __len__(self) -> int:
        with self._lock:
            return self.dropped + len(self._items)

    def __getitem__(self, index):
        with self._lock:
            total = self.dropped + len(self._items)
            if isinstance(index, slice):
                start, stop, step = index.indices(total)
                kept = range(start, stop, step)
                if step > 0 and kept and kept[0] >= self.dropped:  # the common case: one contiguous run
                    lo = start - self.dropped
                    return list(itertools.islice(self._items, lo, lo + (stop - start), step))
                return [self._items[i - self.dropped] for i in kept if i >= self.dropped]
            position = index + total if index < 0 else index
            if not self.dropped <= position < total:
                raise IndexError(
                    f"index {index} is not kept: {total} received, the newest {self.capacity} kept "
                    f"(indices {self.dropped} to {total - 1})"
                )
            return self._items[position - self.dropped]

    def __iter__(self) -> Iterator:
        with self._lock:
            return iter(list(self._items))

    def __reversed__(self) -> Iterator:
        with self._lock:
            return reversed(list(self._items))

    def __eq__(self, other) -> bool:
        if isinstance(other, (list, Window)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list: the idiom mypy types as object's

    def __repr__(self) -> str:
        return f"<Window of {len(self)} ({self.dropped} dropped): {list(self)!r}>"


class JobEnded(RuntimeError):
    """The job ended before what was waited for happened."""


class EventLog:
    """Keeps the newest ``capacity`` events (``EVENT_WINDOW`` when not given)."""

    def __init__(self, capacity: int | None = None):
        capacity = EVENT_WINDOW if capacity is None else capacity
        self.events = Window(capacity)  # the newest ``capacity`` events, indexed from the first
        self.received_at = Window(capacity)  # the kernel's time.time() when events[i] arrived
        self.counts: collections.Counter = collections.Counter()  # every event ever, by "type"
        self.errors: list[str] = []  # subscribers that raised, as messages
        self._subscribers: list[Callback] = []
        self._delivery = threading.RLock()  # one delivery at a time, in order; a callback may subscribe
        self._changed = threading.Condition()

    def append(self, event: dict) -> None:
        with self._delivery:
            with self._changed:
                self.events.append(event)
                self.received_at.append(time.time())
                self.counts[event.get("type")] += 1
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
        """The kept events of type ``kind`` from index ``since`` (counting every event received)
        on whose ``fields`` have those values."""
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
