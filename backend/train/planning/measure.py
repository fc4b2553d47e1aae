"""Measuring on the ranks (collective): what the cost model is fitted to.

Every function here runs on every rank at once and returns the slowest rank's figure.
Compute is timed on the engine's own executable graphs, so a profile measures exactly the
code that trains.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import torch
import torch.distributed as dist

from hotswitch.backend.models.documents import row_positions, unpacked_positions
from hotswitch.backend.runtime.devices import device_clock, synchronize
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.planning.cost import LinkProfile, per_sequence
from hotswitch.backend.train.planning.dispatch import Stage


def slowest(value: float) -> float:
    """The largest of every rank's ``value`` (the slowest rank's seconds, the peak bytes)."""
    box = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(box, op=dist.ReduceOp.MAX)
    return box.item()


def measure_link(device: torch.device, nbytes: int = 8 << 20, repeats: int = 3) -> LinkProfile:
    """Ring exchange between neighbour ranks: bandwidth from a large message, latency from a
    tiny one; copy bandwidth from a local copy of the same size (all on ``device``)."""
    rank = dist.get_rank()
    world = dist.get_world_size()

    def exchange(numel: int) -> float:
        send = torch.ones(numel, device=device)
        recv = torch.empty(numel, device=device)
        ops = [dist.P2POp(dist.isend, send, (rank + 1) % world), dist.P2POp(dist.irecv, recv, (rank - 1) % world)]
        times = []
        for _ in range(repeats + 1):
            dist.barrier()
            started = time.perf_counter()
            for request in dist.batch_isend_irecv(ops) if world > 1 else []:
                request.wait()
            times.append(device_clock(device) - started)
        return slowest(min(times[1:]))

    large = exchange(nbytes // 4)
    small = exchange(1)
    source = torch.ones(nbytes // 4, device=device)
    target = torch.empty(nbytes // 4, device=device)
    target.copy_(source)
    started = device_clock(device)
    for _ in range(repeats):
        target.copy_(source)
    copy = slowest((device_clock(device) - started) / repeats)
    latency = max(small, 1e-6)
    return LinkProfile(nbytes / max(large - latency, 1e-9), latency, nbytes / max(copy, 1e-9))


NOISY_SPREAD = 0.10  # runs of one measurement this far apart (of their mean): measured again
NOISY_TRIES = 2  # measurements of a noisy one (one again, with more runs), the least spread kept


def timed(run: Callable[[], object], device: torch.device, repeats: int = 2) -> float:
    """The slowest rank's mean time of ``run()`` over ``repeats`` runs after an unmeasured
    warm-up (collective), the device's queued work counted: what training meets in steady
    state, not the luckiest run (on shared cores the best of a few ran 5-13% fast)."""
    return max(timed_each(run, device, repeats))


def timed_each(run: Callable[[], object], device: torch.device, repeats: int = 2, warm: bool = True) -> list[float]:
    """Every rank's mean time of its own ``run()`` (collective; ``timed``'s runs): device
    groups side by side each time their own work at once, as a step trains them. ``warm``:
    run once unmeasured first (``cold_shapes`` says where a new shape needs it)."""
    return timed_spread(run, device, repeats, warm)[0]


def timed_spread(
    run: Callable[[], object], device: torch.device, repeats: int = 2, warm: bool = True
) -> tuple[list[float], float]:
    """``timed_each``'s means, and how far its runs spread: the largest over ranks of
    (slowest - fastest) / mean of a rank's runs, 0 for one run (collective)."""
    if warm:
        run()
    synchronize(device)
    times = []
    for _ in range(repeats):
        dist.barrier()
        started = time.perf_counter()
        run()
        times.append(device_clock(device) - started)
    mean = sum(times) / repeats
    spread = (max(times) - min(times)) / mean if mean > 0 else 0.0
    return each_rank(mean), max(each_rank(spread))


def steady(
    run: Callable[[], object], device: torch.device, warm: bool, tries: int = NOISY_TRIES
) -> tuple[list[float], float]:
    """``timed_spread`` of ``run``, measured again (more runs each time) while its runs spread
    past ``NOISY_SPREAD`` (a busy machine), up to ``tries`` times: the least spread of them,
    with its spread (collective: every rank sees the same spread, so all measure again alike)."""
    best = timed_spread(run, device, 2, warm)
    for attempt in range(1, tries):
        if best[1] <= NOISY_SPREAD:
            break
        again = timed_spread(run, device, 2 + 2 * attempt, warm=False)
        best = min(best, again, key=lambda m: m[1])
    return best


def cold_shapes(engine: Engine) -> bool:
    """Whether a graph's first run at a new shape pays more than its next: on CUDA (kernels
    chosen, attention plans built, the allocator growing) and wherever runs are compiled (a new
    shape may compile them again), not on a plain CPU engine, where only a graph's very first
    run does: a profile warms each graph once there, not once per length."""
    return engine.device.type == "cuda" or engine.compiled


def each_rank(value: float) -> list[float]:
    """Every rank's ``value``, in rank order (collective)."""
    box = torch.zeros(dist.get_world_size(), dtype=torch.float64)
    box[dist.get_rank()] = value
    dist.all_reduce(box)
    return box.tolist()


def slowest_of(stage: Stage, values: list[float]) -> dict[Strategy, float]:
    """Per strategy of ``stage``, the largest of its ranks' ``values``."""
    return {s: max(values[r] for r in s.ranks) for s in stage}


def own_strategy(engine: Engine, stage: Stage) -> Strategy | None:
    """The strategy of ``stage`` holding this rank (None: the stage leaves it idle)."""
    return next((s for s in stage if engine.rank in s.ranks), None)


def filled_batch(engine: Engine, length: int) -> torch.Tensor:
    """A micro-batch of sequences of ``length`` filling the token budget, the same on every rank."""
    gen = torch.Generator().manual_seed(0)
    rows = max(1, engine.token_budget // length)
    return torch.randint(0, engine.config.vocab_size, (rows, length), generator=gen).to(engine.device)


def as_run(engine: Engine, tokens: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``tokens`` [sequences, length] as the engine runs them: rows of one sequence each, or
    with packing one row of the sequences back to back (positions restarting at each)."""
    if not engine.batching.packed:
        return tokens, tokens, unpacked_positions(*tokens.shape)
    sequences, length = tokens.shape
    return tokens.reshape(1, -1), tokens.reshape(1, -1), row_positions([length] * sequences)[None]


def measure_stage(engine: Engine, stage: Stage, lengths: list[int]) -> dict[Strategy, dict]:
    """Per strategy of ``stage`` (one over every device, or device groups on disjoint ranks,
    measured at once as a step trains them), the compute time of a micro-batch filled to the
    token budget at each length, and of a single sequence of the shortest length, which is
    almost all fixed cost: what every micro-batch pays whatever it holds (collectives' latency,
    launches). Seconds per sequence are the filled micro-batches' time without that overhead,
    over their rows. On CUDA also the bytes one sequence adds at its peak. Micro-batches are cut
    as the engine cuts them: padded rows, or with packing one row of documents (``as_run``).
    Each: {"seconds": per sequence at each length, "overhead": per micro-batch,
    "memory_bytes": per sequence at each length, or None off CUDA, "spread": how far each
    length's runs spread (``steady``: a noisy one is measured again)}."""
    device = engine.device
    mine = own_strategy(engine, stage)
    graph = engine.states[mine].graph if mine else None

    def run(tokens: torch.Tensor) -> Callable[[], object]:
        return partial(graph.run, [as_run(engine, tokens)], 0.0) if graph else lambda: None

    filled: list[list[float]] = []
    spreads: list[float] = []
    peak: list[list[float]] = []
    rows: list[int] = []
    cold = cold_shapes(engine)
    for length in lengths:
        tokens = filled_batch(engine, length)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
        means, spread = steady(run(tokens), device, warm=cold or not rows)
        filled.append(means)
        spreads.append(round(spread, 4))
        if device.type == "cuda":
            peak.append([b / len(tokens) for b in each_rank(torch.cuda.max_memory_allocated(device) - before)])
        rows.append(len(tokens))
    one = timed_each(run(filled_batch(engine, lengths[0])[:1]), device, repeats=5, warm=cold)
    if mine:
        engine.states[mine].grads.flat.zero_()
    alone = slowest_of(stage, one)
    full = [slowest_of(stage, f) for f in filled]
    peaks = [slowest_of(stage, b) for b in peak]
    out = {}
    for s in stage:
        overhead, seconds = per_sequence(alone[s], [f[s] for f in full], rows)
        out[s] = {"seconds": seconds, "overhead": overhead, "memory_bytes": [b[s] for b in peaks] or None}
        out[s]["spread"] = spreads  # each length's, once measured again where noisy (``steady``)
    return out


def measure_pipeline_increment(engine: Engine, stage: Stage, length: int) -> dict[Strategy, float]:
    """For a pipeline: the fraction of a micro-batch's latency that each further one adds,
    from 1 and from 2 * pp micro-batches of ``length`` run under the engine's schedule
    (between 1/pp, perfect overlap, and 1, none). 1 without a pipeline. Per strategy of ``stage``."""
    out = {s: 1.0 for s in stage}
    count = 2 * max(s.pp for s in stage)
    if count == 2:
        return out
    mine = own_strategy(engine, stage)
    tokens = filled_batch(engine, length)
    graph = engine.states[mine].graph if mine and mine.pp > 1 else None

    def run(n: int) -> Callable[[], object]:
        return partial(graph.run, [(tokens, tokens)] * n, 0.0, schedule=engine.schedule) if graph else lambda: None

    one = slowest_of(stage, timed_each(run(1), engine.device))
    many = slowest_of(stage, timed_each(run(count), engine.device, warm=cold_shapes(engine)))  # warmed by one
    if mine:
        engine.states[mine].grads.flat.zero_()
    for s in stage:
        if s.pp > 1:
            out[s] = min(max((many[s] / one[s] - 1) / (count - 1), 1 / s.pp), 1.0)
    return out


def measure_sync(engine: Engine, stage: Stage) -> dict[Strategy, float]:
    """Per strategy of ``stage``, seconds to all-reduce its gradients over its replicas, dp x
    cp, as the engine reduces them (0 with one replica)."""
    if all(s.replicas == 1 for s in stage):
        return {s: 0.0 for s in stage}
    mine = own_strategy(engine, stage)
    reduce: Callable[[], object] = lambda: None  # noqa: E731  (a rank whose group has one replica waits)
    if mine and mine.replicas > 1:
        state = engine.states[mine]
        group = engine.groups[mine.replica_group(engine.rank)]
        reduce = partial(dist.all_reduce, state.grads.flat, group=group)
    elapsed = slowest_of(stage, timed_each(reduce, engine.device, repeats=1))
    if mine:
        engine.states[mine].grads.flat.zero_()
    return {s: elapsed[s] if s.replicas > 1 else 0.0 for s in stage}
