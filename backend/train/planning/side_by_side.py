"""Planning two device groups side by side: the world split into a group for the longest
sequences and one for the rest, each under its own strategy, trained at the same time.

A stage of groups lasts its slowest group, so the bound between them balances the groups by
their predicted compute (``CostModel.group_s``: attention's quadratic term included), not by
tokens: raising the bound moves sequences from the long group to the short one, so one group's
seconds fall as the other's rise, and a bisection finds where they cross. Among the pairs of
strategies (each split of the world, each pair of the cost model's groups on its two sides),
the least predicted step wins, switches and syncs included (``CostModel.step_s``). A mixture
keeps a sequential bucket over every device for the longest sequences and puts the groups
after it (``mixed_plan``).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterator, Sequence

from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.auto import auto_candidates, auto_plan, candidate_strategies, pareto
from hotswitch.backend.train.planning.cost import CostModel
from hotswitch.backend.train.planning.dispatch import Bucket, HotSwitchPlan


def group_splits(world: int) -> list[int]:
    """Sizes of the long sequences' group, at ranks 0..size-1, the rest beside it: halves and
    quarters of the world."""
    return sorted({size for size in (world // 2, world // 4, world - world // 4) if 0 < size < world})


def placed(strategy: Strategy, first: int) -> Strategy:
    """``strategy`` as a device group starting at rank ``first``."""
    return dataclasses.replace(strategy, first=first)


def group_places(world: int) -> list[tuple[int, int]]:
    """(first rank, devices) of every group ``auto`` places: for each split of ``group_splits``,
    the long sequences' group at rank 0 and the rest's beside it."""
    return [place for size in group_splits(world) for place in ((0, size), (size, world - size))]


def group_candidates(config: ModelConfig, world: int) -> list[Strategy]:
    """Device groups for a trainer's ``auto`` to profile and place side by side: the dp x tp x
    pp layouts (``candidate_strategies``) of each of ``group_places``."""
    out = [placed(s, first) for first, devices in group_places(world) for s in candidate_strategies(config, devices)]
    return list(dict.fromkeys(out))


def auto_strategies(
    config: ModelConfig, world: int, max_len: int, context_parallel: bool | None, side_by_side: bool
) -> list[Strategy]:
    """The strategies a trainer's ``auto`` profiles and weighs: ``auto_candidates``, and with
    ``side_by_side`` the device groups of ``group_candidates``."""
    groups = group_candidates(config, world) if side_by_side else []
    return [*auto_candidates(config, world, max_len, context_parallel), *groups]


def best_plan(
    lengths: Sequence[int], cost: CostModel, instantiation: Strategy, max_len: int
) -> tuple[HotSwitchPlan, float]:
    """``auto`` weighing device groups too: the fastest of ``auto_plan``'s sequential buckets
    (over the cost model's strategies on every device), two groups side by side, and the
    mixture of the sequential plan's longest bucket then two groups; with its predicted step."""
    if not any(s.is_group for s in cost.strategies):  # nothing to place side by side: the search as it was
        return auto_plan(lengths, cost, instantiation, max_len)
    whole = dataclasses.replace(cost, strategies={s: c for s, c in cost.strategies.items() if not s.is_group})
    best = auto_plan(lengths, whole, instantiation, max_len)
    found = [side_by_side_plan(lengths, cost, instantiation, max_len)]
    if len(best[0].buckets) > 1:
        found.append(mixed_plan(lengths, cost, instantiation, max_len, best[0].buckets[0]))
    for plan in found:
        if plan is not None and plan[1] < best[1] - 1e-12:
            best = plan
    return best


def group_pairs(
    cost: CostModel, world: int, lengths: Sequence[int], max_len: int
) -> Iterator[tuple[Strategy, Strategy]]:
    """(long, short): the cost model's device groups that split ``world`` ranks in two, the long
    sequences' group first; of the groups on the same ranks, those no other beats (``pareto``)."""
    places: dict[tuple[int | None, int], list[Strategy]] = {}
    for s in cost.strategies:
        if s.is_group:
            places.setdefault((s.first, s.world_size), []).append(s)
    ordered = sorted(set(lengths))
    groups = [
        s
        for members in places.values()
        for s in pareto(
            dataclasses.replace(cost, strategies={m: cost.strategies[m] for m in members}), ordered, max_len
        )
    ]
    for long in (s for s in groups if s.first == 0):
        for short in groups:
            if short.first == long.world_size and long.world_size + short.world_size == world:
                yield long, short


def side_by_side_plan(
    lengths: Sequence[int], cost: CostModel, instantiation: Strategy, max_len: int
) -> tuple[HotSwitchPlan, float] | None:
    """The fastest plan of two groups side by side among ``group_pairs``, with its predicted
    step; None where no pair holds the batch (the long group must hold ``max_len``, the short
    one its bound)."""
    ordered = sorted(lengths)
    best: tuple[float, HotSwitchPlan] | None = None
    for long, short in group_pairs(cost, instantiation.world_size, lengths, max_len):
        if not cost.fits(long, max_len):
            continue
        bound = balanced_bound(ordered, cost, long, short, max_len)
        if bound is None:
            continue
        plan = HotSwitchPlan.of([(long, bound), (short, 0)])
        predicted = cost.step_s(plan, lengths, instantiation)
        if best is None or predicted < best[0] - 1e-12:
            best = (predicted, plan)
    return None if best is None else (best[1], best[0])


def mixed_plan(
    lengths: Sequence[int], cost: CostModel, instantiation: Strategy, max_len: int, first: Bucket
) -> tuple[HotSwitchPlan, float] | None:
    """A mixture: the bucket ``first`` (a strategy over every device, e.g. the best sequential
    plan's longest bucket) trains the sequences above its bound, then two groups side by side
    (``side_by_side_plan``) the rest; with its predicted step. None where no pair holds the rest."""
    rest = [n for n in lengths if n <= first.above]
    if first.strategy.is_group or not rest:
        return None
    found = side_by_side_plan(rest, cost, instantiation, first.above)
    if found is None:
        return None
    groups = [(b.strategy, b.above) for b in found[0].buckets]
    plan = HotSwitchPlan.of([(first.strategy, first.above), *groups])
    return plan, cost.step_s(plan, lengths, instantiation)


def balanced_bound(ordered: list[int], cost: CostModel, long: Strategy, short: Strategy, max_len: int) -> int | None:
    """The bound (a length of the batch; longer sequences to ``long``) that makes the slower
    of the two groups fastest, each group with its gradient sync; both keep some sequences.
    None where ``short`` cannot hold even the shortest sequence."""
    capacity = cost.longest(short, max_len)
    bounds = sorted({n for n in ordered[:-1] if n <= capacity} | ({capacity} if capacity < ordered[-1] else set()))
    bounds = [b for b in bounds if ordered[0] <= b < ordered[-1]]
    if not bounds:
        return None

    def seconds(bound: int) -> tuple[float, float]:
        split = bisect.bisect_right(ordered, bound)
        return (
            cost.group_s(long, ordered[split:]) + cost.sync_s(long),
            cost.group_s(short, ordered[:split]) + cost.sync_s(short),
        )

    lo = 0  # the first bound at which the short group is the slower one
    hi = len(bounds) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        slow_long, slow_short = seconds(bounds[mid])
        lo, hi = (lo, mid) if slow_short >= slow_long else (mid + 1, hi)
    near = {bounds[i] for i in (lo - 1, lo) if 0 <= i < len(bounds)}
    return min(sorted(near), key=lambda b: max(seconds(b)))
