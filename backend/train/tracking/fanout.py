"""The sink that hands each event to the run's own sink and to its trackers (rank 0)."""

from __future__ import annotations

import atexit

from hotswitch.backend.train.loop.events import Sink
from hotswitch.backend.train.tracking.trackers import Tracker


class TrackedSink:
    """``sink`` first, then every tracker; trackers are closed (flushed) by the run's ``done``
    event, by ``close(failed=True)`` where the run raised, or at exit if neither came."""

    def __init__(self, sink: Sink, trackers: list[Tracker]):
        self.sink = sink
        self.trackers = trackers
        self.open = True
        atexit.register(self.close)

    def __call__(self, event: dict) -> None:
        self.sink(event)
        if not self.open:
            return
        for tracker in self.trackers:
            tracker(event)
        if event.get("type") == "done":
            self.close()

    def close(self, failed: bool = False) -> None:
        """Close every tracker (once), a failed run marked so where the tracker keeps a status."""
        if self.open:
            self.open = False
            for tracker in self.trackers:
                tracker.close(failed)
