"""The logical graph: one graph carrying every strategy's distributed states.

Every node holds one DistState per strategy. Where a strategy needs a tensor
converted between producer and consumer, a comm node sits on that edge; in the
strategies that need nothing there it is a dummy (identity), so all strategies
share one graph (HotSPa's multi-strategy graph). ``compile.py`` turns it into one
executable graph per (strategy, rank).

Pipeline stages are a third axis: a node of layer ``l`` lives on the stage holding
``l`` (``layout.stage_layers``), the embedding on the first stage and the head on the
last. Every edge whose ends lie on different stages in some strategy gets a ``p2p``
comm node (send on the producer's stage, receive on the consumer's; a dummy where the
ends share a stage), and any dp/tp conversion the consumer needs follows it on the
consumer's stage. A node's DistState lists its stage's ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch.fx

from hotswitch.backend.dist_state import DistState, Placement, Replicate, Shard
from hotswitch.backend.graph import rules
from hotswitch.backend.graph.trace import op_kind, source_line, trace_config
from hotswitch.backend.layout import param_layout, stage_layers
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.strategy import Strategy

MESH_DIMS = ("dp", "tp")
FREE = ("input", "buffer")  # every pipeline stage has these


@dataclass(frozen=True)
class CommStep:
    """One collective along one mesh dim: ``kind`` from ``runtime.collectives.KINDS``."""

    mesh_dim: str
    kind: str
    dim: int | None

    def __str__(self) -> str:
        return f"{self.kind}[{self.mesh_dim}]" + ("" if self.dim is None else f"(dim={self.dim})")


@dataclass
class LogicalNode:
    name: str
    kind: str  # input | param | buffer | compute | comm | output
    op: str  # the rule name for compute nodes; "comm", "param", ... otherwise
    inputs: list[str]
    shape: tuple[int, ...] | None
    source: str = ""
    layer: int | None = None
    states: dict[Strategy, DistState] = field(default_factory=dict)
    stages: dict[Strategy, int] = field(default_factory=dict)  # pipeline stage per strategy
    comm: dict[Strategy, tuple[CommStep, ...]] = field(default_factory=dict)  # comm nodes; () = dummy
    fx_node: torch.fx.Node | None = None  # compute nodes: the traced call

    def is_dummy(self, strategy: Strategy) -> bool:
        return self.kind == "comm" and not self.comm[strategy]


def _layer_of(node: torch.fx.Node) -> int | None:
    for path in reversed(list(node.meta.get("nn_module_stack", {}))):
        parts = path.split(".") if isinstance(path, str) else []
        if len(parts) > 1 and parts[0] == "layers" and parts[1].isdigit():
            return int(parts[1])
    target = node.target if isinstance(node.target, str) else ""
    parts = target.split(".")
    return int(parts[1]) if len(parts) > 1 and parts[0] == "layers" and parts[1].isdigit() else None


class LogicalGraph:
    """Nodes in topological order; ``nodes[name]`` for lookup."""

    def __init__(self, config: ModelConfig, strategies: Sequence[str | Strategy], module: torch.fx.GraphModule):
        self.config = config
        self.strategies = [Strategy.parse(s) for s in strategies]
        self.module = module
        self.nodes: dict[str, LogicalNode] = {}
        self._build_base()
        for s in self.strategies:
            self._assign_stages(s)
        self._deduce_and_insert_comm()

    @classmethod
    def build(cls, config: ModelConfig, strategies: Sequence[str | Strategy], batch: int = 2, seq: int = 16):
        return cls(config, strategies, trace_config(config, batch, seq))

    # -- the strategy-independent nodes --------------------------------------------------
    def _add(self, node: LogicalNode) -> None:
        self.nodes[node.name] = node

    def _build_base(self) -> None:
        modules = dict(self.module.named_modules())
        shapes = {n.name: _shape(n) for n in self.module.graph.nodes}
        self._names: dict[torch.fx.Node, str] = {}
        params = set(self.config.param_shapes())
        for n in self.module.graph.nodes:
            if n.op == "placeholder":
                self._add(LogicalNode(n.name, "input", "input", [], shapes[n.name]))
            elif n.op == "get_attr":
                kind = "param" if n.target in params else "buffer"
                self._add(LogicalNode(n.target, kind, kind, [], shapes[n.name], layer=_layer_of(n)))
                self._names[n] = n.target
                continue
            elif n.op == "output":
                self._add(LogicalNode(n.name, "output", "output", [self._names[n.args[0]]], shapes[n.args[0].name]))
            else:
                op = op_kind(n, modules)
                inputs = [self._names[a] for a in n.all_input_nodes]
                if n.op == "call_module":  # the weight becomes an explicit input
                    weight = f"{n.target}.weight"
                    self._add(
                        LogicalNode(
                            weight, "param", "param", [], tuple(modules[n.target].weight.shape), layer=_layer_of(n)
                        )
                    )
                    inputs.append(weight)
                self._add(
                    LogicalNode(n.name, "compute", op, inputs, shapes[n.name], source_line(n), _layer_of(n), fx_node=n)
                )
            self._names[n] = n.name

    # -- per strategy: pipeline stages ------------------------------------------------------
    def _assign_stages(self, strategy: Strategy) -> None:
        """Layers by ``stage_layers``; parameters where the layout keeps them; any other op
        on the latest stage among its inputs (the embedding first, the head last); inputs
        and buffers, which every stage has, on the first stage that reads them."""
        layout = param_layout(self.config, strategy)
        stages = stage_layers(self.config.n_layers, strategy.pp)
        for node in self.nodes.values():
            if node.kind == "param":
                node.stages[strategy] = layout[node.name].stage
            elif node.layer is not None and node.kind == "compute":
                node.stages[strategy] = next(i for i, r in enumerate(stages) if node.layer in r)
            elif node.kind in ("compute", "output"):
                placed = [self.nodes[i].stages[strategy] for i in node.inputs if self.nodes[i].kind not in FREE]
                node.stages[strategy] = max(placed, default=0)
        for node in self.nodes.values():
            if node.kind in FREE:
                readers = [n.stages[strategy] for n in self.nodes.values() if node.name in n.inputs]
                node.stages[strategy] = min(readers, default=0)

    def _crossing(self, strategy: Strategy, producer: str, consumer: LogicalNode) -> bool:
        source = self.nodes[producer]
        return source.kind not in FREE and source.stages[strategy] != consumer.stages[strategy]

    def _p2p(self, producer: str, consumer: LogicalNode, placed, shared: dict, ordered: dict) -> str:
        """The (shared) p2p node carrying ``producer`` to ``consumer``'s stage in every
        strategy where they differ, or ``producer`` itself if they never do."""
        crossing = {s: self._crossing(s, producer, consumer) for s in self.strategies}
        if not any(crossing.values()):
            return producer
        key = ("p2p", producer, tuple((s, consumer.stages[s] if crossing[s] else None) for s in self.strategies))
        if key not in shared:
            source = self.nodes[producer]
            name = f"p2p_{sum(k[0] == 'p2p' for k in shared)}"
            node = LogicalNode(name, "comm", "p2p", [producer], source.shape, consumer.source)
            node.layer = consumer.layer
            for s in self.strategies:
                node.comm[s] = (CommStep("pp", "p2p", None),) if crossing[s] else ()
                node.stages[s] = consumer.stages[s]
                node.states[s] = self._state(s, placed[s][0][producer], node.stages[s])
            shared[key] = node.name
            ordered[node.name] = node
        return shared[key]

    # -- per strategy: placements, and comm where producer and consumer disagree ----------
    def _deduce(self, strategy: Strategy):
        layout = param_layout(self.config, strategy)
        mesh = (strategy.dp, strategy.tp)
        placed: dict[str, tuple[Placement, ...]] = {}
        needs: dict[tuple[str, int], tuple[tuple[Placement, ...], tuple[CommStep, ...]]] = {}
        for node in self.nodes.values():
            if node.kind == "input":
                placed[node.name] = tuple(Shard(0) if m == 0 and mesh[0] > 1 else Replicate() for m in range(2))
            elif node.kind == "param":
                placed[node.name] = tuple(
                    p if size > 1 else Replicate() for p, size in zip(layout[node.name].state.placements, mesh)
                )
            elif node.kind == "buffer":
                placed[node.name] = (Replicate(), Replicate())
            elif node.kind == "output":
                placed[node.name] = placed[node.inputs[0]]
            else:
                placed[node.name] = self._deduce_node(node, strategy, mesh, placed, needs)
        return placed, needs

    def _deduce_node(self, node, strategy, mesh, placed, needs) -> tuple[Placement, ...]:
        shapes = [self.nodes[i].shape for i in node.inputs]
        out, required = [], [[None] * 2 for _ in node.inputs]
        steps = [[] for _ in node.inputs]
        for m, size in enumerate(mesh):
            ins = [placed[i][m] for i in node.inputs]
            table = rules.SEQUENCE_PARALLEL_RULES if strategy.sp and MESH_DIMS[m] == "tp" else rules.RULES
            if size == 1:
                out.append(Replicate())
                for slot in required:
                    slot[m] = Replicate()
                continue
            try:
                d = table[node.op](ins, shapes, node)
                for i, (actual, want, grad_partial) in enumerate(zip(ins, d.required, d.grad_partial)):
                    if MESH_DIMS[m] == "dp" and node.inputs[i] in self._from_params:
                        grad_partial = False  # the trainer reduces parameter gradients over dp itself
                    required[i][m] = want
                    step = rules.conversion(actual, want, grad_partial)
                    if step:
                        steps[i].append(CommStep(MESH_DIMS[m], *step))
            except rules.NoRule as error:
                raise ValueError(
                    f"{strategy}: {node.op} '{node.name}' ({node.source}) cannot take inputs placed "
                    f"{[str(p) for p in ins]} along {MESH_DIMS[m]}: {error}"
                ) from None
            out.append(d.out)
        for i in range(len(node.inputs)):
            needs[node.name, i] = (tuple(required[i]), tuple(steps[i]))
        return tuple(out)

    def _state(self, strategy: Strategy, placements: tuple[Placement, ...], stage: int) -> DistState:
        return DistState(strategy.stage_ranks[stage], (strategy.dp, strategy.tp), placements)

    def _deduce_and_insert_comm(self) -> None:
        # tensors computed from parameters (and constants) alone, e.g. a transposed weight
        self._from_params = set()
        for node in self.nodes.values():
            if node.kind in ("param", "buffer") or (
                node.kind == "compute" and all(i in self._from_params for i in node.inputs)
            ):
                self._from_params.add(node.name)
        deduced = {s: self._deduce(s) for s in self.strategies}
        ordered: dict[str, LogicalNode] = {}
        shared: dict[tuple, str] = {}
        comms = 0
        for node in self.nodes.values():
            for i, producer in enumerate(list(node.inputs)):
                producer = node.inputs[i] = self._p2p(producer, node, deduced, shared, ordered)
                per_strategy = {s: deduced[s][1].get((node.name, i)) for s in self.strategies}
                if not any(need and need[1] for need in per_strategy.values()):
                    continue
                key = (producer, tuple((s, per_strategy[s]) for s in self.strategies))
                if key not in shared:
                    comm = LogicalNode(
                        f"comm_{comms}", "comm", "comm", [producer], ordered[producer].shape, node.source, node.layer
                    )
                    comms += 1
                    for s in self.strategies:
                        required, steps = per_strategy[s]
                        comm.comm[s] = steps
                        comm.stages[s] = node.stages[s]
                        comm.states[s] = self._state(s, required, node.stages[s])
                    shared[key] = comm.name
                    ordered[comm.name] = comm
                node.inputs[i] = shared[key]
            for s in self.strategies:
                node.states[s] = self._state(s, deduced[s][0][node.name], node.stages[s])
            ordered[node.name] = node
        self.nodes = ordered

    # -- views -----------------------------------------------------------------------------
    def comm_nodes(self) -> list[LogicalNode]:
        return [n for n in self.nodes.values() if n.kind == "comm"]

    def edges(self) -> list[tuple[str, str]]:
        return [(i, n.name) for n in self.nodes.values() for i in n.inputs]


def _shape(node: torch.fx.Node) -> tuple[int, ...] | None:
    meta = node.meta.get("tensor_meta")
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def _state_data(state: DistState) -> dict:
    return {"devices": list(state.devices), "mesh": list(state.mesh), "placements": [str(p) for p in state.placements]}


def summarize(graph: LogicalGraph) -> dict:
    """The logical graph as plain data (JSON-ready) for widgets and the event stream."""
    strategies = [str(s) for s in graph.strategies]
    nodes = []
    for n in graph.nodes.values():
        item = {
            "name": n.name,
            "kind": n.kind,
            "op": n.op,
            "inputs": list(n.inputs),
            "shape": list(n.shape) if n.shape is not None else None,
            "layer": n.layer,
            "source": n.source,
            "states": {str(s): _state_data(st) for s, st in n.states.items()},
            "stages": {str(s): stage for s, stage in n.stages.items()},
        }
        if n.kind == "comm":
            item["comm"] = {str(s): [str(step) for step in steps] for s, steps in n.comm.items()}
        nodes.append(item)
    counts: dict[str, int] = {}
    for n in graph.nodes.values():
        counts[n.kind] = counts.get(n.kind, 0) + 1
    dummies = {str(s): sum(n.is_dummy(s) for n in graph.nodes.values()) for s in graph.strategies}
    return {
        "model": graph.config.name,
        "strategies": strategies,
        "nodes": nodes,
        "edges": [list(e) for e in graph.edges()],
        "counts": counts,
        "dummies": dummies,
    }
