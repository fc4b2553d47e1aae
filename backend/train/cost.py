"""Predicting a step: time and memory per strategy over sequence length, and switch costs.

Compute time per sequence is measured on the device in use (forward + backward of the
strategy's executable graph on micro-batches filled with sequences of one length, at a
few lengths; through every stage of a pipeline) and fitted as a*L^2 + b*L + c. How much
a pipeline overlaps its micro-batches is measured too: each micro-batch after the first
adds a fraction of its latency, 1/pp on devices that work independently, up to 1 where
the stages share the same cores. Memory per sequence is measured on CUDA (peak allocated) and
estimated from the model's shapes on CPU, where the per-device budget is declared (so
that long sequences need tensor parallelism just as on GPUs). Gradient reduction and the
optimizer update are timed once; a switch costs what the planner predicts for the
measured link bandwidth and latency, plus the local copies at measured copy bandwidth.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
import torch.distributed as dist

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.switch.plan import SwitchPlan
from hotswitch.backend.train.batching import balance, pack


@dataclass(frozen=True)
class Quadratic:
    a: float
    b: float
    c: float

    def __call__(self, length: float) -> float:
        return self.a * length * length + self.b * length + self.c

    @classmethod
    def fit(cls, xs: list[float], ys: list[float]) -> Quadratic:
        """Least squares in relative error with non-negative coefficients (a cost never falls
        with length): every length counts alike, so a short sequence's cost is not lost in
        the long ones' (measurements span orders of magnitude). The best of every subset of
        terms whose own fit stays non-negative is the constrained optimum."""
        x, y = np.asarray(xs, float), np.asarray(ys, float)
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


def activation_bytes(config: ModelConfig, strategy: Strategy, length: int) -> float:
    """Activations one sequence keeps for backward on one device (fp32, attention scores
    materialised as on CPU). Per layer and token, ~(6*dim + 3*ffn) values inside attention
    and the FFN are split over tp; the ~4*dim of the norm and residual regions only with
    sequence parallelism; logits (twice) are vocab-split. Pipeline stages hold fewer
    layers but, under 1F1B, the first keeps up to ``pp`` micro-batches in flight: the
    worst case is no saving, which is what is counted."""
    split = config.n_layers * (6 * config.dim + 3 * config.ffn_dim + config.n_heads * length) + 2 * config.vocab_size
    regions = config.n_layers * 4 * config.dim
    return 4.0 * length * (split / strategy.tp + regions / (strategy.tp if strategy.sp else 1))


def model_state_bytes(config: ModelConfig, strategy: Strategy) -> float:
    """fp32 parameters and gradients of one strategy's shard (master and AdamW moments live
    on the instantiation strategy only and are counted there)."""
    return 8.0 * config.n_params / (strategy.tp * strategy.pp)


def budget_holding(config: ModelConfig, strategy: Strategy, length: int) -> float:
    """The per-device memory budget at which ``strategy`` just holds sequences of ``length``
    (benchmarks and the demo declare budgets this way on CPU)."""
    return model_state_bytes(config, strategy) + activation_bytes(config, strategy, length)


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


@dataclass
class StrategyCost:
    time: Quadratic  # seconds per sequence of length L in a micro-batch, on one replica
    memory: Quadratic  # bytes per device for one sequence of length L
    static_bytes: float  # model states per device
    sync_s: float  # reducing gradients over dp
    increment: float = 1.0  # of a micro-batch's latency, that each further one adds (pipelines overlap)
    overhead: float = 0.0  # seconds a micro-batch costs whatever it holds (collectives' latency, launches)

    def micro_batch_s(self, rows: int, length: int) -> float:
        return self.overhead + rows * self.time(length)


@dataclass
class CostModel:
    strategies: dict[Strategy, StrategyCost]
    budget: float  # bytes per device
    link: LinkProfile
    update_s: float
    switch_s: dict[tuple[str, Strategy, Strategy], float]  # ("params"|"grads", src, dst) -> seconds
    token_budget: int  # of a micro-batch, as the engine packs them

    def switch_cost(self, a: Strategy, b: Strategy) -> float:
        """Seconds to switch parameters and accumulated gradients from ``a`` to ``b``."""
        return self.switch_s.get(("params", a, b), 0.0) + self.switch_s.get(("grads", a, b), 0.0)

    def fits(self, strategy: Strategy, length: int) -> bool:
        cost = self.strategies[strategy]
        return cost.static_bytes + cost.memory(length) <= self.budget

    def max_rows(self, strategy: Strategy, length: int) -> int:
        """The most sequences of ``length`` one micro-batch holds, within the token budget and
        the memory budget (at least one: a sequence that fits at all travels alone)."""
        cost = self.strategies[strategy]
        by_memory = int((self.budget - cost.static_bytes) // max(cost.memory(length), 1.0))
        return max(1, min(self.token_budget // length, by_memory))

    def sequence_s(self, strategy: Strategy, length: int) -> float:
        """Steady-state seconds a sequence of ``length`` costs the whole cluster: its share of
        a full micro-batch, fixed overhead included, shared by the dp replicas working at once
        and shortened by a pipeline's overlap."""
        cost, rows = self.strategies[strategy], self.max_rows(strategy, length)
        return cost.micro_batch_s(rows, length) / rows * cost.increment / strategy.dp

    def packed(self, strategy: Strategy, seqs: list[Sequence]) -> list[list[Sequence]]:
        """``seqs`` (one replica's) in micro-batches, within the token and memory budgets."""
        return pack(seqs, self.token_budget, partial(self.max_rows, strategy))

    def longest(self, strategy: Strategy, limit: int) -> int:
        """The longest sequence (up to ``limit``) the strategy can hold."""
        lo, hi = 0, limit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.fits(strategy, mid) else (lo, mid - 1)
        return lo

    def group_s(self, strategy: Strategy, lengths: list[int]) -> float:
        """Seconds for a group as the engine runs it: sequences balanced over the dp replicas,
        each replica's packed into padded micro-batches (each paying the fixed overhead) as
        ``packed`` does; the slowest replica."""
        if not lengths:
            return 0.0
        cost = self.strategies[strategy]
        seqs = [Sequence(i, (0,) * (n + 1)) for i, n in enumerate(lengths)]
        latencies = [
            [cost.micro_batch_s(len(m), m[0].length) for m in self.packed(strategy, part)]
            for part in balance(seqs, strategy.dp, cost.time)
        ]
        return max(pipelined_s(replica, cost.increment) for replica in latencies)

    def static_step_s(self, strategy: Strategy, lengths: list[int]) -> float:
        """Predicted step time of static training with ``strategy`` (its own instantiation)."""
        return self.step_s({strategy: lengths}, [strategy], strategy)

    def step_s(
        self,
        groups: dict[Strategy, list[int]],
        order: list[Strategy],
        instantiation: Strategy,
        group_s: Callable[[Strategy, list[int]], float] | None = None,
    ) -> float:
        """Predicted step time: compute, gradient syncs, switches along the order, update.
        ``group_s`` stands in for ``self.group_s`` (a search caches it)."""
        group_s = group_s or self.group_s
        total, previous = self.update_s, None
        for strategy in order:
            lengths = groups.get(strategy, [])
            if not lengths and strategy != instantiation:
                continue
            if previous is not None:
                total += self.switch_s.get(("grads", previous, strategy), 0.0)
            if strategy != instantiation:
                total += self.switch_s.get(("params", previous or instantiation, strategy), 0.0)
            total += group_s(strategy, lengths) + (self.strategies[strategy].sync_s if strategy.dp > 1 else 0.0)
            previous = strategy
        if previous != instantiation:
            total += self.switch_s.get(("grads", previous, instantiation), 0.0)
        return total


# -- measuring on the ranks (collective) ---------------------------------------------------


def synchronize(device: torch.device) -> None:
    """Let the device finish queued work, so that a clock read after it counts that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def slowest(value: float) -> float:
    """The largest of every rank's ``value`` (the slowest rank's seconds, the peak bytes)."""
    box = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(box, op=dist.ReduceOp.MAX)
    return box.item()


def measure_link(device: torch.device, nbytes: int = 8 << 20, repeats: int = 3) -> LinkProfile:
    """Ring exchange between neighbour ranks: bandwidth from a large message, latency from a
    tiny one; copy bandwidth from a local copy of the same size (all on ``device``)."""
    rank, world = dist.get_rank(), dist.get_world_size()

    def exchange(numel: int) -> float:
        send, recv = torch.ones(numel, device=device), torch.empty(numel, device=device)
        ops = [dist.P2POp(dist.isend, send, (rank + 1) % world), dist.P2POp(dist.irecv, recv, (rank - 1) % world)]
        times = []
        for _ in range(repeats + 1):
            dist.barrier()
            started = time.perf_counter()
            for request in dist.batch_isend_irecv(ops) if world > 1 else []:
                request.wait()
            synchronize(device)
            times.append(time.perf_counter() - started)
        return slowest(min(times[1:]))

    large = exchange(nbytes // 4)
    small = exchange(1)
    source, target = torch.ones(nbytes // 4, device=device), torch.empty(nbytes // 4, device=device)
    target.copy_(source)
    synchronize(device)
    started = time.perf_counter()
    for _ in range(repeats):
        target.copy_(source)
    synchronize(device)
    copy = slowest((time.perf_counter() - started) / repeats)
    latency = max(small, 1e-6)
    return LinkProfile(nbytes / max(large - latency, 1e-9), latency, nbytes / max(copy, 1e-9))


def timed(run, device: torch.device, repeats: int = 2) -> float:
    """The slowest rank's mean time of ``run()`` over ``repeats`` runs after an unmeasured
    warm-up (collective), the device's queued work counted: what training meets in steady
    state, not the luckiest run (on shared cores the best of a few ran 5-13% fast)."""
    run()
    synchronize(device)
    total = 0.0
    for _ in range(repeats):
        dist.barrier()
        started = time.perf_counter()
        run()
        synchronize(device)
        total += time.perf_counter() - started
    return slowest(total / repeats)


def _filled_batch(engine, length: int) -> torch.Tensor:
    """A micro-batch of sequences of ``length`` filling the token budget, the same on every rank."""
    gen = torch.Generator().manual_seed(0)
    rows = max(1, engine.token_budget // length)
    return torch.randint(0, engine.config.vocab_size, (rows, length), generator=gen).to(engine.device)


def measure_strategy(engine, strategy: Strategy, lengths: list[int]) -> dict:
    """Compute time of a micro-batch filled to the token budget at each length, and of a
    single sequence of the shortest length, which is almost all fixed cost: what every
    micro-batch pays whatever it holds (collectives' latency, launches). Seconds per
    sequence are the filled micro-batches' time without that overhead, over their rows.
    On CUDA also the bytes one sequence adds at its peak. Returns {"seconds": per sequence
    at each length, "overhead": per micro-batch, "memory_bytes": per sequence at each
    length, or None off CUDA}."""
    state, device = engine.states[strategy], engine.device
    filled, rows, peak_bytes = [], [], []
    for length in lengths:
        tokens = _filled_batch(engine, length)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
        filled.append(timed(partial(state.graph.forward_backward, tokens, tokens, 0.0), device))
        if device.type == "cuda":
            peak_bytes.append(slowest(torch.cuda.max_memory_allocated(device) - before) / len(tokens))
        rows.append(len(tokens))
    shortest = _filled_batch(engine, lengths[0])[:1]
    one = timed(partial(state.graph.forward_backward, shortest, shortest, 0.0), device, repeats=5)
    state.grads.flat.zero_()
    # one = overhead + t, filled[0] = overhead + rows * t; never more than half of any micro-batch
    overhead = (one - filled[0] / rows[0]) * rows[0] / (rows[0] - 1) if rows[0] > 1 else 0.0
    overhead = min(max(overhead, 0.0), min(filled) / 2)
    seconds = [(f - overhead) / n for f, n in zip(filled, rows)]
    return {"seconds": seconds, "overhead": overhead, "memory_bytes": peak_bytes or None}


def measure_pipeline_increment(engine, strategy: Strategy, length: int) -> float:
    """For a pipeline: the fraction of a micro-batch's latency that each further one adds,
    from 1 and from 2 * pp micro-batches of ``length`` run under the engine's schedule
    (between 1/pp, perfect overlap, and 1, none). 1 without a pipeline."""
    if strategy.pp == 1:
        return 1.0
    state, tokens, count = engine.states[strategy], _filled_batch(engine, length), 2 * strategy.pp
    run = partial(state.graph.run, scale=0.0, schedule=engine.schedule)
    one, many = (timed(partial(run, [(tokens, tokens)] * n), engine.device) for n in (1, count))
    state.grads.flat.zero_()
    return min(max((many / one - 1) / (count - 1), 1 / strategy.pp), 1.0)


def measure_sync(engine, strategy: Strategy) -> float:
    state = engine.states[strategy]
    if strategy.dp == 1:
        return 0.0
    group = engine.groups[strategy.dp_group(engine.rank)]
    elapsed = timed(lambda: dist.all_reduce(state.grads.flat, group=group), engine.device, repeats=1)
    state.grads.flat.zero_()
    return elapsed
