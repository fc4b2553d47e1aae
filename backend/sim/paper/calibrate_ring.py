"""The ring model's cost of splitting attention (``sim.context_parallel.RING_STEP``) fitted to
this project's measured ring blocks on an H200 (``sim.paper.measured_ring``).

A rank's measured seconds beyond its share of the whole attention are fitted, least squares,
as ``cp`` steps of a fixed time plus memory traffic per element of its local queries at the
H200's memory bandwidth; ``report()`` gives every point's rank time as measured and as the
model predicts it (its share of the measured whole attention plus the fitted split).
"""

from __future__ import annotations

import numpy as np

from hotswitch.backend.sim.context_parallel import RING_STEP, RingStep
from hotswitch.backend.sim.device import PRESETS
from hotswitch.backend.sim.paper.measured_ring import COMMAND, DEVICE, HEAD_DIM, POINTS, RingBlocks

LONG = 32768  # sequences from here on are the ones context parallelism is for


def _hbm_bw() -> float:
    return PRESETS["H200"].hbm_bw


def predict(point: RingBlocks, step: RingStep = RING_STEP) -> float:
    """A rank's seconds: its share of the measured whole attention plus ``step``'s split."""
    split = step.split_s(point.heads, point.length / point.cp, HEAD_DIM, point.cp, _hbm_bw())
    return point.whole_s / point.cp + split


def fit(points: tuple[RingBlocks, ...] = POINTS) -> RingStep:
    """The step's fixed seconds and bytes per element minimising the squared error of every
    point's extra seconds."""
    elements = [p.heads * p.length / p.cp * HEAD_DIM / _hbm_bw() for p in points]
    columns = np.array([[p.cp, p.cp * e] for p, e in zip(points, elements)])
    (seconds, per_element), *_ = np.linalg.lstsq(columns, np.array([p.extra_s for p in points]), rcond=None)
    return RingStep(seconds=float(seconds), bytes_per_element=float(per_element))


def report() -> dict:
    """Every point's rank seconds, measured and predicted, and the worst errors: over all
    points, and over sequences of ``LONG`` tokens or more."""
    rows = [
        {
            "heads": p.heads,
            "length": p.length,
            "cp": p.cp,
            "efficiency": p.whole_s / p.cp / p.rank_s,
            "measured_s": p.rank_s,
            "predicted_s": predict(p),
            "rel_err": (predict(p) - p.rank_s) / p.rank_s,
        }
        for p in POINTS
    ]
    return {
        "device": DEVICE,
        "source": COMMAND,
        "ring_step": {"seconds": RING_STEP.seconds, "bytes_per_element": RING_STEP.bytes_per_element},
        "points": rows,
        "worst_err": max(abs(r["rel_err"]) for r in rows),
        "worst_long_err": max(abs(r["rel_err"]) for r in rows if r["length"] >= LONG),
    }
