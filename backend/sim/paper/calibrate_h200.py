"""The H200 preset fitted to this project's own one-GPU runs of the engine on an H200
(``sim.paper.measured_h200``): step time through ``sim.compute`` for one device, and peak memory
through ``train.planning.memory``.

``fit()`` finds the same four figures as ``sim.paper.calibrate`` (efficiency curve, attention
efficiency, fixed cost per layer) on the 1b points; ``report()`` gives every point's error,
fitted or held out, beside the error of the calibration carried from the H800 logs, and the
memory model's error on each measured peak.
"""

from __future__ import annotations

from typing import TypedDict

from hotswitch.backend.models.config import ModelConfig, get_config
from hotswitch.backend.precision import Precision
from hotswitch.backend.sim.compute import SimulatedStrategy, update_seconds
from hotswitch.backend.sim.device import CALIBRATION, CALIBRATION_H200, DeviceSpec, uncalibrated
from hotswitch.backend.sim.paper.calibrate import HELD_OUT_LIMIT, fit_figures
from hotswitch.backend.sim.paper.measured_h200 import COMMAND, DEVICE, FIT, HELD_OUT, EngineStep
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.memory import WHOLE, activation_bytes, model_state_bytes

BF16 = Precision.of("bf16")


class PointRow(TypedDict):
    """One measured point of ``report()``."""

    point: str
    fitted_on: bool
    measured_s: float
    predicted_s: float
    rel_err: float
    carried_rel_err: float
    peak_bytes: int
    predicted_peak_bytes: float
    peak_rel_err: float


def measured_config(point: EngineStep) -> ModelConfig:
    """The model a point trained: its preset, with ``layers`` blocks where it was cut."""
    return get_config(point.preset).with_(**({"n_layers": point.layers} if point.layers else {}))


def one_gpu_peak_bytes(config: ModelConfig, documents: int, length: int, precision: Precision = BF16) -> float:
    """One device training ``config`` alone: parameters, gradients, master weights and AdamW's
    moments, and the activations of ``documents`` sequences of ``length`` in one micro-batch,
    with the loss the engine ran when the peaks were measured (``WHOLE``: before
    ``models.chunked_loss``)."""
    single = Strategy()
    states = model_state_bytes(config, single, precision) + precision.master_bytes * config.n_params
    return states + documents * activation_bytes(config, single, length, precision, WHOLE)


def predict(point: EngineStep, spec: DeviceSpec) -> float:
    """Predicted seconds of the measured step ``point`` on ``spec``: its micro-batch, then AdamW."""
    config = measured_config(point)
    single = Strategy()
    cluster = spec.cluster(1)
    step = SimulatedStrategy(config, single, cluster, spec, BF16).documents_s([point.length] * point.documents)
    return step + update_seconds(config, cluster, spec, BF16, single)


def fit(points: tuple[EngineStep, ...] = FIT) -> dict[str, float]:
    """The H200 figures minimising the squared log error of ``points`` (start: the stored ones)."""
    return fit_figures(predict, points, uncalibrated("H200"), CALIBRATION_H200)


def report() -> dict:
    """Every measured point: seconds measured and predicted (relative error, and that of the
    calibration carried from the H800 logs), peak bytes measured and predicted."""
    fitted, carried = (uncalibrated("H200").calibrated(**c) for c in (CALIBRATION_H200, CALIBRATION))
    rows: list[PointRow] = []
    for used, points in ((True, FIT), (False, HELD_OUT)):
        for p in points:
            predicted = predict(p, fitted)
            peak = one_gpu_peak_bytes(measured_config(p), p.documents, p.length)
            rows.append(
                {
                    "point": p.name,
                    "fitted_on": used,
                    "measured_s": p.step_s,
                    "predicted_s": predicted,
                    "rel_err": (predicted - p.step_s) / p.step_s,
                    "carried_rel_err": (predict(p, carried) - p.step_s) / p.step_s,
                    "peak_bytes": p.peak_bytes,
                    "predicted_peak_bytes": peak,
                    "peak_rel_err": (peak - p.peak_bytes) / p.peak_bytes,
                }
            )
    held = [r for r in rows if not r["fitted_on"]]
    return {
        "device": DEVICE,
        "source": COMMAND,
        "calibration": dict(CALIBRATION_H200),
        "points": rows,
        "worst_fit_err": max(abs(r["rel_err"]) for r in rows if r["fitted_on"]),
        "worst_held_out_err": max(abs(r["rel_err"]) for r in held),
        "held_out_within_limit": all(abs(r["rel_err"]) <= HELD_OUT_LIMIT for r in held),
        "mean_held_out_err": sum(abs(r["rel_err"]) for r in held) / len(held),
        "mean_held_out_err_carried": sum(abs(r["carried_rel_err"]) for r in held) / len(held),
        "worst_peak_err": max(abs(r["peak_rel_err"]) for r in rows),
    }
