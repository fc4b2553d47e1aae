"""The training loop users expect, on 4 hot-switching ranks against one device (fp32): warmup
and cosine learning rates, evaluation on a held-out split, periodic checkpoints keeping the
newest, and a resume mid-schedule that equals the uninterrupted run exactly."""

import pytest

from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.strategy import Strategy

from .loop_workers import loop_spec, one_device, train_events

TOLERANCE = 1e-5


def of(events, kind):
    return [e for e in events if e["type"] == kind]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("loop")
    spec = loop_spec(checkpoint_every=2, keep_checkpoints=2)
    events, params = spawn_ranks(train_events, 4, spec, str(folder), timeout=1200)[0]
    return folder, events, params


@pytest.fixture(scope="module")
def reference():
    """One device on the uninterrupted run's spec: losses, learning rates, held-out losses."""
    return one_device(loop_spec())


def test_learning_rates_and_losses_follow_one_device(uninterrupted, reference):
    _, events, _ = uninterrupted
    losses, rates, _ = reference
    steps = of(events, "step")
    assert [e["lr"] for e in steps] == pytest.approx(rates, rel=1e-12)
    assert rates[0] == pytest.approx(1e-3) and rates[1] == pytest.approx(2e-3) and rates[-1] == pytest.approx(2e-4)
    for e, loss in zip(steps, losses, strict=True):
        assert abs(e["loss"] - loss) / loss <= TOLERANCE, (e["step"], e["loss"], loss)


def test_held_out_loss_is_reported_every_n_steps_and_equals_one_devices(uninterrupted, reference):
    _, events, _ = uninterrupted
    _, _, evals = reference
    reported = {e["step"]: e["loss"] for e in of(events, "eval")}
    assert sorted(reported) == [2, 4, 6] == sorted(evals)
    for step, loss in reported.items():
        assert abs(loss - evals[step]) / evals[step] <= TOLERANCE, (step, loss, evals[step])
    assert all(e["tokens"] > 0 for e in of(events, "eval"))


def test_periodic_checkpoints_keep_the_newest_two(uninterrupted):
    folder, events, _ = uninterrupted
    assert [e["step"] for e in of(events, "checkpoint")] == [2, 4, 6]
    assert sorted(p.name for p in (folder / "checkpoints").iterdir()) == ["step-4", "step-6"]


def test_resuming_mid_schedule_equals_the_uninterrupted_run(uninterrupted, tmp_path):
    folder, events, params = uninterrupted
    spec = loop_spec(resume_from=str(folder / "checkpoints" / "step-4"))
    resumed, resumed_params = spawn_ranks(train_events, 4, spec, str(tmp_path), timeout=1200)[0]
    assert [e["step"] for e in of(resumed, "step")] == [5, 6]
    assert not of(resumed, "warning")  # the same documents and seed: the stream resumes, saying nothing
    expected = {e["step"]: e for e in of(events, "step")}
    for e in of(resumed, "step"):
        assert e["lr"] == expected[e["step"]]["lr"]
        assert e["loss"] == pytest.approx(expected[e["step"]]["loss"], rel=1e-6)
    worst = max(((resumed_params[n] - p).abs().max() / p.abs().max()).item() for n, p in params.items())
    assert worst <= 1e-6, worst


def test_forward_only_evaluation_equals_one_device_under_every_layout():
    from hotswitch.backend.train.loop.reference import ReferenceTrainer
    from hotswitch.backend.train.run.recipe import batches, check_spec, model_config
    from hotswitch.backend.train.state.optim import OptimizerConfig

    from .loop_workers import evaluate_under

    strategies = ["tp2pp2", "dp2pp2", "pp4", "dp2tp2sp", "dp4"]
    results = spawn_ranks(evaluate_under, 4, strategies, timeout=1200)[0]
    batch = batches(check_spec(loop_spec()), model_config("tiny")).next_batch()
    loss, tokens = ReferenceTrainer(model_config("tiny"), OptimizerConfig(), token_budget=1024).evaluate(batch)
    for name, (summed, count) in results.items():
        assert count == tokens and abs(summed - loss) / loss <= TOLERANCE, (name, summed, loss)


def test_auto_weighs_context_parallel_layouts_and_trains_exactly(tmp_path):
    """``context_parallel=True``: the trainer's ``auto`` profiles ring (cp2) and Ulysses (ul2)
    layouts beside the others and picks per batch from all of them; every step equals one device."""
    from .loop_workers import auto_run

    spec = loop_spec(plan="auto", context_parallel=True, steps=2, max_len=64, batch_size=6, eval_every=None)
    events, profiled = spawn_ranks(auto_run, 2, spec, str(tmp_path), timeout=1200)[0]
    assert {"dp1cp2tp1pp1", "dp1ul2tp1pp1", "dp2tp1pp1"} <= set(profiled), profiled
    assert [e["source"] for e in of(events, "plan")][-1] == "auto"
    first_step = next(i for i, e in enumerate(events) if e["type"] == "step")
    first = [e for e in events[:first_step] if e["type"] == "plan"][-1]  # the plan the first batch trained under
    trained = {Strategy.parse(s) for s, _ in first["buckets"]}
    assert Strategy.parse(first["instantiation"]) in trained, first  # no step switches to an idle strategy and back
    losses, _, _ = one_device(spec)
    steps = of(events, "step")
    assert len(steps) == 2
    for e, loss in zip(steps, losses, strict=True):
        assert abs(e["loss"] - loss) / loss <= TOLERANCE, (e["step"], e["loss"], loss)


def test_auto_weighs_device_groups_side_by_side_and_trains_exactly(tmp_path):
    """``side_by_side=True``: the ranks profile device groups too, each pair side by side at once
    (``profile.measuring_stages``), and ``auto`` weighs them against sequential buckets per batch;
    every step equals one device."""
    from .loop_workers import auto_run

    spec = loop_spec(plan="auto", side_by_side=True, steps=3, batch_size=6, eval_every=None)
    events, profiled = spawn_ranks(auto_run, 2, spec, str(tmp_path), timeout=1200)[0]
    groups = {"dp1tp1pp1@0-0", "dp1tp1pp1@1-1", "dp1tp1pp1ckpt@0-0", "dp1tp1pp1ckpt@1-1"}
    assert groups | {"dp2tp1pp1", "dp1tp2pp1"} <= set(profiled), profiled
    profiles = of(events, "profile")  # what a user sees while it profiles, a stage at a time
    assert [p["index"] for p in profiles] == list(range(1, len(profiles) + 1)) == list(range(1, profiles[0]["of"] + 1))
    assert {s for p in profiles for s in p["measuring"].split(" + ")} == set(profiled)
    assert any(" + " in p["measuring"] for p in profiles)  # groups measured side by side
    plans = of(events, "plan")
    assert plans[-1]["source"] == "auto"
    losses, _, _ = one_device(spec)
    steps = of(events, "step")
    assert len(steps) == 3
    for e, loss in zip(steps, losses, strict=True):
        assert abs(e["loss"] - loss) / loss <= TOLERANCE, (e["step"], e["loss"], loss)
    print([p["buckets"] for p in plans])
