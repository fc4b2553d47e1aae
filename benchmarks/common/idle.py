"""Where a GPU step's device waited for its host (``breakdown.py``): the gaps between
consecutive kernels, and which host ranges were open during them -- the engine's own
(``runtime.profile_ranges``: inputs, forward, backward, update, document mask), PyTorch's
operators and the CUDA runtime's calls."""

from __future__ import annotations

import bisect
from collections import defaultdict

GAP_S = 1e-4  # shorter gaps are a launch's latency, not the host falling behind
TOP = 12


def device_idle(
    kernels: list[tuple[float, float]], host: list[tuple[str, float, float]], span: tuple[float, float]
) -> dict:
    """``kernels``: the device's (start, end) seconds; ``host``: (name, start, end) ranges;
    ``span``: the step's (start, end). The device's idle seconds within the span (gaps of at
    least ``GAP_S``, the lead-in before its first kernel and the tail after its last included),
    how many such gaps, and the host ranges open longest during them: [name, seconds]."""
    gaps = _gaps(sorted(kernels), span)
    starts = [lo for lo, _ in gaps]
    during: dict[str, float] = defaultdict(float)
    for name, lo, hi in host:
        first = max(bisect.bisect_right(starts, lo) - 1, 0)
        for gap_lo, gap_hi in gaps[first:]:
            if gap_lo >= hi:
                break
            overlap = min(hi, gap_hi) - max(lo, gap_lo)
            if overlap > 0:
                during[name] += overlap
    longest = sorted(during.items(), key=lambda item: -item[1])[:TOP]
    return {
        "idle_s": sum(hi - lo for lo, hi in gaps),
        "gaps": len(gaps),
        "during": [[name[:120], seconds] for name, seconds in longest],
    }


def _gaps(kernels: list[tuple[float, float]], span: tuple[float, float]) -> list[tuple[float, float]]:
    """The idle intervals of at least ``GAP_S`` between ``span``'s start, the kernels (sorted by
    start; they may overlap) and ``span``'s end."""
    gaps, busy_until = [], span[0]
    for start, end in [*kernels, (span[1], span[1])]:
        if start - busy_until >= GAP_S:
            gaps.append((busy_until, start))
        busy_until = max(busy_until, end)
    return gaps
