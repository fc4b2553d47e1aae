"""The learning-rate schedule, the held-out split and the periodic checkpoint policy (no ranks)."""

import itertools
import math

import pytest

from hotswitch.backend.data import SyntheticDocuments
from hotswitch.backend.data.split import holdout
from hotswitch.backend.train.config.checkpoints import CheckpointSettings
from hotswitch.backend.train.config.optimizer import OptimizerSettings
from hotswitch.backend.train.state.optim import OptimizerConfig
from hotswitch.backend.train.state.run_checkpoints import CheckpointPolicy


def test_warmup_is_linear_then_cosine_decays_to_the_floor():
    optim = OptimizerConfig(lr=1.0, warmup_steps=4, decay_steps=10, min_lr=0.1)
    assert [optim.lr_at(u) for u in (1, 2, 4)] == [0.25, 0.5, 1.0]
    assert optim.lr_at(9) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 0.5)))
    assert optim.lr_at(14) == pytest.approx(0.1) and optim.lr_at(100) == pytest.approx(0.1)
    rates = [optim.lr_at(u) for u in range(4, 15)]
    assert all(a > b for a, b in itertools.pairwise(rates)), "cosine decays monotonically"
    assert OptimizerConfig(lr=0.5).lr_at(1000) == 0.5  # constant by default


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"lr": 0}, "'lr' = 0 is not valid: give a number above 0"),
        ({"min_lr": 2.0}, "'min_lr' = 2.0 is not valid: give a number from 0 to lr"),
        ({"warmup_steps": -1}, "'warmup_steps' = -1 is not valid: give a whole number of at least 0"),
        ({"decay_steps": 0}, "'decay_steps' = 0 is not valid: give a whole number of at least 1"),
        ({"betas": (0.9, 1.0)}, "'betas' = (0.9, 1.0) is not valid: give two numbers in [0, 1)"),
        ({"max_grad_norm": 0}, "'max_grad_norm' = 0 is not valid: give a number above 0"),
    ],
)
def test_bad_optimizer_settings_are_refused(settings, message):
    with pytest.raises(ValueError) as error:
        OptimizerConfig(**settings)
    assert message in str(error.value)
    if "decay_steps" not in settings:  # the run's optimizer section refuses it with the same words
        with pytest.raises(ValueError) as from_section:
            OptimizerSettings(**settings).check()
        assert str(from_section.value) == str(error.value)


def test_a_floor_equal_to_the_peak_is_one_schedule_for_the_section_and_the_engine():
    assert OptimizerSettings(lr=1e-3, min_lr=1e-3).check().adamw(10).min_lr == 1e-3


def test_the_held_out_split_is_disjoint_deterministic_and_sized():
    source = SyntheticDocuments("github", count=200)
    train, held = holdout(source, 0.1, seed=3)
    assert len(held) == 20 and len(train) == 180
    assert sorted([*train.indices.tolist(), *held.indices.tolist()]) == list(range(200))
    assert held.indices.tolist() == holdout(source, 0.1, seed=3)[1].indices.tolist()
    assert held.indices.tolist() != holdout(source, 0.1, seed=4)[1].indices.tolist()
    assert held.tokens(0) == source.tokens(int(held.indices[0]))
    with pytest.raises(ValueError, match="between 0 and 1"):
        holdout(source, 1.0)
    with pytest.raises(ValueError, match=r"of 1 document\(s\) for evaluation leaves none to train on; .*eval_every"):
        holdout(SyntheticDocuments("github", count=1), 0.05)


def test_periodic_checkpoints_keep_the_newest(tmp_path):
    policy = CheckpointPolicy(tmp_path, CheckpointSettings(checkpoint_every=2, keep_checkpoints=2).check())
    assert [s for s in range(1, 9) if policy.due(s)] == [2, 4, 6, 8]
    stale = [policy.periodic_written(policy.path_for(s)) for s in (2, 4, 6, 8)]
    assert stale == [[], [], [tmp_path / "step-2"], [tmp_path / "step-4"]]
    assert not CheckpointPolicy(tmp_path, CheckpointSettings().check()).due(5)
    with pytest.raises(ValueError, match=r"'checkpoint_every' = 0 .*at least 1"):
        CheckpointSettings(checkpoint_every=0).check()
