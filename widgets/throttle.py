"""Coalesce many update requests into at most one call per interval, from any thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Throttle:
    """``request()`` is cheap and thread-safe; ``flush`` then runs on a timer thread no sooner
    than ``interval`` s after its previous run, once for all requests made meanwhile.
    ``flushes`` counts the runs; ``pending`` is true while a run is scheduled or running.
    ``cancel()`` drops a scheduled run."""

    def __init__(self, flush: Callable[[], None], interval: float = 0.1):
        self._flush = flush
        self.interval = interval
        self.flushes = 0
        self._lock = threading.Lock()
        self._flushing = threading.Lock()  # a slow flush is never overlapped by the next one
        self._timer: threading.Timer | None = None
        self._last = float("-inf")

    def request(self) -> None:
        with self._lock:
            if self._timer is not None:
                return
            delay = max(0.0, self._last + self.interval - time.monotonic())
            self._timer = threading.Timer(delay, self._run)
            self._timer.daemon = True
            self._timer.start()

    def _run(self) -> None:
        with self._flushing:
            with self._lock:
                self._timer = None
                self._last = time.monotonic()
                self.flushes += 1
            self._flush()

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    @property
    def pending(self) -> bool:
        with self._lock:
            return self._timer is not None or self._flushing.locked()
