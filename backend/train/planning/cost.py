"""Predicting a step: time and memory per strategy over sequence length, and switch costs.

A pure model of plain values: ``measure`` times the ranks and ``profile`` assembles a
``CostModel`` from those measurements. Compute time per sequence is fitted as a*L^2 + b*L + c
from micro-batches filled with sequences of one length; every micro-batch also pays a fixed
overhead; a pipeline overlaps its micro-batches by a measured fraction. Expert parallelism's
all-to-all runs inside those timed micro-batches, so the fit holds it at the measured sizes and
at the routing the profile's tokens got (tokens, hence pairs sent, grow with L: the linear
term); ``ExpertExchange`` says how much of it the exchange was and how uneven. A switch costs what
the planner's plan takes on the measured link. ``CostModel.step_s`` is the one prediction of
a plan's step that the trainer, ``auto``, the widgets and the benchmarks use.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from hotswitch.backend.strategy import Strategy
from hotswitch.backend.switch.plan import SwitchPlan
from hotswitch.backend.train.planning.batching import MicroBatching
from hotswitch.backend.train.planning.dispatch import (
    HotSwitchPlan,
    Stage,
    SwitchKey,
    execution_order,
    instantiation_strategy,
    walk_stages,
)

GroupSeconds = Callable[[Strategy, list[int]], float]


class SizedSequence(NamedTuple):
    """A sequence as planning sees it: its index and length, no tokens (``MicroBatching`` reads
    only these; building tokens for every planned group would cost more than the plan)."""

    doc: int
    length: int


@dataclass(frozen=True)
class Quadratic:
    a: float
    b: float
    c: float

    def __call__(self, length: float) -> float:
        return self.a * length * length + self.b * length + self.c

    @classmethod
    def fit(cls, xs: Sequence[float], ys: Sequence[float]) -> Quadratic:
        """Least squares in relative error with non-negative coefficients (a cost never falls
        with length): every length counts alike, so a short sequence's cost is not lost in
        the long ones' (measurements span orders of magnitude). The best of every subset of
        terms whose own fit stays non-negative is the constrained optimum."""
        x = np.asarray(xs, float)
        y = np.asarray(ys, float)
        if not np.abs(y).max() > 0:
            return cls(0.0, 0.0, 0.0)
        weight = 1.0 / np.maximum(np.abs(y), np.abs(y).max() * 1e-6)
        best = None
        for size in (3, 2, 1):
            for columns in itertools.combinations((2, 1, 0), size):
                basis = np.stack([x**p for p in columns], axis=1)
                coef, *_ = np.linalg.lstsq(basis * weight[:, None], y * weight, rcond=None)
                if (coef < 0).any():
                    continue
                error = float((((basis @ coef - y) * weight) ** 2).sum())
                if best is None or error < best[0] - 1e-12:
                    best = (error, dict(zip(columns, coef, strict=True)))
        terms = best[1] if best else {0: float(y.mean())}
        return cls(float(terms.get(2, 0.0)), float(terms.get(1, 0.0)), float(terms.get(0, 0.0)))


def per_sequence(one: float, filled: list[float], rows: list[int]) -> tuple[float, list[float]]:
    """A profile's fixed cost per micro-batch and seconds per sequence at each length, from
    ``filled`` micro-batches (``rows`` sequences each, filling the token budget) and ``one``
    micro-batch of a single sequence of the shortest length: ``one`` = overhead + t and
    ``filled[0]`` = overhead + rows * t. The overhead never exceeds half of any micro-batch."""
    overhead = (one - filled[0] / rows[0]) * rows[0] / (rows[0] - 1) if rows[0] > 1 else 0.0
    overhead = min(max(overhead, 0.0), min(filled) / 2)
    return overhead, [(f - overhead) / n for f, n in zip(filled, rows, strict=True)]


def pipelined_s(latencies: list[float], increment: float) -> float:
    """Micro-batches through a pipeline (1F1B or GPipe), given each one's latency through
    all its stages: the longest passes whole, every other adds ``increment`` of its own
    (1/stages for balanced stages on independent devices: the fill and drain cost
    (stages - 1) / stages of the longest; 1 without a pipeline)."""
    if not latencies:
        return 0.0
    return max(latencies) + increment * (sum(latencies) - max(latencies))


@dataclass(frozen=True)
class LinkProfile:
    bandwidth: float  # bytes/s between two ranks
    latency: float  # seconds per message
    copy_bandwidth: float  # bytes/s of a local copy

    def switch_seconds(self, plan: SwitchPlan) -> float:
        """The busiest rank's time: its sends and receives on the link, its local copies."""
        worst = 0.0
        messages = [0] * plan.cluster.world_size
        local = [0] * plan.cluster.world_size
        for m in plan.messages:
            messages[m.sender] += 1
            messages[m.receiver] += 1
        for t in plan.transfers:
            if t.local:
                local[t.receiver] += t.box.numel * plan.itemsize
        for rank, traffic in enumerate(plan.traffic):
            wire = max(traffic.send, traffic.recv_intra + traffic.recv_inter) / self.bandwidth
            worst = max(worst, wire + messages[rank] * self.latency + local[rank] / self.copy_bandwidth)
        return worst


@dataclass(frozen=True)
class ExpertExchange:
    """What a profile measured of an expert-parallel strategy's all-to-all, at each of its
    ``lengths`` (a micro-batch filled to the token budget with sequences of that length):
    ``exchange_s``, the seconds of the micro-batch's all-to-alls alone (every routed layer,
    forward and backward, the slowest rank); ``imbalance``, the busiest ep rank's share of the
    routed tokens over the mean (1 for an even split). Both are already inside the strategy's
    fitted ``time``: this says how much of it the exchange is, at the routing the profile saw."""

    lengths: tuple[int, ...]
    exchange_s: tuple[float, ...]
    imbalance: tuple[float, ...]

    def share(self, cost: StrategyCost, token_budget: int) -> list[float]:
        """At each length, the exchange's share of the filled micro-batch's predicted seconds."""
        out = []
        for length, seconds in zip(self.lengths, self.exchange_s, strict=True):
            whole = cost.micro_batch_s(max(1, token_budget // length), length)
            out.append(seconds / whole if whole > 0 else 0.0)
        return out


@dataclass
class StrategyCost:
    time: Quadratic  # seconds per sequence of length L in a micro-batch, on one replica
    memory: Quadratic  # bytes per device for one sequence of length L
    static_bytes: float  # model states per device
    sync_s: float  # reducing gradients over dp
    increment: float = 1.0  # of a micro-batch's latency, that each further one adds (pipelines overlap)
    overhead: float = 0.0  # seconds a micro-batch costs whatever it holds (collectives' latency, launches)
    experts: ExpertExchange | None = None  # expert parallelism's measured all-to-all (None without ep)

    def micro_batch_s(self, rows: int, length: int) -> float:
        """A micro-batch of ``rows`` padded rows of ``length``."""
        return self.overhead + rows * self.time(length)

    def packed_s(self, lengths: Sequence[int]) -> float:
        """A packed micro-batch: each document costs what it costs alone (its tokens in the
        linear terms, its own length squared in attention's), no padding."""
        return self.overhead + sum(self.time(n) for n in lengths)


@dataclass
class CostModel:
    strategies: dict[Strategy, StrategyCost]
    budget: float  # bytes per device
    link: LinkProfile
    update_s: float
    switch_s: Mapping[tuple[str, Strategy, Strategy], float]  # ("params"|"grads", src, dst) -> seconds
    token_budget: int  # of a micro-batch, as the engine packs them
    packed: bool = False  # micro-batches of documents back to back (``batching.pack_documents``)

    def expert_exchanges(self) -> dict[str, dict]:
        """Per profiled expert-parallel strategy (by name), what its profile measured of the
        all-to-all, for a widget or a report: {"lengths", "exchange_s", "imbalance", "share"
        (the exchange's part of a filled micro-batch's predicted seconds)}, each per length."""
        out = {}
        for strategy, cost in self.strategies.items():
            if cost.experts is not None:
                e = cost.experts
                share = e.share(cost, self.token_budget)
                out[str(strategy)] = {
                    "lengths": list(e.lengths),
                    "exchange_s": list(e.exchange_s),
                    "imbalance": list(e.imbalance),
                    "share": share,
                }
        return out

    def switch_cost(self, a: Strategy, b: Strategy) -> float:
        """Seconds to switch parameters and accumulated gradients from ``a`` to ``b``."""
        return self.switch_s.get(("params", a, b), 0.0) + self.switch_s.get(("grads", a, b), 0.0)

    def fits(self, strategy: Strategy, length: int) -> bool:
        cost = self.strategies[strategy]
        return cost.static_bytes + cost.memory(length) <= self.budget

    def max_rows(self, strategy: Strategy, length: int) -> int:
        """The most sequences of ``length`` one micro-batch holds, within the token budget and
        the memory budget (at least one: a sequence that fits at all travels alone)."""
        cost = self.strategies.get(strategy)
        if cost is None:  # not profiled: the token budget alone
            return max(1, self.token_budget // length)
        by_memory = int((self.budget - cost.static_bytes) // max(cost.memory(length), 1.0))
        return max(1, min(self.token_budget // length, by_memory))

    def weight(self, strategy: Strategy, length: int) -> float:
        """What a sequence weighs when a group is dealt to dp replicas: its predicted seconds
        (its length where the strategy was not profiled)."""
        cost = self.strategies.get(strategy)
        return cost.time(length) if cost is not None else float(length)

    def micro_batching(self) -> MicroBatching:
        """The micro-batches this model predicts, for the engine to run: replicas balanced by
        predicted time, micro-batches within the token and memory budgets."""
        return MicroBatching(self.token_budget, self.weight, self.max_rows, self.packed, self.max_tokens)

    def max_tokens(self, strategy: Strategy) -> int:
        """The most tokens a packed micro-batch holds within the memory budget (a packed row
        keeps what one sequence of its tokens keeps: attention stores no L x L scores)."""
        if strategy not in self.strategies:
            return self.token_budget
        return max(1, self.longest(strategy, self.token_budget))

    def sequence_s(self, strategy: Strategy, length: int) -> float:
        """Steady-state seconds a sequence of ``length`` costs the whole cluster: its share of
        a full micro-batch, fixed overhead included, shared by the dp replicas working at once
        and shortened by a pipeline's overlap."""
        cost = self.strategies[strategy]
        if self.packed:  # its own time, and its tokens' share of a full micro-batch's overhead
            share = length / max(self.max_tokens(strategy), length)
            return (cost.time(length) + cost.overhead * share) * cost.increment / strategy.dp
        rows = self.max_rows(strategy, length)
        return cost.micro_batch_s(rows, length) / rows * cost.increment / strategy.dp

    def longest(self, strategy: Strategy, limit: int) -> int:
        """The longest sequence (up to ``limit``) the strategy can hold."""
        lo = 0
        hi = limit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.fits(strategy, mid) else (lo, mid - 1)
        return lo

    def group_s(self, strategy: Strategy, lengths: list[int]) -> float:
        """Seconds for a group as the engine runs it: split as ``micro_batching`` says (each
        micro-batch paying the fixed overhead, padded to its longest row, or packed); the slowest replica."""
        if not lengths:
            return 0.0
        cost = self.strategies[strategy]
        seqs = [SizedSequence(i, n) for i, n in enumerate(lengths)]
        latencies = [
            [
                cost.packed_s([s.length for s in m]) if self.packed else cost.micro_batch_s(len(m), m[0].length)
                for m in replica
            ]
            for replica in self.micro_batching().split(strategy, seqs)
        ]
        return max(pipelined_s(replica, cost.increment) for replica in latencies)

    def step_s(
        self,
        plan: HotSwitchPlan,
        lengths: Sequence[int],
        instantiation: Strategy | None = None,
        group_s: GroupSeconds | None = None,
    ) -> float:
        """Predicted seconds of one step of ``plan`` on a batch of ``lengths``, as the trainer
        runs it: each bucket's group in the execution order (device groups side by side as one
        stage), with ``instantiation`` (by default the plan's own, ``instantiation_strategy``)
        updating last. ``group_s`` stands in for ``self.group_s`` (a search caches it)."""
        instantiation = instantiation or instantiation_strategy(plan.strategies)
        order = execution_order(plan.strategies, instantiation, self.switch_cost)
        return self.ordered_step_s(plan.assign_lengths(lengths), order, instantiation, group_s)

    def static_step_s(self, strategy: Strategy, lengths: Sequence[int]) -> float:
        """Predicted step time of static training with ``strategy`` (its own instantiation)."""
        return self.step_s(HotSwitchPlan.of(strategy), lengths, strategy)

    def ordered_step_s(
        self,
        groups: dict[Strategy, list[int]],
        order: Sequence[Strategy | Stage],
        instantiation: Strategy,
        group_s: GroupSeconds | None = None,
    ) -> float:
        """The step of given groups in a given order: the switches into each stage, its
        slowest group's compute and gradient sync (groups side by side run at once), the
        gradients back to ``instantiation``, the update."""
        group_s = group_s or self.group_s
        stages, final = walk_stages(groups, order, instantiation)
        total = self.update_s + self.switches_s(final)
        for stage in stages:
            total += self.switches_s(stage.switches)
            total += max(group_s(s, groups.get(s, [])) + self.sync_s(s) for s in stage.ran)
        return total

    def switches_s(self, keys: Sequence[SwitchKey]) -> float:
        """Seconds of switches run one after another (each over every rank, as the engine runs them)."""
        return sum(self.switch_s.get(key, 0.0) for key in keys)

    def sync_s(self, strategy: Strategy) -> float:
        """Reducing a group's gradients over its replicas (none with one replica)."""
        return self.strategies[strategy].sync_s if strategy.replicas > 1 else 0.0
