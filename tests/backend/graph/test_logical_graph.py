"""The logical graph holds exactly the comm and dummy nodes the deduction rules imply."""

import json

import pytest
import torch
import torch.nn.functional as F

from hotswitch.backend import Partial, Replicate, Shard, Strategy, get_config
from hotswitch.backend.graph.compile import compile_graph
from hotswitch.backend.graph.logical import LogicalGraph, summarize
from hotswitch.backend.graph.trace import trace
from hotswitch.backend.models.llama import FeedForward, Transformer
from hotswitch.backend.runtime.collectives import Collective
from hotswitch.backend.runtime.vocab_parallel import VocabParallelLoss

STRATEGIES = [Strategy.parse(s) for s in ("dp4", "tp4", "dp2tp2")]
ALL_REDUCE = {"dp4tp1pp1": [], "dp1tp4pp1": ["all_reduce[tp]"], "dp2tp2pp1": ["all_reduce[tp]"]}
COPY = {"dp4tp1pp1": [], "dp1tp4pp1": ["copy[tp]"], "dp2tp2pp1": ["copy[tp]"]}


@pytest.fixture(scope="module")
def tiny_graph():
    return LogicalGraph.build(get_config("tiny"), STRATEGIES)


def test_comm_nodes_node_by_node(tiny_graph):
    # The residual stream stays a tensor-parallel partial sum (a sum of partials is a partial);
    # each norm needs the full value (all-reduce first), and each norm feeds column-parallel
    # linears whose input gradients are partial (copy: identity, all-reduce in backward).
    residuals = ["tok_embeddings"] + [f"add_{i}" if i else "add" for i in range(8)]
    norms = [f"rms_norm_{i}" if i else "rms_norm" for i in range(9)]
    expected = []
    for residual, norm in zip(residuals, norms):
        expected += [(residual, ALL_REDUCE), (norm, COPY)]
    comm = tiny_graph.comm_nodes()
    assert [(n.inputs[0], {str(s): [str(x) for x in steps] for s, steps in n.comm.items()}) for n in comm] == expected
    for node, norm in zip(comm[0::2], norms):
        assert tiny_graph.nodes[norm].inputs[0] == node.name
    consumers = {
        name: [n.name for n in tiny_graph.nodes.values() if name in n.inputs] for name in (c.name for c in comm)
    }
    assert consumers["comm_1"] == ["layers_0_attention_wq", "layers_0_attention_wk", "layers_0_attention_wv"]
    assert consumers["comm_17"] == ["output"]
    assert all(n.is_dummy(Strategy.parse("dp4")) for n in comm)


def test_dist_states_per_strategy(tiny_graph):
    dp4, tp4, dp2tp2 = STRATEGIES
    wo = tiny_graph.nodes["layers_0_attention_wo"]
    assert wo.states[dp4].placements == (Shard(0), Replicate())
    assert wo.states[tp4].placements == (Replicate(), Partial())
    assert wo.states[dp2tp2].placements == (Shard(0), Partial())
    wq = tiny_graph.nodes["layers_0_attention_wq"]
    assert wq.states[dp2tp2].placements == (Shard(0), Shard(2))
    attention = tiny_graph.nodes["causal_attention"]
    assert attention.states[tp4].placements == (Replicate(), Shard(2))  # heads
    loss = tiny_graph.nodes["token_loss"]
    assert loss.states[dp2tp2].placements == (Partial(), Replicate())
    assert tiny_graph.nodes["layers.0.attention.wo.weight"].states[tp4].placements == (Replicate(), Shard(1))


def test_executable_graphs_prune_dummies(tiny_graph):
    def modules(strategy, rank, kind):
        exec_graph = compile_graph(tiny_graph, strategy, rank)
        return [m for m in exec_graph.module.modules() if isinstance(m, kind)]

    assert modules("dp4", 0, Collective) == [] and modules("dp4", 0, VocabParallelLoss) == []
    for strategy, rank in (("tp4", 2), ("dp2tp2", 3)):
        collectives = modules(strategy, rank, Collective)
        assert [c.kind for c in collectives] == ["all_reduce", "copy"] * 9
        group = Strategy.parse(strategy).tp_group(rank)
        assert all(c.ranks == group for c in collectives)
        assert len(modules(strategy, rank, VocabParallelLoss)) == 1


def test_compiling_needs_no_process_group_and_running_unbound_fails():
    config = get_config("1b")
    graph = LogicalGraph.build(config, ["dp4tp8", "dp32"])
    assert not torch.distributed.is_initialized()
    exec_graph = compile_graph(graph, "dp4tp8", 13)
    assert {c.ranks for c in exec_graph.module.modules() if isinstance(c, Collective)} == {tuple(range(8, 16))}
    assert exec_graph.rank_sets() == {tuple(range(8, 16))}
    shard = exec_graph.module.get_parameter("layers__0__attention__wk__weight")
    assert tuple(shard.shape) == (config.n_kv_heads * config.head_dim // 8, config.dim)
    tiny = LogicalGraph.build(get_config("tiny"), ["tp2"])
    unbound = compile_graph(tiny, "tp2", 0)
    with pytest.raises(RuntimeError, match=r"has no process group; call bind\(\) first"):
        unbound.module.get_submodule("comm_0_0")(torch.zeros(2))


class GeluFeedForward(FeedForward):
    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)) * self.w3(x))


def test_an_op_without_a_rule_is_named_with_its_source_line():
    config = get_config("tiny").with_(n_layers=1)
    with torch.device("meta"):
        model = Transformer(config)
    model.layers[0].feed_forward = GeluFeedForward(config)
    with pytest.raises(
        ValueError, match=r"no deduction rule for call_function gelu .*test_logical_graph.py:\d+ in forward"
    ):
        LogicalGraph(config, ["dp2"], trace(model))


def test_pipeline_strategies_are_refused_clearly():
    with pytest.raises(ValueError, match="pipeline-parallel strategies are not supported by the graph compiler yet"):
        LogicalGraph.build(get_config("tiny"), ["tp2pp2"])


def test_summaries_are_plain_data(tiny_graph):
    summary = summarize(tiny_graph)
    assert json.loads(json.dumps(summary)) == summary
    assert summary["counts"]["comm"] == 18 and summary["dummies"] == {"dp4tp1pp1": 18, "dp1tp4pp1": 0, "dp2tp2pp1": 0}
    assert len(summary["edges"]) == sum(len(n["inputs"]) for n in summary["nodes"])
    node = next(n for n in summary["nodes"] if n["name"] == "comm_2")
    assert node["comm"]["dp1tp4pp1"] == ["all_reduce[tp]"] and node["states"]["dp1tp4pp1"]["placements"] == ["R", "R"]
    exec_summary = compile_graph(tiny_graph, "tp4", 0).summary()
    assert json.loads(json.dumps(exec_summary)) == exec_summary
    assert sum(n["kind"] == "comm" for n in exec_summary["nodes"]) == 18
