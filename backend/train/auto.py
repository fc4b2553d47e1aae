"""``auto``: the strategies and bucket boundaries that minimise the predicted step time."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hotswitch.backend.layout import check_strategy
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.cost import CostModel
from hotswitch.backend.train.dispatch import HotSwitchPlan, execution_order


def candidate_strategies(config: ModelConfig, world: int) -> list[Strategy]:
    """Every dp x tp x pp layout of ``world`` devices that the model allows (tensor-parallel
    ones also with sequence parallelism), most model-state splitting first."""
    out = []
    for tp in range(world, 0, -1):
        for pp in range(world // tp, 0, -1):
            if world % (tp * pp):
                continue
            for sp in (False, True) if tp > 1 else (False,):
                strategy = Strategy(dp=world // (tp * pp), tp=tp, pp=pp, sp=sp)
                try:
                    check_strategy(config, strategy)
                except ValueError:
                    continue
                out.append(strategy)
    return sorted(out, key=lambda s: (-s.tp * s.pp, -s.tp, s.sp))


def check_feasible(plan: HotSwitchPlan, cost: CostModel, max_len: int) -> None:
    """Raise, naming the bucket, if a strategy cannot hold the longest sequence sent to it."""
    upper = max_len
    for bucket in plan.buckets:
        if upper > bucket.above and not cost.fits(bucket.strategy, upper):
            longest = cost.longest(bucket.strategy, upper)
            raise ValueError(
                f"{bucket.strategy} cannot hold sequences of {upper} tokens within {cost.budget / 2**30:.2f} GiB "
                f"per device (at most {longest}); raise its lower bound to {longest} or use more tensor parallelism"
            )
        upper = bucket.above


def pareto(cost: CostModel, lengths: Sequence[int], max_len: int) -> list[Strategy]:
    """The strategies no other one beats: another that is no slower at every length of
    the batch and holds sequences at least as long makes a strategy redundant (ties keep
    the first in the cost model's order)."""
    names = list(cost.strategies)
    times = {s: [cost.strategies[s].time(n) for n in lengths] for s in names}
    longest = {s: cost.longest(s, max_len) for s in names}

    def beats(a: Strategy, b: Strategy) -> bool:
        no_worse = longest[a] >= longest[b] and all(x <= y for x, y in zip(times[a], times[b]))
        better = longest[a] > longest[b] or any(x < y for x, y in zip(times[a], times[b]))
        return no_worse and (better or names.index(a) < names.index(b))

    return [b for b in names if not any(beats(a, b) for a in names if a != b)]


def auto_plan(
    lengths: Sequence[int],
    cost: CostModel,
    instantiation: Strategy,
    max_len: int,
    max_strategies: int = 3,
    splits: int = 12,
) -> tuple[HotSwitchPlan, float]:
    """Search sets of up to ``max_strategies`` strategies among the Pareto-optimal ones
    (less model-state splitting for shorter sequences) and bucket boundaries among length
    quantiles; keep plans whose every bucket fits in
    memory up to its upper bound (``max_len`` for the longest); return the fastest with
    its predicted step time."""
    ordered = sorted(set(lengths))
    picks = sorted({ordered[int(i * (len(ordered) - 1) / splits)] for i in range(1, splits)} - {ordered[-1]})
    strategies = sorted(pareto(cost, ordered, max_len), key=lambda s: (s.tp * s.pp, s.tp, s.sp))
    best: tuple[float, HotSwitchPlan] | None = None
    for count in range(1, max_strategies + 1):
        for subset in itertools.combinations(strategies, count):
            for bounds in itertools.combinations(picks, count - 1):
                buckets = [(s, b) for s, b in zip(reversed(subset), (*reversed(bounds), 0), strict=True)]
                plan = HotSwitchPlan.of(buckets)
                try:
                    check_feasible(plan, cost, max_len)
                except ValueError:
                    continue
                groups: dict[Strategy, list[int]] = {s: [] for s in plan.strategies}
                for n in lengths:
                    groups[next(b.strategy for b in plan.buckets if n > b.above)].append(n)
                order = execution_order(plan.strategies, instantiation, cost.switch_cost)
                predicted = cost.step_s(groups, list(order), instantiation)
                if best is None or predicted < best[0] - 1e-12:
                    best = (predicted, plan)
    if best is None:
        holds = {str(s): cost.longest(s, max_len) for s in strategies}
        raise ValueError(
            f"no strategy holds sequences of {max_len} tokens within {cost.budget / 2**30:.2f} GiB per device "
            f"(longest each can hold: {holds}); shorten the sequences or raise the memory budget"
        )
    return best[1], best[0]
