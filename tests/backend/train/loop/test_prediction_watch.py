"""A profile far off the steps it plans is measured again: the watch's rule (no ranks), and a
trainer on 2 ranks whose cost model was made to predict 5 s more per step than its steps take
measures its profile again, once, and plans by the new one (tests/backend/train/loop/loop_workers.py)."""

from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.loop.prediction_watch import PredictionWatch

from .loop_workers import loop_spec, misled_run


def test_the_watch_speaks_once_past_its_warmup_when_the_median_error_is_past_its_bound():
    watch = PredictionWatch(window=3, off_by=0.2, warmup=2, min_s=0.0)
    said = [watch.add(1.0, 9.0), watch.add(1.0, 9.0)]  # the warm-up steps: never counted
    said += [watch.add(1.0, 1.1), watch.add(1.0, 1.5), watch.add(None, 5.0)]  # no prediction: not counted
    assert said == [None] * 5
    reason = watch.add(1.0, 1.6)  # median of 1.1, 1.5, 1.6: +50%
    assert reason is not None and "measured 1.50x what it predicted" in reason and "last 3 steps" in reason
    assert [watch.add(1.0, 3.0) for _ in range(5)] == [None] * 5  # once a run


def test_a_gap_of_milliseconds_is_left_alone_however_large_a_share():
    watch = PredictionWatch(window=3, off_by=0.2, warmup=0, min_s=0.25)
    assert [watch.add(0.01, 0.02) for _ in range(5)] == [None] * 5  # +100%, but 10 ms a step


def test_a_close_profile_is_left_alone():
    watch = PredictionWatch(window=3, off_by=0.2, warmup=0, min_s=0.0)
    assert [watch.add(1.0, m) for m in (1.1, 0.9, 1.15, 0.85, 1.05)] == [None] * 5


def test_a_trainer_whose_profile_is_far_off_measures_it_again_and_plans_by_it(tmp_path):
    spec = loop_spec(plan="auto", steps=9, batch_size=6, eval_every=None)
    events, before, after = spawn_ranks(misled_run, 2, spec, str(tmp_path), timeout=1200)[0]
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    warnings = [w for w in warnings if "measuring the profile again" in w]
    assert len(warnings) == 1, warnings
    assert "off the last 5 steps" in warnings[0]
    assert after < before - 4.0  # the misled 5 s are gone from the update's cost
    steps = [e for e in events if e["type"] == "step"]
    assert len(steps) == 9
    assert steps[-1]["predicted_step_s"] < 1.0  # planned by the new profile
