"""Selective recompute as a graph pass: which values each block drops, and that the graph
keeps the same parameters and collectives (the values it computes are the oracles' job:
tests/backend/train/loop/test_gradient_oracle.py and planning/test_memory_measured.py)."""

import operator

import pytest
import torch.nn.functional as F

from hotswitch.backend.graph.compile import compile_graph
from hotswitch.backend.graph.logical import LogicalGraph
from hotswitch.backend.graph.selective_recompute import RecomputedValues
from hotswitch.backend.models.config import get_config
from hotswitch.backend.models.llama import rms_norm
from hotswitch.backend.strategy import Strategy


def compiled(strategy: str, rank: int):
    s = Strategy.parse(strategy)
    return compile_graph(LogicalGraph.build(get_config("tiny"), [s]), s, rank)


@pytest.mark.parametrize(("strategy", "rank", "blocks"), [("dp1sel", 0, 4), ("tp2spsel", 1, 4), ("pp2sel", 1, 2)])
def test_each_block_drops_its_two_norms_and_its_ffn_activation(strategy, rank, blocks):
    graph = compiled(strategy, rank)
    dropped = []
    for node in graph.module.graph.nodes:
        module = graph.module.get_submodule(node.target) if node.op == "call_module" else None
        if isinstance(module, RecomputedValues):  # its arguments: inputs, dropped values, hooked readers
            dropped.append([n.target for n in node.args[module.inputs : module.inputs + module.released]])
    assert sorted(map(len, dropped)) == [1] * 2 * blocks + [2] * blocks
    assert sum(group == [rms_norm] for group in dropped) == 2 * blocks  # the final norm stays
    assert sum(group == [F.silu, operator.mul] for group in dropped) == blocks
    plain = compiled(strategy.removesuffix("sel"), rank)
    assert graph.params == plain.params and graph.bindable == plain.bindable  # same parameters, same groups
