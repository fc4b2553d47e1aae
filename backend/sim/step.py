"""One simulated step as every rank spends it: switches, each strategy's micro-batches (and the
pipeline's and the slower replicas' idle time), gradient syncs, the update.

The step's length is ``CostModel.step_s``, the prediction the trainer makes; this only lays its
terms out per rank. It works on any ``CostModel``: a measured one (this machine) or a simulated
one (``sim.setup``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.cost import CostModel, SizedSequence, pipelined_s
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, execution_order, sequential_order

KINDS = ("switch", "compute", "bubble", "sync", "update")


@dataclass(frozen=True)
class Segment:
    rank: int
    start: float
    end: float
    kind: str  # one of KINDS
    strategy: str


@dataclass(frozen=True)
class SimulatedStep:
    seconds: float  # CostModel.step_s
    order: tuple[str, ...]  # strategies as they run, the instantiation last
    segments: tuple[Segment, ...]
    activation_bytes: dict[str, float]  # per strategy: its largest micro-batch's, per device
    micro_batches: dict[str, int]  # per strategy, on its busiest replica

    def breakdown(self, rank: int = 0) -> dict[str, float]:
        """Seconds ``rank`` spends on each kind of work."""
        out = dict.fromkeys(KINDS, 0.0)
        for s in self.segments:
            if s.rank == rank:
                out[s.kind] += s.end - s.start
        return out


class _Timeline:
    def __init__(self, world: int):
        self.world, self.now = world, 0.0
        self.segments: list[Segment] = []

    def all_ranks(self, seconds: float, kind: str, strategy: Strategy) -> None:
        if seconds > 0:
            self.segments += [Segment(r, self.now, self.now + seconds, kind, str(strategy)) for r in range(self.world)]
            self.now += seconds

    def group(self, strategy: Strategy, replica_busy: list[float], seconds: float) -> None:
        """Each rank computes its replica's share of the work, then waits for the group's end."""
        for rank in range(self.world):
            busy = replica_busy[strategy.coords(rank)[1]] if replica_busy else 0.0
            if busy > 0:
                self.segments.append(Segment(rank, self.now, self.now + busy, "compute", str(strategy)))
            if seconds > busy:
                self.segments.append(Segment(rank, self.now + busy, self.now + seconds, "bubble", str(strategy)))
        self.now += seconds


def _group(cost: CostModel, strategy: Strategy, lengths: list[int]) -> tuple[list[float], float, float, int]:
    """(each replica's busy seconds per device, the group's seconds, its largest micro-batch's
    activation bytes, the busiest replica's micro-batches)."""
    if not lengths:
        return [], 0.0, 0.0, 0
    c = cost.strategies[strategy]
    seqs = [SizedSequence(i, n) for i, n in enumerate(lengths)]
    replicas = cost.micro_batching().split(strategy, seqs)
    if cost.packed:  # one row of documents back to back: its tokens' cost, each document's attention
        latencies = [[c.packed_s([s.length for s in m]) for m in replica] for replica in replicas]
        peak = max(c.memory(sum(s.length for s in m)) for replica in replicas for m in replica)
    else:
        latencies = [[c.micro_batch_s(len(m), m[0].length) for m in replica] for replica in replicas]
        peak = max(len(m) * c.memory(m[0].length) for replica in replicas for m in replica)
    busy = [sum(r) / strategy.pp for r in latencies]  # a micro-batch spends 1/pp of its latency per stage
    seconds = max(pipelined_s(r, c.increment) for r in latencies)
    return busy, seconds, peak, max(len(r) for r in replicas)


def simulate_step(
    cost: CostModel, plan: HotSwitchPlan, lengths: Sequence[int], instantiation: Strategy, world: int
) -> SimulatedStep:
    """``plan``'s step on ``lengths`` with ``instantiation`` updating, laid out on ``world`` ranks:
    the same terms in the same order as ``CostModel.ordered_step_s``."""
    groups = plan.assign_lengths(lengths)
    order = sequential_order(execution_order(plan.strategies, instantiation, cost.switch_cost))
    line, previous = _Timeline(world), None
    activations, micro = {}, {}
    for strategy in order:
        group = groups.get(strategy, [])
        if not group and strategy != instantiation:
            continue
        switch = cost.switch_s.get(("grads", previous, strategy), 0.0) if previous is not None else 0.0
        if strategy != instantiation:
            switch += cost.switch_s.get(("params", previous or instantiation, strategy), 0.0)
        line.all_ranks(switch, "switch", strategy)
        busy, seconds, activations[str(strategy)], micro[str(strategy)] = _group(cost, strategy, group)
        line.group(strategy, busy, seconds)
        line.all_ranks(cost.strategies[strategy].sync_s if strategy.replicas > 1 else 0.0, "sync", strategy)
        previous = strategy
    if previous is not None and previous != instantiation:  # (None: nothing ran, nothing to switch)
        line.all_ranks(cost.switch_s.get(("grads", previous, instantiation), 0.0), "switch", instantiation)
    line.all_ranks(cost.update_s, "update", instantiation)
    return SimulatedStep(
        seconds=cost.step_s(plan, lengths, instantiation),
        order=tuple(str(s) for s in order),
        segments=tuple(line.segments),
        activation_bytes=activations,
        micro_batches=micro,
    )
