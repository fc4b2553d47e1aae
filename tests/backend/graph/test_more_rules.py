"""Rules for reshapes, transposes, permutes and matmul, and a model head that uses them."""

from types import SimpleNamespace

import pytest

from hotswitch.backend import Partial, Replicate, Shard
from hotswitch.backend.graph import rules
from hotswitch.backend.runtime.spawn import spawn_ranks

from .exec_workers import exec_matches_reference_with_model

R, P = Replicate(), Partial()


def call(*args, shape=None):
    return SimpleNamespace(fx_node=SimpleNamespace(args=args), shape=shape)


def test_transpose_and_permute_move_the_shard():
    assert rules.transpose([Shard(1)], [(2, 3, 4)], call("x", 1, 2)).out == Shard(2)
    assert rules.transpose([Shard(0)], [(2, 3, 4)], call("x", -1, -2)).out == Shard(0)
    assert rules.permute([Shard(2)], [(2, 3, 4)], call("x", 2, 0, 1)).out == Shard(0)
    assert rules.permute([P], [(2, 3, 4)], call("x", (1, 0, 2))).out == P


def test_reshape_keeps_an_outer_shard_and_gathers_an_inner_one():
    merge = call(shape=(2, 16, 64))
    assert rules.reshape([Shard(2)], [(2, 16, 8, 8)], merge).out == Shard(2)  # heads stay outermost
    gathered = rules.reshape([Shard(3)], [(2, 16, 8, 8)], merge)
    assert gathered.required == (R,) and gathered.out == R
    assert rules.reshape([Shard(2)], [(2, 16, 64)], call(shape=(2, 16, 8, 8))).out == Shard(2)
    assert rules.reshape([Shard(0)], [(2, 16, 64)], call(shape=(32, 64))).out == Shard(0)


def test_a_replicated_linear_weight_on_split_tokens_gets_a_partial_gradient():
    """A shared expert's gate under sequence parallelism: each rank's gradient covers its tokens."""
    x, w = (2, 16, 64), (1, 64)
    split = rules.linear([Shard(1), R], [x, w], call())
    assert split.out == Shard(1) and split.grad_partial == (False, True)
    assert rules.linear([R, R], [x, w], call()).grad_partial == (False, False)


def test_matmul_cases():
    a, b = (2, 16, 64), (64, 128)
    assert rules.matmul([R, Shard(1)], [a, b], call()).out == Shard(2)  # column split of the weight
    assert rules.matmul([R, Shard(1)], [a, b], call()).grad_partial == (True, False)
    assert rules.matmul([Shard(2), Shard(0)], [a, b], call()).out == P  # contracted dim split
    assert rules.matmul([Shard(0), R], [a, b], call()).out == Shard(0)
    assert rules.matmul([Shard(0), R], [a, b], call()).grad_partial == (False, True)
    assert rules.matmul([Shard(2), R], [a, b], call()).required == (R, R)


@pytest.mark.parametrize("strategy", ["tp2", "dp2"])
def test_a_head_written_as_matmul_with_a_transposed_weight_is_exact(strategy):
    results = spawn_ranks(exec_matches_reference_with_model, 2, strategy)
    for loss_error, grad_error in results:
        assert loss_error <= 1e-5 and grad_error <= 1e-5
