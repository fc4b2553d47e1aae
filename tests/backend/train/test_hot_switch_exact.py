"""Hot-switched training on real gloo ranks equals one-device training, step by step."""

import pytest

from hotswitch.backend.runtime.spawn import spawn_ranks

from .train_workers import hot_switch_run, reference_run

STEPS = 20
PLAN = [("tp4", 128), ("dp2tp2", 48), ("dp4", 0)]


@pytest.fixture(scope="module")
def reference():
    return reference_run(STEPS)


def relative(a, b):
    return abs(a - b) / abs(b)


def test_every_step_and_the_final_parameters_match_one_device(reference):
    ref_losses, ref_params = reference
    results = spawn_ranks(hot_switch_run, 4, STEPS, PLAN)
    losses, params, used, order = results[0]
    assert used == ["dp1tp4pp1", "dp2tp2pp1", "dp4tp1pp1"], "every strategy must have trained some sequences"
    assert order[-1] == "dp1tp4pp1"  # the instantiation strategy runs last and updates in place
    assert all(r[0] == losses for r in results), "ranks disagree on the loss"
    worst = max(relative(a, b) for a, b in zip(losses, ref_losses))
    assert worst <= 1e-5, f"a step's loss is off by {worst:.2e}"
    for name, ref in ref_params.items():
        error = ((params[name] - ref).abs().max() / ref.abs().max()).item()
        assert error <= 1e-4, f"{name} off by {error:.2e} after {STEPS} steps"
    assert ref_losses[-1] < ref_losses[0]  # it does learn
