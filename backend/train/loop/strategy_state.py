"""One strategy on one rank: its parameter and gradient buffers and its executable graph."""

from __future__ import annotations

from dataclasses import dataclass

from hotswitch.backend.graph.compile import ExecGraph
from hotswitch.backend.layout import ParamLayout
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.strategy import Strategy


@dataclass
class StrategyState:
    """``params`` and ``grads`` hold this rank's boxes of ``layout``; ``graph`` computes with
    them (None on a rank outside a device group, whose buffers are then empty). Both buffers
    are allocated and released together (views survive a release)."""

    strategy: Strategy
    layout: dict[str, ParamLayout]
    params: FlatBuffer
    grads: FlatBuffer
    graph: ExecGraph | None

    @property
    def allocated(self) -> bool:
        return self.params.allocated

    def allocate(self) -> None:
        self.params.allocate()
        self.grads.allocate()

    def release(self) -> None:
        self.params.release()
        self.grads.release()
