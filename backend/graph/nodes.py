"""The logical graph's nodes: one per traced op, parameter, input or comm, with every
strategy's DistState, pipeline stage and (for comm nodes) collectives."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch.fx

from hotswitch.backend.dist_state import DistState
from hotswitch.backend.layout import MESH_DIMS, MeshDim
from hotswitch.backend.runtime.collectives import CommKind
from hotswitch.backend.strategy import Strategy

__all__ = ["FREE", "MESH_DIMS", "P2P", "POSITIONS", "CommStep", "LogicalNode", "MeshDim", "NodeKind", "StepKind"]
NodeKind = Literal["input", "param", "buffer", "compute", "comm", "output"]
FREE: tuple[NodeKind, ...] = ("input", "buffer")  # every pipeline stage has these

# the input holding the micro-batch's positions in their documents (``models.documents``):
# every rank gets its rows whole, whatever splits the tokens, so it is replicated everywhere
POSITIONS = "positions"
P2P: Literal["p2p"] = "p2p"  # a tensor crossing pipeline stages: ``parallel.pipeline`` carries it
StepKind = CommKind | Literal["p2p"]


@dataclass(frozen=True)
class CommStep:
    """One collective along one mesh dim (``kind`` from ``runtime.collectives.KINDS``), or
    the crossing of a pipeline stage (``P2P`` along ``pp``)."""

    mesh_dim: MeshDim | Literal["pp"]
    kind: StepKind
    dim: int | None

    def __str__(self) -> str:
        return f"{self.kind}[{self.mesh_dim}]" + ("" if self.dim is None else f"(dim={self.dim})")


@dataclass
class LogicalNode:
    name: str
    kind: NodeKind
    op: str  # the rule name for compute nodes; "comm", "p2p", "param", ... otherwise
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
