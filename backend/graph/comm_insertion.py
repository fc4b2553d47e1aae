"""The comm-insertion pass: deduce every node's placements per strategy, and put a comm
node on each edge where some strategy needs the producer's tensor converted.

Runs on the strategy-independent nodes once their pipeline stages are assigned. Per
strategy and mesh dim, the deduction rules (``rules.py``) say what placements each op
needs of its inputs; ``rules.conversion`` names the collective that gets them there.
One comm node serves every strategy: where a strategy needs nothing it is a dummy. Edges
whose ends lie on different stages in some strategy first get a shared ``p2p`` node
(``nodes.P2P``), and any dp/cp/tp conversion follows it on the consumer's stage.
"""

from __future__ import annotations

from collections.abc import Sequence

from hotswitch.backend.dist_state import DistState, Placement, Replicate, Shard
from hotswitch.backend.graph import rules
from hotswitch.backend.graph.nodes import FREE, MESH_DIMS, P2P, POSITIONS, CommStep, LogicalNode
from hotswitch.backend.layout import compiled_placements, mesh_shape, param_layout
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.strategy import Strategy

Placements = tuple[Placement, ...]  # one per mesh dim
Needs = dict[tuple[str, int], tuple[Placements, tuple[CommStep, ...]]]  # (node, input) -> (required, steps)
Deduced = dict[Strategy, tuple[dict[str, Placements], Needs]]  # per strategy: (placements, needs)


def insert_comm(
    config: ModelConfig, strategies: Sequence[Strategy], nodes: dict[str, LogicalNode]
) -> dict[str, LogicalNode]:
    """The nodes in topological order with comm and p2p nodes inserted and every node's
    DistState set per strategy; consumers' inputs are rewired to the comm nodes."""
    return _CommInsertion(config, strategies, nodes).run()


# the conversions of parameters' gradients the trainer makes itself: it sums them over the
# replica group (dp x cp) once per strategy
REPLICA_DIMS = ("dp", "cp")
INPUT_SPLITS = {"dp": Shard(0), "cp": Shard(1)}  # a micro-batch's rows over dp, its sequence over cp


def _state(strategy: Strategy, placements: Placements, stage: int) -> DistState:
    return DistState(strategy.stage_ranks[stage], mesh_shape(strategy), placements)


def _rules(strategy: Strategy, mesh_dim: str) -> dict:
    if mesh_dim == "tp" and strategy.sp:
        return rules.SEQUENCE_PARALLEL_RULES
    return rules.CONTEXT_PARALLEL_RULES if mesh_dim == "cp" else rules.RULES


def _computed_from_params(nodes: dict[str, LogicalNode]) -> set[str]:
    """Tensors computed from parameters (and constants) alone, e.g. a transposed weight."""
    out: set[str] = set()
    for node in nodes.values():
        if node.kind in ("param", "buffer") or (node.kind == "compute" and all(i in out for i in node.inputs)):
            out.add(node.name)
    return out


class _CommInsertion:
    def __init__(self, config: ModelConfig, strategies: Sequence[Strategy], nodes: dict[str, LogicalNode]):
        self.config = config
        self.strategies = strategies
        self.nodes = nodes
        self.from_params = _computed_from_params(nodes)

    def run(self) -> dict[str, LogicalNode]:
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
                        need = per_strategy[s]
                        assert need is not None  # every strategy deduced this consumer's inputs
                        required, steps = need
                        comm.comm[s] = steps
                        comm.stages[s] = node.stages[s]
                        comm.states[s] = _state(s, required, node.stages[s])
                    shared[key] = comm.name
                    ordered[comm.name] = comm
                node.inputs[i] = shared[key]
            for s in self.strategies:
                node.states[s] = _state(s, deduced[s][0][node.name], node.stages[s])
            ordered[node.name] = node
        return ordered

    # -- pipeline stages: p2p where producer and consumer lie on different stages ----------
    def _crossing(self, strategy: Strategy, producer: str, consumer: LogicalNode) -> bool:
        source = self.nodes[producer]
        return source.kind not in FREE and source.stages[strategy] != consumer.stages[strategy]

    def _p2p(
        self,
        producer: str,
        consumer: LogicalNode,
        placed: Deduced,
        shared: dict[tuple, str],
        ordered: dict[str, LogicalNode],
    ) -> str:
        """The (shared) p2p node carrying ``producer`` to ``consumer``'s stage in every
        strategy where they differ, or ``producer`` itself if they never do."""
        crossing = {s: self._crossing(s, producer, consumer) for s in self.strategies}
        if not any(crossing.values()):
            return producer
        key = (P2P, producer, tuple((s, consumer.stages[s] if crossing[s] else None) for s in self.strategies))
        if key not in shared:
            source = self.nodes[producer]
            name = f"p2p_{sum(k[0] == P2P for k in shared)}"
            node = LogicalNode(name, "comm", P2P, [producer], source.shape, consumer.source)
            node.layer = consumer.layer
            for s in self.strategies:
                node.comm[s] = (CommStep("pp", P2P, None),) if crossing[s] else ()
                node.stages[s] = consumer.stages[s]
                node.states[s] = _state(s, placed[s][0][producer], node.stages[s])
            shared[key] = node.name
            ordered[node.name] = node
        return shared[key]

    # -- per strategy: placements, and the conversions each input needs -------------------
    def _deduce(self, strategy: Strategy) -> tuple[dict[str, Placements], Needs]:
        layout = param_layout(self.config, strategy)
        mesh = mesh_shape(strategy)
        placed: dict[str, Placements] = {}
        needs: Needs = {}
        for node in self.nodes.values():
            if node.kind == "input" and node.name == POSITIONS:
                placed[node.name] = (Replicate(),) * len(mesh)
            elif node.kind == "input":
                placed[node.name] = tuple(
                    INPUT_SPLITS.get(d, Replicate()) if size > 1 else Replicate() for d, size in zip(MESH_DIMS, mesh)
                )
            elif node.kind == "param":
                placed[node.name] = tuple(
                    p if size > 1 else Replicate() for p, size in zip(compiled_placements(layout[node.name]), mesh)
                )
            elif node.kind == "buffer":
                placed[node.name] = (Replicate(),) * len(mesh)
            elif node.kind == "output":
                placed[node.name] = placed[node.inputs[0]]
            else:
                placed[node.name] = self._deduce_node(node, strategy, mesh, placed, needs)
        return placed, needs

    def _deduce_node(
        self, node: LogicalNode, strategy: Strategy, mesh: tuple[int, ...], placed: dict[str, Placements], needs: Needs
    ) -> Placements:
        shapes = [self.nodes[i].shape for i in node.inputs]
        out: list[Placement] = []
        required: list[list[Placement]] = [[] for _ in node.inputs]  # per input, one per mesh dim
        steps: list[list[CommStep]] = [[] for _ in node.inputs]
        for m, size in enumerate(mesh):
            ins = [placed[i][m] for i in node.inputs]
            table = _rules(strategy, MESH_DIMS[m])
            if size == 1:
                out.append(Replicate())
                for slot in required:
                    slot.append(Replicate())
                continue
            try:
                d = table[node.op](ins, shapes, node)
                for i, (actual, want, grad_partial) in enumerate(zip(ins, d.required, d.grad_partial)):
                    if MESH_DIMS[m] in REPLICA_DIMS and node.inputs[i] in self.from_params:
                        grad_partial = False  # the trainer reduces parameter gradients over dp x cp itself
                    required[i].append(want)
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
