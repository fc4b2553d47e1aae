"""The cost model against the steps it predicted, on rank 0: a profile measured while the machine
was busy (and cached, so later runs plan on it) predicts steps that no longer take that long.
Past its first steps (which build what new shapes need), once the median error of the last
``WINDOW`` steps is past ``OFF_BY`` (and ``MIN_OFF_S`` a step), under ``auto``, the trainer
measures the profile again, once a run (``Trainer``'s ``reprofile``), and the new one replaces
the cached one."""

from __future__ import annotations

import statistics
from collections import deque

WARMUP = 2  # first steps left out: compiles, kernels' plans, the first switches
WINDOW = 5
OFF_BY = 0.20
# and at least this many seconds a step: below, measuring again costs more than it can save in a
# short run, and a busy machine's noise alone moves tiny steps by a fifth
MIN_OFF_S = 0.25


class PredictionWatch:
    def __init__(self, window: int = WINDOW, off_by: float = OFF_BY, warmup: int = WARMUP, min_s: float = MIN_OFF_S):
        self.errors: deque[float] = deque(maxlen=window)
        self.gaps: deque[float] = deque(maxlen=window)
        self.min_s = min_s
        self.off_by = off_by
        self.warmup = warmup
        self.seen = 0
        self.said = False

    def add(self, predicted: float | None, measured: float) -> str | None:
        """One step's predicted and measured seconds; why to measure the profile again (once),
        or None."""
        self.seen += 1
        if predicted is None or predicted <= 0 or self.said or self.seen <= self.warmup:
            return None
        self.errors.append(measured / predicted - 1.0)
        self.gaps.append(abs(measured - predicted))
        if len(self.errors) < (self.errors.maxlen or 0):
            return None
        median = statistics.median(self.errors)
        if abs(median) <= self.off_by or statistics.median(self.gaps) < self.min_s:
            return None
        self.said = True
        return (
            f"the cost model's step times were {-median / (1 + median):+.0%} off the last {len(self.errors)} steps "
            f"(median; measured {1 + median:.2f}x what it predicted)"
        )
