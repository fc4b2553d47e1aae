"""The distributed optimizer: master weights and AdamW's moments sharded over the instantiation
strategy's replicas (dp x cp). Training equals one device step by step; each rank holds
12 x params / (tp x pp x dp) bytes for the update; checkpoints move between sharded and whole
optimizers and world sizes."""

import pytest

from hotswitch.backend.runtime.spawn import spawn_ranks

from ..conftest import SHORT_STEPS
from ..matching import assert_matches, relative
from .optimizer_workers import train, update_bytes


def test_a_sharded_optimizer_trains_as_one_device(short_reference):
    # dp2tp2 holds the master weights, sharded over its 2 replicas; dp4 trains the short sequences
    # (the static runs of loop/test_hot_switch_exact shard dp2pp2's too)
    spec = [("dp2tp2", 96), ("dp4", 0)]
    results = spawn_ranks(train, 4, SHORT_STEPS, spec, True)
    losses, params, _, sharded = results[0]
    assert sharded and all(r[0] == losses for r in results), "ranks disagree on the loss"
    assert_matches(losses, params, short_reference, what="hot, sharded")


@pytest.mark.parametrize(("spec", "dp", "tp"), [("dp4", 4, 1), ("dp2tp2", 2, 2)])
def test_each_rank_holds_its_part_of_the_update_state(spec, dp, tp):
    sharded = spawn_ranks(update_bytes, 4, spec, True)
    whole = spawn_ranks(update_bytes, 4, spec, False)
    params = sharded[0][1]
    for held, _, is_sharded in sharded:
        assert is_sharded and abs(held - 12 * params / (tp * dp)) / (12 * params / (tp * dp)) <= 0.02
    for held, _, is_sharded in whole:
        assert not is_sharded and abs(held - 12 * params / tp) / (12 * params / tp) <= 0.02


@pytest.mark.parametrize("fused", [False, True], ids=["eager", "fused"])
def test_checkpoints_move_between_sharded_and_whole_optimizers(short_reference, tmp_path, fused):
    """Whole on 2 ranks -> sharded cp2tp2 on 4 (its replicas are the cp ranks: Megatron's
    distributed optimizer shards over dp x cp) -> whole again on 2, each resuming the last;
    ``fused``: every master updating in compiled runs' one kernel, which takes its moments over
    from the checkpoint."""
    losses, steps = short_reference[0], SHORT_STEPS
    whole, sharded = str(tmp_path / "whole"), str(tmp_path / "sharded")
    first = spawn_ranks(train, 2, 3, "dp2", False, whole, None, fused)[0][0]
    second, _, _, is_sharded = spawn_ranks(train, 4, 6, "cp2tp2", True, sharded, whole, fused)[0]
    assert is_sharded
    assert max(relative(a, b) for a, b in zip(first + second, losses[:6], strict=True)) <= 1e-5
    third, params, _, is_sharded = spawn_ranks(train, 2, steps, "dp2", False, None, sharded, fused)[0]
    assert not is_sharded
    assert_matches(third, params, short_reference, first_step=6, what="resumed whole on 2 ranks")
