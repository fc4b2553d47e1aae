"""Bad switch inputs fail while planning, naming the tensor, the dim and the fix."""

from dataclasses import dataclass, replace

import pytest
import torch

from hotswitch.backend import Cluster, DistState, Replicate, Shard, Strategy, get_config, param_layout, plan_switch
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.switch import SwitchPlanner
from hotswitch.backend.switch.executor import BoundSwitch


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    state: DistState


def layouts(src="dp4", dst="tp4"):
    config = get_config("tiny")
    return param_layout(config, Strategy.parse(src)), param_layout(config, Strategy.parse(dst))


def test_mismatched_names():
    src, dst = layouts()
    del dst["norm.weight"]
    with pytest.raises(ValueError, match=r"only in source \['norm.weight'\].*same model"):
        plan_switch(src, dst, Cluster.local(4))


def test_mismatched_shapes():
    src, dst = layouts()
    dst["norm.weight"] = replace(dst["norm.weight"], shape=(65,))
    with pytest.raises(ValueError, match=r"norm.weight: shape \(64,\) in the source but \(65,\)"):
        plan_switch(src, dst, Cluster.local(4))


def test_strategy_larger_than_the_cluster():
    src, dst = layouts("dp4", "dp8")
    with pytest.raises(ValueError, match=r"on ranks \[4, 5, 6, 7\] but the cluster has 4 devices"):
        plan_switch(src, dst, Cluster.local(4))
    with pytest.raises(ValueError, match="product dp\\*cp\\*tp\\*pp is 4"):
        SwitchPlanner("tiny", Cluster.local(4)).plan("dp4", "dp8")


def test_dim_not_divisible():
    src = {"w": Tensor((6, 4), DistState((0, 1), (2,), (Replicate(),)))}
    dst = {"w": Tensor((6, 4), DistState((0, 1, 2, 3), (4,), (Shard(0),)))}
    with pytest.raises(
        ValueError, match=r"w \(destination .*\): dim 0 of size 6 cannot be split evenly into 4.*divides 6"
    ):
        plan_switch(src, dst, Cluster.local(4))


def test_unknown_algorithm():
    src, dst = layouts()
    with pytest.raises(ValueError, match="choose one of balanced, greedy, naive"):
        plan_switch(src, dst, Cluster.local(4), "fastest")


def test_buffers_must_match_the_plan():
    src, dst = layouts()
    plan = plan_switch(src, dst, Cluster.local(4))
    with pytest.raises(ValueError, match=r"float32 but destination is torch.float16"):
        BoundSwitch(plan, 0, FlatBuffer(src, 0), FlatBuffer(dst, 0, torch.float16))
    with pytest.raises(ValueError, match=r"4-byte elements but the buffers hold torch.bfloat16"):
        BoundSwitch(plan, 0, FlatBuffer(src, 0, torch.bfloat16), FlatBuffer(dst, 0, torch.bfloat16))


def test_planner_caches_each_pair():
    planner = SwitchPlanner("tiny", Cluster.local(4))
    assert planner.plan("dp4", "tp4") is planner.plan("dp4tp1pp1", "tp4")
    assert planner.plan("tp4", "dp4") is not planner.plan("dp4", "tp4")
