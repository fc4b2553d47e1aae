"""Which strategy trains which sequences, and in which order the strategies run.

A ``HotSwitchPlan`` is a list of (strategy, lower bound) buckets, longest first as in
HotSPa: a sequence of length L goes to the first bucket whose bound is below L. One
bucket with bound 0 is static training.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hotswitch.backend.data.stream import Sequence as Seq
from hotswitch.backend.strategy import Strategy


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
    def of(cls, spec: Sequence[tuple[str | Strategy, int]] | str | Strategy) -> HotSwitchPlan:
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
        sizes = {s.world_size for s in strategies}
        if len(sizes) > 1:
            raise ValueError(f"strategies {[str(s) for s in strategies]} use different device counts {sorted(sizes)}")
        return cls(buckets)

    @property
    def strategies(self) -> tuple[Strategy, ...]:
        return tuple(b.strategy for b in self.buckets)

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


def instantiation_strategy(strategies: Sequence[Strategy]) -> Strategy:
    """The strategy keeping the fewest model states per device (most split by tp x pp);
    among equals the first given, i.e. the one serving the longest sequences."""
    return max(strategies, key=lambda s: (s.tp * s.pp, -list(strategies).index(s)))


def execution_order(
    strategies: Sequence[Strategy], instantiation: Strategy, switch_cost: Callable[[Strategy, Strategy], float]
) -> tuple[Strategy, ...]:
    """The instantiation strategy last (it then updates in place); the others in the order
    that makes the chain of switches from and back to it cheapest. Ties keep the given
    order reversed, i.e. shortest sequences first, as in HotSPa."""
    middle = [s for s in reversed(strategies) if s != instantiation]
    best, best_cost = tuple(middle), None
    for order in itertools.permutations(middle):
        chain = (instantiation, *order, instantiation)
        cost = sum(switch_cost(a, b) for a, b in itertools.pairwise(chain))
        if best_cost is None or cost < best_cost - 1e-12:
            best, best_cost = order, cost
    return (*best, instantiation)
