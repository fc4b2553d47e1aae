"""The H200 preset against this project's own measured one-GPU steps: its figures are the fit's,
it predicts the shapes it was not fitted on better than the curve carried from the H800 logs,
and the memory model predicts every measured peak."""

import pytest

from hotswitch.backend.sim.device import CALIBRATION_H200, PRESETS
from hotswitch.backend.sim.paper import calibrate_h200


@pytest.fixture(scope="module")
def h200():
    return calibrate_h200.report()


def test_the_stored_h200_figures_are_what_the_fit_finds():
    found = calibrate_h200.fit()
    assert found == pytest.approx(CALIBRATION_H200, rel=0.02)
    assert PRESETS["H200"].attention_mfu == CALIBRATION_H200["attention_mfu"]


def test_the_h200_fit_predicts_the_held_out_shapes_better_than_the_carried_curve(h200):
    held = [p for p in h200["points"] if not p["fitted_on"]]
    assert {p["point"].split()[0] for p in held} == {"7b", "13b"}  # other widths than the fitted 1b
    assert h200["worst_fit_err"] <= 0.12
    assert h200["mean_held_out_err"] < h200["mean_held_out_err_carried"] / 2
    assert h200["worst_held_out_err"] <= 0.25  # the 20% goal: README says by how much it is missed


def test_the_memory_model_predicts_every_measured_gpu_peak_within_one_percent(h200):
    assert h200["worst_peak_err"] <= 0.01, [(p["point"], p["peak_rel_err"]) for p in h200["points"]]
