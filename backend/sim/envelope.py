"""A smaller search for ``auto`` where the candidates are many (a mixture of experts on a large
cluster: every layout again with its experts split, with checkpointing and selective recompute,
some 80 to 120 of them, of which ``auto.pareto`` keeps some 50 because each holds a different
longest sequence; ``auto_plan`` then weighs every set of up to four of them: minutes per batch).

``lower_envelope`` keeps, of the candidates, each one that is the fastest at some length of the
batch among the candidates holding that length, in steady state (``CostModel.sequence_s``) or
for one sequence alone (a long document holding its replica back), under each of the memory
budgets the search will try; and the fastest layouts run statically. ``auto_plan`` then weighs
every set of those, as it would of the whole list. What it can miss: a plan whose buckets each
take a layout that is nowhere the fastest (a compromise saving a switch); the figures of a
search on the whole list beside this one are in ``benchmarks/moe_sim.py``'s output
(``envelope_check``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.cost import CostModel

SAMPLED = 64  # lengths of the batch at which the candidates are ranked (its quantiles, and its longest)


def sampled_lengths(lengths: Sequence[int], count: int = SAMPLED) -> list[int]:
    """``count`` quantiles of the batch's distinct lengths, its shortest and longest among them."""
    ordered = sorted(set(lengths))
    if len(ordered) <= count:
        return ordered
    return sorted({ordered[round(i * (len(ordered) - 1) / (count - 1))] for i in range(count)})


def fastest_at(cost: CostModel, candidates: Sequence[Strategy], lengths: Iterable[int]) -> set[Strategy]:
    """Each candidate that is, at one of ``lengths``, the fastest of those holding it: in steady
    state or for one sequence alone (device groups aside)."""
    whole = [s for s in candidates if not s.is_group]
    kept: set[Strategy] = set()
    for n in lengths:
        holding = [s for s in whole if cost.fits(s, n)]
        if not holding:
            continue
        kept.add(min(holding, key=lambda s: cost.sequence_s(s, n)))
        kept.add(min(holding, key=lambda s: cost.strategies[s].micro_batch_s(1, n)))
    return kept


def lower_envelope(
    costs: Sequence[CostModel], candidates: Sequence[Strategy], lengths: Sequence[int], statics: Sequence[Strategy]
) -> list[Strategy]:
    """The candidates ``fastest_at`` some sampled length of the batch under any of ``costs`` (one
    per memory budget), and ``statics``; in the candidates' order."""
    sample = sampled_lengths(lengths)
    kept = set(statics)
    for cost in costs:
        kept |= fastest_at(cost, candidates, sample)
    return [s for s in candidates if s in kept]
