"""``auto``: the strategies and bucket boundaries that minimise the predicted step time."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Sequence

from hotswitch.backend.layout import check_strategy
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.boundaries import BoundarySearch, Shared
from hotswitch.backend.train.planning.context import context_candidates, one_flavour
from hotswitch.backend.train.planning.cost import CostModel
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan
from hotswitch.backend.train.planning.memory import size_text


def candidate_strategies(config: ModelConfig, world: int, context_parallel: bool = False) -> list[Strategy]:
    """Every dp x tp x pp layout of ``world`` devices that the model allows (tensor-parallel
    ones also with sequence parallelism), most model-state splitting first; and pure data
    parallelism with activation checkpointing, which under a tight budget holds sequences that
    would otherwise need the model split (at the price of recomputing every block).
    ``context_parallel``: also the cp layouts of ``planning.context.context_candidates`` (ring
    attention, and Ulysses where the heads allow: the cost model chooses between them)."""
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
    out.append(Strategy(dp=world, ckpt=True))
    if context_parallel:
        out += context_candidates(config, world, fits=functools.partial(_allowed, config))
    return sorted(out, key=lambda s: (-s.tp * s.pp, -s.tp, s.sp, s.ckpt, s.cp, s.ulysses))


CONTEXT_PARALLEL_FROM = 4096  # tokens: below, a rank's chunks are too short for cp to pay for its ring


def auto_candidates(config: ModelConfig, world: int, max_len: int, context_parallel: bool | None) -> list[Strategy]:
    """The strategies a trainer's ``auto`` profiles and weighs: ``candidate_strategies``, with
    the cp layouts where ``context_parallel`` says so (None: where sequences reach
    ``CONTEXT_PARALLEL_FROM`` tokens; shorter ones would only lengthen the profile, since
    splitting a short sequence costs more in the ring's exchanges than it saves)."""
    if context_parallel is None:
        context_parallel = max_len >= CONTEXT_PARALLEL_FROM
    candidates = candidate_strategies(config, world, context_parallel)
    return [*candidates, *expert_parallel_candidates(config, candidates)]


def expert_parallel_candidates(config: ModelConfig, candidates: Sequence[Strategy]) -> list[Strategy]:
    """For a mixture of experts, each candidate with data-parallel replicas again with its experts
    split over as many of them as divide the expert count (the widest ep it can take): short
    sequences put many tokens through the experts per unit of attention, where splitting them
    pays; the cost model measures what each costs (the all-to-all included)."""
    if config.experts is None:
        return []
    out = []
    for s in candidates:
        ep = math.gcd(s.dp, config.experts.count)
        if ep > 1 and not s.is_group:
            out.append(dataclasses.replace(s, ep=ep))
    return out


def with_selective(strategies: Sequence[Strategy]) -> list[Strategy]:
    """``strategies`` and the selective-recompute (``sel``) variant of each that does not
    checkpoint: a variant is slower at every length than its plain layout, so ``pareto`` keeps it
    only where it holds longer sequences, i.e. where recomputing lets a bucket fit."""
    variants = [dataclasses.replace(s, sel=True) for s in strategies if not (s.ckpt or s.sel)]
    return list(dict.fromkeys([*strategies, *variants]))


def _allowed(config: ModelConfig, strategy: Strategy) -> bool:
    try:
        check_strategy(config, strategy)
    except ValueError:
        return False
    return True


def check_feasible(plan: HotSwitchPlan, cost: CostModel, max_len: int) -> None:
    """Raise, naming the bucket, if a strategy cannot hold the longest sequence sent to it."""
    unpriced = [str(s) for s in plan.strategies if s not in cost.strategies]
    if unpriced:
        raise ValueError(
            f"{unpriced} have no profile in this run's cost model, so their memory cannot be checked; choose among "
            f"the strategies it measured ({', '.join(map(str, cost.strategies))}), or start a run with this plan"
        )
    for bucket, upper in plan.reach(max_len):
        if upper > bucket.above and not cost.fits(bucket.strategy, upper):
            longest = cost.longest(bucket.strategy, upper)
            raise ValueError(
                f"{bucket.strategy} cannot hold sequences of {upper} tokens within {size_text(cost.budget)} "
                f"per device (at most {longest}); raise its lower bound to {longest} or use more tensor parallelism"
            )


def pareto(cost: CostModel, lengths: Sequence[int], max_len: int, latency_aware: bool = False) -> list[Strategy]:
    """The strategies no other one beats: another that is no slower at every length of
    the batch and holds sequences at least as long makes a strategy redundant (ties keep
    the first in the cost model's order). Speed is the whole cluster's, in steady state
    (``CostModel.sequence_s``): full micro-batches' fixed overhead counts, so a strategy whose
    memory holds few rows pays it more often. Steady state leaves out a pipeline's fill and
    drain, so a strategy never beats one with fewer pipeline stages; and how long one sequence
    keeps its replica busy (a long document holding the step back), which context parallelism
    shortens: none beats one with more cp unless it is no slower for one sequence alone either
    (a micro-batch of one, at every length). ``latency_aware``: that holds between any two
    strategies (tensor parallelism shortens a long document too), which keeps more of them.
    Of a layout's two cp flavours (ring, Ulysses) the cost model keeps one (``context.one_flavour``)."""
    names = list(cost.strategies)
    times = {s: [cost.sequence_s(s, n) for n in lengths] for s in names}
    longest = {s: cost.longest(s, max_len) for s in names}
    names = one_flavour(names, times, longest)
    context = latency_aware or any(s.cp > 1 for s in names)
    alone = {s: [cost.strategies[s].micro_batch_s(1, n) for n in lengths] for s in names} if context else {}

    def beats(a: Strategy, b: Strategy) -> bool:
        no_worse = a.pp <= b.pp and longest[a] >= longest[b]
        shorter_alone = (a.cp >= b.cp and not latency_aware) or all(x <= y for x, y in zip(alone[a], alone[b]))
        no_worse = no_worse and shorter_alone
        no_worse = no_worse and all(x <= y for x, y in zip(times[a], times[b]))
        better = longest[a] > longest[b] or any(x < y for x, y in zip(times[a], times[b]))
        return no_worse and (better or names.index(a) < names.index(b))

    return [b for b in names if longest[b] > 0 and not any(beats(a, b) for a in names if a != b)]  # holding none: out


def splitting(strategy: Strategy) -> tuple[int, int, bool]:
    """How much a strategy splits a sequence's work (cp splits a sequence as tp x pp split the
    model): ``auto`` gives longer buckets to strategies that split more."""
    return (strategy.tp * strategy.pp * strategy.cp, strategy.tp, strategy.sp)


def bucket_orders(subset: Sequence[Strategy]) -> list[tuple[Strategy, ...]]:
    """The chains (longest bucket first) ``auto`` weighs for ``subset`` (sorted by ``splitting``,
    least first): longer buckets to the strategies splitting more, and a layout with and without
    its experts split (dp4 and ep4; dp2tp2 and dp1ep2tp2) in either order: which of them takes the
    shorter sequences is the measurements' call (splitting the experts spares memory but sends
    every token to its experts and back)."""
    base = list(subset)
    siblings: dict[Strategy, list[int]] = {}
    for index, strategy in enumerate(base):
        siblings.setdefault(dataclasses.replace(strategy, ep=1), []).append(index)
    slots = [places for places in siblings.values() if len(places) > 1]
    out = []
    for arrangement in itertools.product(*(itertools.permutations(places) for places in slots)):
        order = list(base)
        for places, sources in zip(slots, arrangement, strict=True):
            for place, source in zip(places, sources, strict=True):
                order[place] = base[source]
        out.append(tuple(order[::-1]))
    return out


def auto_plan(
    lengths: Sequence[int],
    cost: CostModel,
    instantiation: Strategy,
    max_len: int,
    max_strategies: int = 4,
    splits: int = 12,
    latency_aware: bool = False,
    shared: Shared | None = None,
) -> tuple[HotSwitchPlan, float]:
    """Search sets of up to ``max_strategies`` strategies among the Pareto-optimal ones
    (less model-state splitting for shorter sequences; a layout with and without its experts
    split either way round, ``bucket_orders``) and bucket boundaries among length
    quantiles and the longest sequence each strategy holds; keep plans whose every bucket
    fits in memory up to its upper bound (``max_len`` for the longest); return the fastest
    with its predicted step time. ``shared``: what searches of the same batch under cost models
    that differ only in memory share (``planning.boundaries``)."""
    ordered = sorted(set(lengths))
    strategies = sorted(pareto(cost, ordered, max_len, latency_aware), key=splitting)
    longest = {s: cost.longest(s, max_len) for s in cost.strategies}
    quantiles = {ordered[int(i * (len(ordered) - 1) / splits)] for i in range(1, splits)}
    capacities = {longest[s] for s in strategies}  # a strategy taking every sequence it can hold
    picks = sorted(n for n in quantiles | capacities if ordered[0] <= n < ordered[-1])
    search = BoundarySearch(lengths, cost, longest, picks, shared)

    # with every bucket holding sequences, switches and syncs depend on the strategies alone:
    # the least compute per set of strategies makes the least step time. Every strategy alone
    # too: steady-state dominance may have pruned the best static one.
    singles = [(s,) for s in cost.strategies if s not in strategies]
    best: tuple[float, HotSwitchPlan] | None = None
    for count in range(1, max_strategies + 1):
        subsets = itertools.chain(itertools.combinations(strategies, count), singles if count == 1 else [])
        for chain in (chain for subset in subsets for chain in bucket_orders(subset)):
            found = search.cheapest(chain, max_len)
            if found is None or (best is not None and found[0] + cost.update_s >= best[0] - 1e-12):
                continue  # compute and the update alone already lose: no step of these can win
            plan = HotSwitchPlan.of(list(zip(chain, found[1], strict=True)))
            predicted = cost.step_s(plan, search.sorted_lengths, instantiation, search.group_s)
            if best is None or predicted < best[0] - 1e-12:
                best = (predicted, plan)
    if best is None:
        holds = {str(s): cost.longest(s, max_len) for s in strategies}
        raise ValueError(
            f"no strategy holds sequences of {max_len} tokens within {size_text(cost.budget)} per device "
            f"(longest each can hold: {holds}); shorten the sequences or raise the memory budget"
        )
    return best[1], best[0]
