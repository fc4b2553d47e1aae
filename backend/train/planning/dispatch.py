"""Which strategy trains which sequences, and in which order the strategies run.

A ``HotSwitchPlan`` is a list of (strategy, lower bound) buckets, longest first as in
HotSPa: a sequence of length L goes to the first bucket whose bound is below L. One
bucket with bound 0 is static training. A bucket's strategy may be a device group on part of
the ranks (``tp2@0-1``): groups on disjoint ranks train side by side, one stage of the step.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from hotswitch.backend.data.stream import Sequence as Seq
from hotswitch.backend.strategy import Strategy

Stage = tuple[Strategy, ...]
"""Strategies on disjoint ranks that train at the same time: one over every device, or device groups."""


@dataclass(frozen=True)
class Bucket:
    strategy: Strategy
    above: int  # serves lengths L > above

    def __str__(self) -> str:
        return f"{self.strategy}(L>{self.above})"


@dataclass(frozen=True)
class HotSwitchPlan:
    buckets: tuple[Bucket, ...]  # bounds strictly decreasing, the last one 0

    @classmethod
    def of(cls, spec: Sequence[tuple[str | Strategy, int]] | Sequence[list] | str | Strategy) -> HotSwitchPlan:
        """``"dp4"`` (static), or ``[("tp4", 256), ("dp2tp2", 64), ("dp4", 0)]``."""
        if isinstance(spec, str | Strategy):
            spec = [(spec, 0)]
        buckets = tuple(Bucket(Strategy.parse(s), int(b)) for s, b in sorted(spec, key=lambda x: -int(x[1])))
        bounds = [b.above for b in buckets]
        if not buckets or bounds[-1] != 0 or len(set(bounds)) != len(bounds):
            raise ValueError(
                f"buckets {[(str(b.strategy), b.above) for b in buckets]} must have distinct lower bounds "
                f"and one of them 0, e.g. [('tp4', 256), ('dp4', 0)]"
            )
        strategies = [b.strategy for b in buckets]
        if len(set(strategies)) != len(strategies):
            raise ValueError(f"a strategy serves two buckets in {[str(s) for s in strategies]}; merge them")
        sizes = {s.world_size for s in strategies if not s.is_group}
        if len(sizes) > 1:
            raise ValueError(f"strategies {[str(s) for s in strategies]} use different device counts {sorted(sizes)}")
        check_disjoint([s for s in strategies if s.is_group])
        if sizes:
            world = sizes.pop()
            beyond = [str(s) for s in strategies if s.is_group and s.ranks[-1] >= world]
            if beyond:
                raise ValueError(
                    f"device groups {beyond} reach past the plan's {world} devices; place them in 0-{world - 1}"
                )
        return cls(buckets)

    @property
    def strategies(self) -> tuple[Strategy, ...]:
        return tuple(b.strategy for b in self.buckets)

    @property
    def spec(self) -> list[list]:
        """The buckets as the ``plan`` setting, events and checkpoints write them:
        ``[["tp4", 256], ["dp4", 0]]``; ``HotSwitchPlan.of`` reads them back."""
        return [[str(b.strategy), b.above] for b in self.buckets]

    def reach(self, longest: int) -> list[tuple[Bucket, int]]:
        """Each bucket with the longest sequence it is sent when no sequence is longer than
        ``longest``: the bound of the bucket before it, or ``longest`` where that is shorter. A
        bucket sent nothing has a length not above its own bound."""
        out = []
        upper = longest
        for bucket in self.buckets:
            out.append((bucket, upper))
            upper = min(upper, bucket.above)
        return out

    def strategy_for(self, length: int) -> Strategy:
        """The strategy of the first bucket whose lower bound is below ``length``."""
        return next(b.strategy for b in self.buckets if length > b.above)

    def assign(self, batch: list[Seq]) -> dict[Strategy, list[Seq]]:
        """The batch's sequences per strategy, in batch order (every strategy present)."""
        groups: dict[Strategy, list[Seq]] = {b.strategy: [] for b in self.buckets}
        for s in batch:
            groups[self.strategy_for(s.length)].append(s)
        return groups

    def assign_lengths(self, lengths: Sequence[int]) -> dict[Strategy, list[int]]:
        """``assign`` for bare lengths (planning and prediction)."""
        groups: dict[Strategy, list[int]] = {b.strategy: [] for b in self.buckets}
        for n in lengths:
            groups[self.strategy_for(n)].append(n)
        return groups

    def __str__(self) -> str:
        return " | ".join(str(b) for b in self.buckets)


def check_disjoint(groups: Sequence[Strategy]) -> None:
    """Raise, naming both groups and the fix, where two device groups share a rank."""
    owner: dict[int, Strategy] = {}
    for g in groups:
        for rank in g.ranks:
            if rank in owner:
                raise ValueError(
                    f"device groups {owner[rank]} and {g} share rank {rank}: groups train side by side, each on its "
                    "own ranks; place them on disjoint ranks (or make one a strategy over every device)"
                )
            owner[rank] = g


def instantiation_strategy(strategies: Sequence[Strategy]) -> Strategy:
    """The strategy over every device keeping the fewest model states per device (most split
    by tp x pp); among equals the first given, i.e. the one serving the longest sequences.
    Device groups cannot hold the master weights: a plan of groups alone keeps them
    data-parallel over the devices its groups reach (sharded by the distributed optimizer); nor
    can expert parallelism: the chosen strategy holds every expert (its ep dropped)."""
    whole = [s for s in strategies if not s.is_group]
    if not whole:
        return Strategy(dp=max(s.ranks[-1] for s in strategies) + 1)
    chosen = max(whole, key=lambda s: (s.tp * s.pp, -whole.index(s)))
    return replace(chosen, ep=1)  # the master weights hold every expert (a plan's strategies may split them)


def check_device_groups(strategies: Sequence[Strategy], world: int) -> None:
    """Raise, naming the group and the fix, unless the device groups among ``strategies`` (if
    any) cover the ``world`` devices: a rank outside every group would idle while they train."""
    taken = {rank for s in strategies if s.is_group for rank in s.ranks}
    idle = sorted(set(range(world)) - taken)
    if taken and idle:
        groups = [str(s) for s in strategies if s.is_group]
        raise ValueError(
            f"device groups {groups} leave ranks {idle} of {world} idle while they train; place a group on them "
            "or widen one (each group's degrees multiply to its number of ranks)"
        )


def execution_order(
    strategies: Sequence[Strategy], instantiation: Strategy, switch_cost: Callable[[Strategy, Strategy], float]
) -> tuple[Strategy | Stage, ...]:
    """The instantiation strategy last (it then updates in place); the others (device groups
    side by side as one stage) in the order that makes the chain of switches from and
    back to it cheapest. Ties keep the given order reversed, i.e. shortest sequences first, as
    in HotSPa."""
    rest = list(reversed(strategies))
    whole: list[Strategy | Stage] = [s for s in rest if s != instantiation and not s.is_group]
    groups = tuple(s for s in rest if s.is_group)  # on disjoint ranks (HotSwitchPlan.of): one stage
    middle = [groups, *whole] if groups else whole
    best = tuple(middle)
    best_cost = None
    for order in itertools.permutations(middle):
        chain = (instantiation, *order, instantiation)
        cost = sum(_stage_cost(a, b, switch_cost) for a, b in itertools.pairwise(chain))
        if best_cost is None or cost < best_cost - 1e-12:
            best = order
            best_cost = cost
    return (*best, instantiation)


def _stage_cost(a: Strategy | Stage, b: Strategy | Stage, switch_cost: Callable[[Strategy, Strategy], float]) -> float:
    """A switch between two stages: between every strategy of one and every strategy of the other."""
    return sum(switch_cost(x, y) for x in as_stage(a) for y in as_stage(b))


def as_stage(item: Strategy | Stage) -> Stage:
    return item if isinstance(item, tuple) else (item,)


SwitchKey = tuple[str, Strategy, Strategy]
"""("params" | "grads", source, destination): one switch, as ``CostModel.switch_s`` keys it."""


@dataclass(frozen=True)
class WalkedStage:
    ran: Stage  # the stage's strategies that train this step (the instantiation always does)
    switches: tuple[SwitchKey, ...]  # into the stage, in the engine's order: gradients, then parameters


def walk_stages(
    groups: dict[Strategy, list], order: Sequence[Strategy | Stage], instantiation: Strategy
) -> tuple[list[WalkedStage], tuple[SwitchKey, ...]]:
    """The stages a step of ``groups`` runs in ``order`` and the switches between them, as the
    engine walks them (``train/loop/stages.py``): a stage's gradients enter through its first
    strategy, from every group of the stage before; its parameters come from the stage before
    when that was one strategy, else from the instantiation (which keeps them); the last
    stage's gradients go back to the instantiation. Also the switches after the last stage."""
    walked: list[WalkedStage] = []
    previous: Stage = ()
    for item in order:
        ran = tuple(s for s in as_stage(item) if groups.get(s) or s == instantiation)
        if not ran:
            continue
        source = previous[0] if len(previous) == 1 else instantiation
        switches = [("grads", p, ran[0]) for p in previous]
        switches += [("params", source, s) for s in ran if s != instantiation]
        walked.append(WalkedStage(ran, tuple(switches)))
        previous = ran
    final = () if previous in ((), (instantiation,)) else tuple(("grads", p, instantiation) for p in previous)
    return walked, final
