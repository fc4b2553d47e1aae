"""The device model fitted to published measurements: ``sim.paper.measured``'s Megatron-LM step times,
predicted through ``sim.paper.megatron`` on batches drawn from the lengths the same runs counted.

``fit()`` finds the efficiency curve (``max_mfu``, ``half_work``) and the fixed cost per layer
and micro-batch that minimise the squared log error over ``measured.FIT``; ``report()`` gives
the error on every point, fitted or held out (what ``python -m benchmarks.paper --json`` prints).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypedDict

from hotswitch.backend.precision import Precision
from hotswitch.backend.sim.datasets import PAPER_BATCH, batch_lengths
from hotswitch.backend.sim.device import CALIBRATION, DeviceSpec, uncalibrated
from hotswitch.backend.sim.paper.measured import FIT, HELD_OUT, LOGS, MeasuredStep
from hotswitch.backend.sim.paper.megatron import megatron_step_s
from hotswitch.backend.sim.scenario import sim_model
from hotswitch.backend.strategy import Strategy

DEVICE = "H800"  # what the logged runs ran on
SEEDS = (0, 1, 2)  # batches averaged per packed point (the logs' medians span many batches)
FIGURES = ("max_mfu", "half_work", "attention_mfu", "layer_overhead_s")
HELD_OUT_LIMIT = 0.20  # a point not fitted on must be predicted within this relative error


class PointRow(TypedDict):
    """One logged point of ``report()``."""

    point: str
    log: str
    fitted_on: bool
    measured_s: float
    predicted_s: float
    rel_err: float


def predict(point: MeasuredStep, spec: DeviceSpec) -> float:
    """Predicted seconds of the logged run ``point`` on ``spec``."""
    config = sim_model(point.model)
    precision = Precision.of("bf16")
    cluster = spec.cluster(point.gpus)
    strategy = Strategy(point.dp, point.tp, point.pp, sp=point.tp > 1)
    if not point.packed:
        lengths = [point.context] * PAPER_BATCH
        return megatron_step_s(config, cluster, spec, precision, strategy, point.mbs, lengths)
    steps = [
        megatron_step_s(
            config,
            cluster,
            spec,
            precision,
            strategy,
            point.mbs,
            batch_lengths("commoncrawl", point.context, seed=seed),
        )
        for seed in SEEDS
    ]
    return sum(steps) / len(steps)


def fit_figures(
    predict_s: Callable[[Any, DeviceSpec], float], points: Sequence[Any], base: DeviceSpec, start: dict[str, float]
) -> dict[str, float]:
    """The ``FIGURES`` of ``base`` minimising the squared log error of ``predict_s(point, spec)``
    against each point's ``step_s`` (search from ``start``)."""
    from scipy.optimize import least_squares

    def residuals(x):
        spec = base.calibrated(**dict(zip(FIGURES, (math.exp(v) for v in x), strict=True)))
        return [math.log(predict_s(p, spec) / p.step_s) for p in points]

    first = [math.log(start[k]) for k in FIGURES]
    found = least_squares(residuals, first, diff_step=1e-3, bounds=([-5, 5, -5, -14], [0, 25, 0, -2]))
    return dict(zip(FIGURES, (math.exp(v) for v in found.x), strict=True))


def fit(points: tuple[MeasuredStep, ...] = FIT) -> dict[str, float]:
    """The calibration minimising the squared log error of ``points`` (start: the stored one)."""
    return fit_figures(predict, points, uncalibrated(DEVICE), CALIBRATION)


def report(spec: DeviceSpec | None = None) -> dict:
    """Measured and predicted seconds of every logged point, with the relative error; whether
    every held-out point is within ``HELD_OUT_LIMIT``."""
    spec = spec or uncalibrated(DEVICE).calibrated(**CALIBRATION)
    rows: list[PointRow] = []
    for used, points in ((True, FIT), (False, HELD_OUT)):
        for p in points:
            predicted = predict(p, spec)
            rows.append(
                {
                    "point": p.name,
                    "log": LOGS + p.log,
                    "fitted_on": used,
                    "measured_s": p.step_s,
                    "predicted_s": predicted,
                    "rel_err": (predicted - p.step_s) / p.step_s,
                }
            )
    held = [abs(r["rel_err"]) for r in rows if not r["fitted_on"]]
    return {
        "device": spec.name,
        "calibration": dict(CALIBRATION),
        "points": rows,
        "worst_fit_err": max(abs(r["rel_err"]) for r in rows if r["fitted_on"]),
        "worst_held_out_err": max(held),
        "held_out_within_limit": max(held) <= HELD_OUT_LIMIT,
    }
