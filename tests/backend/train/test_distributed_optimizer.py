"""The distributed optimizer: master weights and AdamW's moments sharded over the instantiation
strategy's data parallelism. Training equals one device step by step; each rank holds
12 x params / (tp x pp x dp) bytes for the update; checkpoints move between sharded and whole
optimizers and world sizes."""

import pytest

from hotswitch.backend.runtime.spawn import spawn_ranks

from .conftest import STEPS
from .optimizer_workers import train, update_bytes
from .test_hot_switch_exact import assert_matches, relative


@pytest.mark.parametrize("spec", ["dp4", [("dp2tp2", 96), ("dp4", 0)]], ids=["dp4", "hot"])
def test_a_sharded_optimizer_trains_as_one_device(reference, spec):
    results = spawn_ranks(train, 4, STEPS, spec, True)
    losses, params, _, sharded = results[0]
    assert sharded and all(r[0] == losses for r in results), "ranks disagree on the loss"
    assert_matches(losses, params, reference, what=f"{spec} sharded")


@pytest.mark.parametrize(("spec", "dp", "tp"), [("dp4", 4, 1), ("dp2tp2", 2, 2)])
def test_each_rank_holds_its_part_of_the_update_state(spec, dp, tp):
    sharded = spawn_ranks(update_bytes, 4, spec, True)
    whole = spawn_ranks(update_bytes, 4, spec, False)
    params = sharded[0][1]
    for held, _, is_sharded in sharded:
        assert is_sharded and abs(held - 12 * params / (tp * dp)) / (12 * params / (tp * dp)) <= 0.02
    for held, _, is_sharded in whole:
        assert not is_sharded and abs(held - 12 * params / tp) / (12 * params / tp) <= 0.02


def test_checkpoints_move_between_sharded_and_whole_optimizers(reference, tmp_path):
    half = STEPS // 2
    first = spawn_ranks(train, 4, half, "dp4", True, str(tmp_path / "sharded"))[0][0]
    assert max(relative(a, b) for a, b in zip(first, reference[0][:half], strict=True)) <= 1e-5
    losses, params, _, sharded = spawn_ranks(
        train, 2, STEPS, "dp2", False, str(tmp_path / "whole"), str(tmp_path / "sharded")
    )[0]
    assert not sharded
    assert_matches(losses, params, reference, first_step=half, what="resumed whole on 2 ranks")
    losses, params, _, sharded = spawn_ranks(train, 4, STEPS, "dp2tp2", True, None, str(tmp_path / "sharded"))[0]
    assert sharded
    assert_matches(losses, params, reference, first_step=half, what="resumed sharded on dp2tp2")
