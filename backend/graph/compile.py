"""Compile the logical graph for one (strategy, rank) into an executable fx graph.

The executable graph holds only what the rank runs: its pipeline stage's local ops
on its shards, the comm nodes of this strategy bound to collectives, dummies pruned.
Each edge carries at most one conversion, whose collective already composes it (a
partial sum wanted sharded is one reduce-scatter, not an all-reduce and a split), and
two conversions of one tensor that agree in this strategy run once. Parameters are
``get_attr``s that ``ExecGraph.attach`` points at views of the strategy's flat
buffers. Compiling needs no process group; ``bind`` supplies them. Where context
parallelism splits the sequence, rotary embedding reads the zig-zag chunks' true positions
(``parallel.zigzag``) and attention is a ring (or Ulysses) module over the cp group.

A stage's graph takes ``(tokens, targets, positions, *received)`` and returns the loss on the
last stage, else the tuple of tensors it sends on; ``parallel.pipeline`` moves them
between stages under a schedule (an ``ExecGraph`` is its ``PipelineStage``).
"""

from __future__ import annotations

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from hotswitch.backend.dist_state import Shard
from hotswitch.backend.graph.checkpoint_blocks import checkpoint_blocks
from hotswitch.backend.graph.compiled_regions import compile_regions
from hotswitch.backend.graph.exec_graph import ExecGraph, attr_name
from hotswitch.backend.graph.logical import LogicalGraph
from hotswitch.backend.graph.nodes import FREE, MESH_DIMS, P2P, LogicalNode, MeshDim
from hotswitch.backend.graph.selective_recompute import recompute_selectively
from hotswitch.backend.layout import context_flavour, param_layout
from hotswitch.backend.models.experts import Gate
from hotswitch.backend.models.llama import fused_token_loss, token_loss
from hotswitch.backend.parallel.expert_parallel import ExpertParallel
from hotswitch.backend.parallel.pipeline import Link
from hotswitch.backend.parallel.ring_attention import RingAttention
from hotswitch.backend.parallel.sequence_parallel_linear import GatheredLinear, SequenceParallelGather
from hotswitch.backend.parallel.ulysses import UlyssesAttention
from hotswitch.backend.parallel.vocab_parallel import VocabParallelLoss, vocab_parallel_embedding
from hotswitch.backend.parallel.zigzag import zigzag_rotary
from hotswitch.backend.runtime.collectives import Collective
from hotswitch.backend.strategy import Strategy

__all__ = ["ExecGraph", "compile_graph"]


def _group_ranks(strategy: Strategy, rank: int, mesh_dim: MeshDim) -> tuple[int, ...]:
    groups = {"tp": strategy.tp_group, "cp": strategy.cp_group, "dp": strategy.dp_group}
    return groups[mesh_dim](rank)


def compile_graph(graph: LogicalGraph, strategy: str | Strategy, rank: int, fused: bool = False) -> ExecGraph:
    """Rank ``rank``'s executable graph for ``strategy``; ``fused``: its runs of tensor math
    ``torch.compile``d (``compiled_regions``; not under selective recompute, which rewrites them)
    and its loss through compiled kernels (``chunked_loss``)."""
    strategy = Strategy.parse(strategy)
    if strategy not in graph.strategies:
        raise ValueError(
            f"{strategy} is not one of the logical graph's strategies {[str(s) for s in graph.strategies]}"
        )
    if rank not in strategy.ranks:
        raise ValueError(f"rank {rank} is outside {strategy} (ranks {strategy.offset}-{strategy.ranks[-1]})")
    exec_graph = _StageCompiler(graph, strategy, rank, fused).compile()
    if fused and not strategy.sel:
        compile_regions(exec_graph.module)
    return exec_graph


class _StageCompiler:
    """Builds one rank's fx graph from the logical graph, node by node."""

    def __init__(self, graph: LogicalGraph, strategy: Strategy, rank: int, fused: bool = False):
        self.graph = graph
        self.strategy = strategy
        self.rank = rank
        self.fused = fused
        self.layout = param_layout(graph.config, strategy)
        self.stage = strategy.coords(rank)[0]
        self.root = nn.Module()
        self.out = torch.fx.Graph()
        self.env: dict[str, torch.fx.Node] = {}
        self.merged: dict[tuple, torch.fx.Node] = {}  # (input, steps) -> the converted value
        self.gathered: dict[torch.fx.Node, tuple[torch.fx.Node, str]] = {}  # sp all-gather: (shard, module)
        self.params: list[str] = []
        self.bindable: list[str] = []
        self.receives: list[Link] = []
        self.sends: list[tuple[torch.fx.Node, Link]] = []
        self.links = [n for n in graph.nodes.values() if n.op == P2P]

    def compile(self) -> ExecGraph:
        graph = self.graph
        strategy = self.strategy
        self._placeholders()
        for node in graph.nodes.values():
            if node.name in self.env:
                continue
            if self._crossing(node):
                if graph.nodes[node.inputs[0]].stages[strategy] == self.stage:
                    self.sends.append((self.env[node.inputs[0]], Link(node.stages[strategy], self.links.index(node))))
                continue
            if node.kind not in FREE and node.stages[strategy] != self.stage:
                continue
            self._add(node, [self.env[i] for i in node.inputs])
        if self.stage < strategy.pp - 1:
            self.out.output(tuple(value for value, _ in self.sends))
        module = torch.fx.GraphModule(self.root, self.out)
        if strategy.ckpt:
            checkpoint_blocks(module, {attr_name(name) for name in self.params})
        elif strategy.sel:
            recompute_selectively(module, {attr_name(name) for name in self.params})
        links_out = [link for _, link in self.sends]
        return ExecGraph(
            graph.config,
            strategy,
            self.rank,
            module,
            self.params,
            self.bindable,
            self.receives,
            links_out,
            len(self.links),
        )

    def _crossing(self, node: LogicalNode) -> bool:
        return node.op == P2P and bool(node.comm[self.strategy])

    def _placeholders(self) -> None:
        """The micro-batch first, then what arrives from earlier stages."""
        for node in self.graph.nodes.values():
            if node.kind == "input":
                self.env[node.name] = self.out.placeholder(node.name)
        for tag, node in enumerate(self.links):
            if self._crossing(node) and node.stages[self.strategy] == self.stage:
                self.env[node.name] = self.out.placeholder(node.name)
                self.receives.append(Link(self.graph.nodes[node.inputs[0]].stages[self.strategy], tag))

    def _module_node(self, name: str, module: nn.Module, args: list[torch.fx.Node]) -> torch.fx.Node:
        self.root.add_module(name, module)
        self.bindable.append(name)
        return self.out.call_module(name, tuple(args))

    def _add(self, node: LogicalNode, ins: list[torch.fx.Node]) -> None:
        if node.kind == "param":
            param = self.layout[node.name]
            box = param.state.local_box(self.rank, param.shape)
            self.root.register_parameter(attr_name(node.name), nn.Parameter(torch.empty(box.shape, device="meta")))
            self.params.append(node.name)
            self.env[node.name] = self.out.get_attr(attr_name(node.name))
        elif node.kind == "buffer":
            assert node.shape is not None  # traced buffers carry their sample shape
            self.root.register_buffer(node.name, torch.empty(node.shape, device="meta"))
            self.env[node.name] = self.out.get_attr(node.name)
        elif node.kind == "comm":
            self.env[node.name] = self._comm(node, ins[0])  # a dummy passes its input through
        elif node.kind == "output":
            self.out.output(ins[0])
        else:
            self.env[node.name] = self._local_op(node, ins)

    def _comm(self, node: LogicalNode, value: torch.fx.Node) -> torch.fx.Node:
        """The node's collectives in this strategy, run once per (input, steps)."""
        key = (value, node.comm[self.strategy])
        if key not in self.merged:
            steps = node.comm[self.strategy]
            for i, step in enumerate(steps):
                assert step.mesh_dim != "pp" and step.kind != P2P  # crossings are links, not collectives
                ranks = _group_ranks(self.strategy, self.rank, step.mesh_dim)
                if step.kind == "all_gather_rs" and len(steps) == 1:  # linears read it: they keep the shard
                    assert step.dim is not None  # a sequence-parallel gather names its dim
                    shard = value
                    name = f"{node.name}_{i}"
                    value = self._module_node(name, SequenceParallelGather(ranks, step.dim), [value])
                    self.gathered[value] = (shard, name)
                else:
                    value = self._module_node(f"{node.name}_{i}", Collective(step.kind, ranks, step.dim), [value])
            self.merged[key] = value
        return self.merged[key]

    def _local_op(self, node: LogicalNode, ins: list[torch.fx.Node]) -> torch.fx.Node:
        graph = self.graph
        strategy = self.strategy
        rank = self.rank
        out = self.out

        def first_row(weight: str) -> int:  # where this rank's vocabulary rows begin
            node = graph.nodes[weight]  # the parameter, or (a tied head's) its p2p from the first stage
            assert node.shape is not None  # parameters and what carries them have shapes
            return node.states[strategy].local_box(rank, node.shape).offset[0]

        weight_split = strategy.tp > 1 and node.op in ("embedding", "loss") and _vocab_split(node, graph, strategy)
        if node.op == "linear" and ins[0] in self.gathered:
            shard, gather = self.gathered[ins[0]]
            linear = GatheredLinear(getattr(self.root, gather))
            self.root.add_module(f"{node.name}_keeping_shard", linear)
            return out.call_module(f"{node.name}_keeping_shard", (ins[0], shard, ins[1]))
        if node.op == "linear":
            return out.call_function(F.linear, (ins[0], ins[1]))
        if node.op == "embedding":
            if weight_split:
                start = first_row(node.inputs[1])
                return out.call_function(vocab_parallel_embedding, (ins[0], ins[1], start))
            return out.call_function(F.embedding, (ins[0], ins[1]))
        if node.op == "loss" and weight_split:
            head = graph.nodes[node.inputs[0]]
            start = first_row(head.inputs[1] if head.op == "linear" else "output.weight")
            loss = VocabParallelLoss(strategy.tp_group(rank), start, self.fused)
            return self._module_node(f"{node.name}_vocab_parallel", loss, ins)
        if node.op == "loss":
            return out.call_function(fused_token_loss if self.fused else token_loss, tuple(ins))
        if node.op in ("rotary", "attention") and self._context_split(node):
            return self._context_parallel(node, ins)
        if node.op == "experts" and self.strategy.ep > 1:
            return self._expert_parallel(node, ins)
        fx = node.fx_node  # every other op runs as traced, on local shapes
        assert fx is not None  # compute nodes keep their traced call
        mapping = dict(zip(fx.all_input_nodes, ins))
        args = torch.fx.map_arg(fx.args, lambda a: mapping[a])
        kwargs = torch.fx.map_arg(fx.kwargs, lambda a: mapping[a])
        return out.create_node(fx.op, fx.target, args, kwargs)

    def _context_split(self, node: LogicalNode) -> bool:
        """The op's first input is split along the sequence over cp."""
        state = self.graph.nodes[node.inputs[0]].states[self.strategy]
        return self.strategy.cp > 1 and state.placements[MESH_DIMS.index("cp")] == Shard(1)

    def _context_parallel(self, node: LogicalNode, ins: list[torch.fx.Node]) -> torch.fx.Node:
        """Rotary embedding at the zig-zag chunks' true positions; ring or Ulysses attention."""
        ranks = self.strategy.cp_group(self.rank)
        index = self.strategy.coords(self.rank).cp
        if node.op == "rotary":
            return self.out.call_function(zigzag_rotary, (*ins, index, self.strategy.cp))
        flavour = context_flavour(self.graph.config, self.strategy)
        assert flavour is not None  # cp > 1 here (``_context_split``)
        fx = node.fx_node
        assert fx is not None  # attention keeps its traced call
        window = fx.args[4] if len(fx.args) > 4 else fx.kwargs.get("window")  # a sliding layer's, else None
        assert window is None or isinstance(window, int)  # traced as the layer's constant
        module: RingAttention | UlyssesAttention
        if flavour == "ulysses":
            module = UlyssesAttention(ranks, index, window)
        else:
            assert window is None  # ``check_strategy`` refuses sliding layers under ring attention
            module = RingAttention(ranks, index)
        return self._module_node(f"{node.name}_context_parallel", module, ins)

    def _expert_parallel(self, node: LogicalNode, ins: list[torch.fx.Node]) -> torch.fx.Node:
        """The mixture with its experts split over the ep group: tokens sent to them and back."""
        fx = node.fx_node
        assert fx is not None and self.graph.config.experts is not None  # a routed layer's traced call
        gate, layer = fx.args[5:7]
        assert isinstance(gate, tuple) and isinstance(layer, int)  # constants
        ranks = self.strategy.ep_group(self.rank)
        count = self.graph.config.experts.count
        module = ExpertParallel(ranks, ranks.index(self.rank), count, Gate(*gate), layer)
        return self._module_node(f"{node.name}_expert_parallel", module, ins)


def _vocab_split(node: LogicalNode, graph: LogicalGraph, strategy: Strategy) -> bool:
    """The embedding weight, or the loss's logits, are split over the vocabulary in tp."""
    source = graph.nodes[node.inputs[1] if node.op == "embedding" else node.inputs[0]]
    placement = source.states[strategy].placements[MESH_DIMS.index("tp")]
    if node.op == "embedding":
        vocab_dim = 0
    else:
        assert source.shape is not None  # the logits were traced with their shape
        vocab_dim = len(source.shape) - 1
    return placement == Shard(vocab_dim)
