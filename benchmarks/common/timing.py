"""Timing one operation on a device, as the scripts that time kernels do."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from hotswitch.backend.runtime.devices import device_clock


def median_seconds(fn: Callable[[], object], device: str, repeat: int) -> float:
    """Median seconds of ``fn`` over ``repeat`` runs after one warm-up, the device's queued work
    counted (``device_clock``)."""
    fn()
    times = []
    for _ in range(repeat):
        start = device_clock(device)
        fn()
        times.append(device_clock(device) - start)
    return statistics.median(times)
