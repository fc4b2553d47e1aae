"""The hot switches of one rank's engine (HotSPa's switch execution): each (what, src, dst)
planned and bound to the two strategies' flat buffers once, then run whenever a step moves
from one strategy to the next.

Parameters move as they are (the copies strategies compute with: bf16 in mixed precision).
Gradients, reduced over the source's replica group, land in the destination as a
replica-partial sum (the value on one replica of its dp x cp group, zeros on the others), so
that its micro-batches add to them and its reduction is exact; the last strategy's gradients
land in the master layout as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from hotswitch.backend.layout import partial_over_replicas
from hotswitch.backend.runtime.devices import DeviceMarks, Span
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.switch.executor import BoundSwitch
from hotswitch.backend.switch.planner import plan_switch

if TYPE_CHECKING:
    from hotswitch.backend.train.loop.engine import Engine

SwitchKind = Literal["params", "grads", "grads_final"]
"""What a switch moves: parameters; reduced gradients into the next strategy as a
replica-partial sum; or the last strategy's gradients into the master layout as they are."""


class Switches:
    """``engine``'s switches between its resident strategies, bound on first use."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.cache: dict[tuple[SwitchKind, Strategy, Strategy, bool], BoundSwitch] = {}
        self.marks = DeviceMarks(engine.device)
        self.first_runs: list[tuple[dict, Span]] = []  # each switch's statistics the first time it runs

    def take_stats(self) -> list[dict]:
        """Statistics of each switch that ran for the first time since the last call (its
        seconds read from its marks, waiting for the device to reach them); then emptied."""
        runs, self.first_runs = self.first_runs, []
        return [{**stats, "seconds": self.marks.seconds(*span)} for stats, span in runs]

    def run(self, what: SwitchKind, src: Strategy, dst: Strategy, add: bool = False) -> Span:
        """Run one switch (collective over every rank); the marks of its start and end in the
        device's work (``DeviceMarks``: read them once the step is queued, not stopping the
        device here). ``add``: gradients are added to what ``dst`` holds instead of replacing it."""
        first = (what, src, dst, add) not in self.cache
        bound = self.bound(what, src, dst, add)
        started = self.marks.mark()
        bound.run()
        span = (started, self.marks.mark())
        if first:
            stats: dict[str, object] = {"src": str(src), "dst": str(dst), "what": f"{what}+add" if add else what}
            stats.update(bytes=bound.plan.bytes_moved, predicted_s=bound.predicted_s)
            self.first_runs.append((stats, span))
        return span

    def bound(self, what: SwitchKind, src: Strategy, dst: Strategy, add: bool = False) -> BoundSwitch:
        """The switch bound to the two strategies' buffers (planned once, then cached)."""
        key = (what, src, dst, add)
        if key not in self.cache:
            with self.engine.holding(src, dst):  # views are taken of allocated memory only
                self.cache[key] = self._bind(what, src, dst, add)
        return self.cache[key]

    def _bind(self, what: SwitchKind, src: Strategy, dst: Strategy, add: bool) -> BoundSwitch:
        engine = self.engine
        a = engine.states[src]
        b = engine.states[dst]
        p = engine.precision
        if what == "params":  # the copies strategies compute with: bf16 in mixed precision
            plan = plan_switch(a.layout, b.layout, engine.cluster, itemsize=p.param_bytes)
            return BoundSwitch(plan, engine.rank, a.params, b.params)
        final = dst == engine.instantiation and what == "grads_final"
        target = b.layout if final else partial_over_replicas(b.layout)
        plan = plan_switch(a.layout, target, engine.cluster, itemsize=p.grad_bytes)
        return BoundSwitch(plan.adding() if add else plan, engine.rank, a.grads, b.grads)
