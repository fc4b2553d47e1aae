"""One simulated step as every rank spends it: switches, each strategy's micro-batches (and the
pipeline's and the slower replicas' idle time), gradient syncs, the update.

The step's length is ``CostModel.step_s``, the prediction the trainer makes; this only lays its
terms out per rank. It works on any ``CostModel``: a measured one (this machine) or a simulated
one (``sim.scenario``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.cost import CostModel, SizedSequence, pipelined_s
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, as_stage, execution_order, walk_stages

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
    order: tuple[str, ...]  # strategies as they run (a stage's device groups one after another), the instantiation last
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
        self.world = world
        self.now = 0.0
        self.segments: list[Segment] = []

    def all_ranks(self, seconds: float, kind: str, strategy: Strategy) -> None:
        if seconds > 0:
            self.segments += [Segment(r, self.now, self.now + seconds, kind, str(strategy)) for r in range(self.world)]
            self.now += seconds

    def stage(self, groups: list[tuple[Strategy, list[float], float, float]]) -> None:
        """Device groups side by side (or one strategy over every rank): each rank computes its
        replica's share of its group's work, waits for its group's end, reduces its gradients
        over the group's replicas, then waits for the stage's slowest group."""
        end = max(seconds + sync for _, _, seconds, sync in groups)
        for strategy, replica_busy, seconds, sync in groups:
            for rank in strategy.ranks if strategy.is_group else range(self.world):
                busy = replica_busy[strategy.coords(rank).dp] if replica_busy else 0.0
                self._add(rank, 0.0, busy, "compute", strategy)
                self._add(rank, busy, seconds, "bubble", strategy)
                self._add(rank, seconds, seconds + sync, "sync", strategy)
                self._add(rank, seconds + sync, end, "bubble", strategy)
        self.now += end

    def _add(self, rank: int, start: float, end: float, kind: str, strategy: Strategy) -> None:
        if end > start:
            self.segments.append(Segment(rank, self.now + start, self.now + end, kind, str(strategy)))


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
    order = execution_order(plan.strategies, instantiation, cost.switch_cost)
    stages, final = walk_stages(groups, order, instantiation)
    line = _Timeline(world)
    activations = {}
    micro = {}
    for stage in stages:
        line.all_ranks(cost.switches_s(stage.switches), "switch", stage.ran[0])
        timed = []
        for strategy in stage.ran:
            name = str(strategy)
            busy, seconds, activations[name], micro[name] = _group(cost, strategy, groups.get(strategy, []))
            timed.append((strategy, busy, seconds, cost.sync_s(strategy)))
        line.stage(timed)
    line.all_ranks(cost.switches_s(final), "switch", instantiation)
    line.all_ranks(cost.update_s, "update", instantiation)
    return SimulatedStep(
        seconds=cost.step_s(plan, lengths, instantiation),
        order=tuple(str(s) for item in order for s in as_stage(item)),
        segments=tuple(line.segments),
        activation_bytes=activations,
        micro_batches=micro,
    )
