"""The cheapest bucket boundaries for chains of strategies over one batch (``auto``'s inner
search), by dynamic programming over the batch's sorted lengths.

Searches of one batch under several cost models (the simulator's ``auto`` searches once per
instantiation strategy) differ only in the memory each instantiation leaves the strategies.
``Shared`` carries their results across. A strategy is numbered by everything its buckets'
seconds depend on: its time per sequence, fixed cost and pipeline overlap, the token budget, the
longest sequence it holds, the search's candidate boundaries and, where memory limits one of its
micro-batches on this batch, its memory per sequence and free bytes. A chain of numbers then
means the same seconds in every search, which computes it once; a group's seconds are shared
likewise wherever memory does not limit that group.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections.abc import Sequence

from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.cost import CostModel

Best = tuple[float, tuple[int, ...]] | None  # least seconds and the buckets' lower bounds


class Shared:
    """What the searches of one batch share: strategy numbers, group seconds, chain results."""

    def __init__(self):
        self.numbers: dict[tuple, int] = {}
        self.owners: list[tuple[BoundarySearch, Strategy]] = []  # a number's first search and strategy
        self.groups: dict[tuple, float] = {}
        self.cheapest = functools.cache(self._cheapest)
        self.lower_buckets = functools.cache(self._lower_buckets)

    def number(self, signature: tuple, search: BoundarySearch, strategy: Strategy) -> int:
        if signature not in self.numbers:
            self.numbers[signature] = len(self.owners)
            self.owners.append((search, strategy))
        return self.numbers[signature]

    def _lower_buckets(self, number: int, upper: int) -> tuple[tuple[int, float], ...]:
        """Each pick ``above`` below ``upper`` (ascending) whose bucket (above, upper] the
        strategy holds with sequences in it, with that bucket's seconds: what every chain
        starting with the strategy tries, computed once for all of them."""
        search, strategy = self.owners[number]
        out = []
        for above in search.picks[: bisect.bisect_left(search.picks, upper)]:  # picks are sorted
            seconds = search.bucket_s(strategy, above, upper)
            if seconds is not None:
                out.append((above, seconds))
        return tuple(out)

    def _cheapest(self, chain: tuple[int, ...], upper: int) -> Best:
        """``BoundarySearch.cheapest`` of the chain of strategy numbers ``chain``."""
        head = chain[0]
        tail = chain[1:]
        if not tail:
            search, strategy = self.owners[head]
            seconds = search.bucket_s(strategy, 0, upper)
            return None if seconds is None else (seconds, (0,))
        best = None
        for above, seconds in self.lower_buckets(head, upper):
            rest = self.cheapest(tail, above)
            if rest and (best is None or seconds + rest[0] < best[0] - 1e-12):
                best = (seconds + rest[0], (above, *rest[1]))
        return best


class BoundarySearch:
    """The cheapest boundaries for chains of ``cost``'s strategies over one batch of ``lengths``,
    bucket bounds among ``picks``; ``shared`` between searches of the same batch."""

    def __init__(
        self,
        lengths: Sequence[int],
        cost: CostModel,
        longest: dict[Strategy, int],
        picks: list[int],
        shared: Shared | None = None,
    ):
        self.sorted_lengths = sorted(lengths)  # a bucket's sequences: a slice
        self.cost = cost
        self.longest = longest
        self.picks = picks
        self.shared = shared or Shared()
        self.bucket_s = functools.cache(self._bucket_s)
        self.key = functools.cache(self._key)
        self.limited = {s: self._limited(s) for s in longest}
        self.number = {s: self.shared.number(self._signature(s), self, s) for s in longest}

    def cheapest(self, chain: Sequence[Strategy], upper: int) -> Best:
        """The least compute for ``chain`` (longest sequences first) over lengths up to
        ``upper``, every bucket holding sequences, and its buckets' lower bounds."""
        return self.shared.cheapest(tuple(self.number[s] for s in chain), upper)

    def group_s(self, strategy: Strategy, lengths: Sequence[int]) -> float:
        """``CostModel.group_s``, cached."""
        lengths, at = tuple(lengths), self.limited[strategy][1]
        return self._seconds(strategy, lengths, any(at.get(n, True) for n in set(lengths)))

    def _signature(self, strategy: Strategy) -> tuple:
        limited = self.limited[strategy][0][-1] > 0
        return (*self.key(strategy, limited), tuple(self.picks), self.longest[strategy])

    def _key(self, strategy: Strategy, limited: bool) -> tuple:
        """What a group's seconds under ``strategy`` depend on beside its lengths: time per
        sequence, fixed cost, overlap, the token budget and, where memory limits one of its
        micro-batches, memory per sequence and the free bytes."""
        c = self.cost.strategies[strategy]
        cost = self.cost
        memory = (c.memory.a, c.memory.b, c.memory.c, cost.budget - c.static_bytes) if limited else None
        return (strategy, c.time.a, c.time.b, c.time.c, c.overhead, c.increment, cost.token_budget, memory)

    def _seconds(self, strategy: Strategy, lengths: tuple[int, ...], limited: bool) -> float:
        key = (*self.key(strategy, limited), lengths)
        groups = self.shared.groups
        if key not in groups:
            groups[key] = self.cost.group_s(strategy, list(lengths))
        return groups[key]

    def _limited(self, strategy: Strategy) -> tuple[list[int], dict[int, bool]]:
        """Where memory, not the token budget, limits a micro-batch of ``strategy``: per length
        of the batch, and as counts over the sorted lengths' prefixes."""
        cost = self.cost
        at = {}
        for n in set(self.sorted_lengths):
            at[n] = cost.max_rows(strategy, n) != max(1, cost.token_budget // n)
        return list(itertools.accumulate((at[n] for n in self.sorted_lengths), initial=0)), at

    def _bucket_s(self, strategy: Strategy, above: int, upper: int) -> float | None:
        """The seconds of the group of sequences in (above, upper], cached by its bounds; None
        where it holds none or the strategy cannot hold them all."""
        start = bisect.bisect_right(self.sorted_lengths, above)
        end = bisect.bisect_right(self.sorted_lengths, upper)
        if start == end or upper > self.longest[strategy]:
            return None
        prefix = self.limited[strategy][0]
        return self._seconds(strategy, tuple(self.sorted_lengths[start:end]), prefix[end] > prefix[start])
