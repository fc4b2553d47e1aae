"""Activation checkpointing per transformer block trains exactly like one device (fp32), under
every kind of layout and hot-switched with strategies that do not checkpoint."""

import pytest

from hotswitch.backend.graph.checkpoint_blocks import CheckpointedBlock
from hotswitch.backend.graph.compile import compile_graph
from hotswitch.backend.graph.logical import LogicalGraph
from hotswitch.backend.models.config import get_config
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.strategy import Strategy

from ..conftest import SHORT_STEPS
from ..matching import assert_matches
from ..train_workers import hot_switch_run, static_runs


@pytest.mark.parametrize(("strategy", "rank", "blocks"), [("dp1ckpt", 0, 4), ("tp2spckpt", 1, 4), ("pp2ckpt", 1, 2)])
def test_every_block_of_a_stage_runs_checkpointed(strategy, rank, blocks):
    s = Strategy.parse(strategy)
    graph = compile_graph(LogicalGraph.build(get_config("tiny"), [s]), s, rank)
    checkpointed = [m for m in graph.module.modules() if isinstance(m, CheckpointedBlock)]
    assert len(checkpointed) == blocks
    plain = compile_graph(
        LogicalGraph.build(get_config("tiny"), [s.__class__(s.dp, s.tp, s.pp, s.sp)]),
        s.__class__(s.dp, s.tp, s.pp, s.sp),
        rank,
    )
    assert graph.params == plain.params and graph.bindable == plain.bindable  # same parameters, same groups


def test_checkpointed_layouts_train_like_one_device(short_reference):
    runs = [("dp4ckpt", "1f1b"), ("dp2tp2spckpt", "1f1b"), ("tp2pp2ckpt", "1f1b"), ("pp4ckpt", "gpipe")]
    results = spawn_ranks(static_runs, 4, SHORT_STEPS, runs)
    for name, (losses, params) in results[0].items():
        assert_matches(losses, params, short_reference, what=name)


def test_hot_switching_between_checkpointed_and_plain_strategies(short_reference):
    plan = [("tp4", 200), ("dp2tp2ckpt", 100), ("dp4", 0)]
    losses, params, used, _, _ = spawn_ranks(hot_switch_run, 4, SHORT_STEPS, plan)[0]
    assert used == ["dp1tp4pp1", "dp2tp2pp1ckpt", "dp4tp1pp1"]
    assert_matches(losses, params, short_reference)
