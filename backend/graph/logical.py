"""The logical graph: one graph carrying every strategy's distributed states.

Every node holds one DistState per strategy. Where a strategy needs a tensor
converted between producer and consumer, a comm node sits on that edge; in the
strategies that need nothing there it is a dummy (identity), so all strategies
share one graph (HotSPa's multi-strategy graph). ``compile.py`` turns it into one
executable graph per (strategy, rank). Here: the strategy-independent nodes of the
traced model and their pipeline stages; ``nodes.py`` holds the node type and
``comm_insertion.py`` the pass that deduces placements and inserts the comm nodes.

Pipeline stages are a third axis: a node of layer ``l`` lives on the stage holding
``l`` (``layout.stage_layers``), the embedding on the first stage and the head on the
last. Every edge whose ends lie on different stages in some strategy gets a ``p2p``
comm node (send on the producer's stage, receive on the consumer's; a dummy where the
ends share a stage), and any dp/cp/tp conversion the consumer needs follows it on the
consumer's stage. A node's DistState lists its stage's ranks.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch.fx

from hotswitch.backend.dist_state import DistState
from hotswitch.backend.graph.comm_insertion import insert_comm
from hotswitch.backend.graph.nodes import FREE, LogicalNode, NodeKind
from hotswitch.backend.graph.trace import op_kind, source_line, trace_config
from hotswitch.backend.layout import param_layout, stage_layers
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.strategy import Strategy


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
        self.nodes = insert_comm(config, self.strategies, self.nodes)

    @classmethod
    def build(
        cls, config: ModelConfig, strategies: Sequence[str | Strategy], batch: int = 2, seq: int = 16
    ) -> LogicalGraph:
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
                kind: NodeKind = "param" if n.target in params else "buffer"
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
        item: dict[str, object] = {
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
