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
from hotswitch.backend.parallel.ring_attention import RingAttention
from hotswitch.backend.parallel.vocab_parallel import VocabParallelLoss
from hotswitch.backend.parallel.zigzag import zigzag_rotary
from hotswitch.backend.runtime.collectives import Collective

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
    assert wo.states[dp4].placements == (Shard(0), Replicate(), Replicate())
    assert wo.states[tp4].placements == (Replicate(), Replicate(), Partial())
    assert wo.states[dp2tp2].placements == (Shard(0), Replicate(), Partial())
    wq = tiny_graph.nodes["layers_0_attention_wq"]
    assert wq.states[dp2tp2].placements == (Shard(0), Replicate(), Shard(2))
    attention = tiny_graph.nodes["causal_attention"]
    assert attention.states[tp4].placements == (Replicate(), Replicate(), Shard(2))  # heads
    loss = tiny_graph.nodes["token_loss"]
    assert loss.states[dp2tp2].placements == (Partial(), Replicate(), Replicate())
    wo_weight = tiny_graph.nodes["layers.0.attention.wo.weight"]
    assert wo_weight.states[tp4].placements == (Replicate(), Replicate(), Shard(1))


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
    assert tuple(shard.shape) == (config.n_kv_heads * config.head_size // 8, config.dim)
    tiny = LogicalGraph.build(get_config("tiny"), ["tp2"])
    unbound = compile_graph(tiny, "tp2", 0)
    with pytest.raises(RuntimeError, match=r"has no process group; call bind\(\) first"):
        unbound.module.get_submodule("comm_0_0")(torch.zeros(2))


class SoftplusFeedForward(FeedForward):
    def forward(self, x):
        return self.w2(F.softplus(self.w1(x)) * self.w3(x))


def test_an_op_without_a_rule_is_named_with_its_source_line():
    config = get_config("tiny").with_(n_layers=1)
    with torch.device("meta"):
        model = Transformer(config)
    model.layers[0].feed_forward = SoftplusFeedForward(config)
    with pytest.raises(
        ValueError, match=r"no deduction rule for call_function softplus .*test_logical_graph.py:\d+ in forward"
    ):
        LogicalGraph(config, ["dp2"], trace(model))


def test_pipeline_stages_cut_the_graph_between_layers_with_one_p2p_node_per_boundary():
    graph = LogicalGraph.build(get_config("tiny"), ["pp4", "tp2pp2", "dp4"])
    pp4, tp2pp2, dp4 = graph.strategies
    p2p = [n for n in graph.nodes.values() if n.op == "p2p"]
    # the residual stream after layers 0, 1, 2 (and nothing else) crosses a stage in pp4
    assert [(n.inputs[0], n.stages[pp4]) for n in p2p] == [("add_1", 1), ("add_3", 2), ("add_5", 3)]
    assert [bool(n.comm[tp2pp2]) for n in p2p] == [False, True, False]
    assert all(n.is_dummy(dp4) for n in p2p)
    assert graph.nodes["tok_embeddings"].stages[pp4] == 0 and graph.nodes["token_loss"].stages[pp4] == 3
    assert graph.nodes["layers_2_attention_wq"].states[tp2pp2].devices == (2, 3)
    assert graph.nodes["layers.3.attention.wq.weight"].states[pp4].devices == (3,)

    middle = compile_graph(graph, pp4, 1)  # receives layer 0's output, sends layer 1's
    assert [(link.peer_stage, link.index) for link in middle.receives] == [(0, 0)]
    assert [(link.peer_stage, link.index) for link in middle.sends] == [(2, 1)]
    assert {name.split(".")[1] for name in middle.params} == {"1"}
    first, last = compile_graph(graph, tp2pp2, 0), compile_graph(graph, tp2pp2, 3)
    assert first.receives == [] and len(first.sends) == 1 and "tok_embeddings.weight" in first.params
    assert len(last.receives) == 1 and last.sends == [] and "output.weight" in last.params
    assert {c.ranks for c in last.module.modules() if isinstance(c, Collective)} == {(2, 3)}


def test_sequence_parallelism_is_deduced_reduce_scatter_before_norms_all_gather_before_linears():
    graph = LogicalGraph.build(get_config("tiny"), ["dp2tp2sp", "dp2tp2"])
    kinds = [c.kind for c in compile_graph(graph, "dp2tp2sp", 0).module.modules() if isinstance(c, Collective)]
    # the embedding's partial sum is split along the sequence once; per layer, each block's
    # input is gathered and its row-parallel output reduce-scattered into the residual
    per_layer = ["copy", "all_gather_rs", "reduce_scatter", "copy", "all_gather_rs", "reduce_scatter"]
    assert kinds == ["reduce_scatter"] + per_layer * 4 + ["copy", "all_gather_rs"]
    norm = graph.nodes["rms_norm"]
    assert norm.states[graph.strategies[0]].placements == (Shard(0), Replicate(), Shard(1))


def test_summaries_are_plain_data(tiny_graph):
    summary = summarize(tiny_graph)
    assert json.loads(json.dumps(summary)) == summary
    assert summary["counts"]["comm"] == 18 and summary["dummies"] == {"dp4tp1pp1": 18, "dp1tp4pp1": 0, "dp2tp2pp1": 0}
    assert len(summary["edges"]) == sum(len(n["inputs"]) for n in summary["nodes"])
    node = next(n for n in summary["nodes"] if n["name"] == "comm_2")
    assert node["comm"]["dp1tp4pp1"] == ["all_reduce[tp]"]
    assert node["states"]["dp1tp4pp1"]["placements"] == ["R", "R", "R"]
    exec_summary = compile_graph(tiny_graph, "tp4", 0).summary()
    assert json.loads(json.dumps(exec_summary)) == exec_summary
    assert sum(n["kind"] == "comm" for n in exec_summary["nodes"]) == 18


def test_context_parallelism_splits_the_sequence_and_runs_ring_attention_at_true_positions():
    graph = LogicalGraph.build(get_config("tiny"), ["dp2cp2", "cp2tp2", "dp4"])
    dp2cp2, cp2tp2 = graph.strategies[:2]
    assert graph.nodes["tokens"].states[dp2cp2].placements == (Shard(0), Shard(1), Replicate())
    assert graph.nodes["causal_attention"].states[cp2tp2].placements == (Replicate(), Shard(1), Shard(2))
    assert graph.nodes["token_loss"].states[dp2cp2].placements == (Partial(), Partial(), Replicate())
    weight = graph.nodes["layers.0.attention.wq.weight"].states[cp2tp2]
    assert weight.mesh == (1, 2, 2) and weight.placements == (Replicate(), Replicate(), Shard(0))
    exec_graph = compile_graph(graph, "dp2cp2", 3)  # parameters' gradients: summed by the trainer, no collective
    assert not [m for m in exec_graph.module.modules() if isinstance(m, Collective)]
    rings = [m for m in exec_graph.module.modules() if isinstance(m, RingAttention)]
    assert len(rings) == 4 and all(r.ranks == (2, 3) and r.index == 1 for r in rings)
    rotary = [n for n in exec_graph.module.graph.nodes if n.target is zigzag_rotary]
    assert len(rotary) == 8 and all(n.args[-2:] == (1, 2) for n in rotary)
    assert (2, 3) in exec_graph.rank_sets()
