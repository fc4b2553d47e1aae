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
            times.append(device_clock(device) - started)
        return slowest(min(times[1:]))

    large = exchange(nbytes // 4)
    small = exchange(1)
    source, target = torch.ones(nbytes // 4, device=device), torch.empty(nbytes // 4, device=device)
    target.copy_(source)
    started = device_clock(device)
    for _ in range(repeats):
        target.copy_(source)
    copy = slowest((device_clock(device) - started) / repeats)
    latency = max(small, 1e-6)
    return LinkProfile(nbytes / max(large - latency, 1e-9), latency, nbytes / max(copy, 1e-9))


def timed(run: Callable[[], object], device: torch.device, repeats: int = 2) -> float:
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
        total += device_clock(device) - started
    return slowest(total / repeats)


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


def measure_strategy(engine: Engine, strategy: Strategy, lengths: list[int]) -> dict:
    """Compute time of a micro-batch filled to the token budget at each length, and of a
    single sequence of the shortest length, which is almost all fixed cost: what every
    micro-batch pays whatever it holds (collectives' latency, launches). Seconds per
    sequence are the filled micro-batches' time without that overhead, over their rows.
    On CUDA also the bytes one sequence adds at its peak. Micro-batches are cut as the engine
    cuts them: padded rows, or with packing one row of documents (``as_run``). Returns {"seconds": per sequence
    at each length, "overhead": per micro-batch, "memory_bytes": per sequence at each
    length, or None off CUDA}."""
    state, device = engine.states[strategy], engine.device
    graph = state.graph
    assert graph is not None, f"{strategy} has no graph on rank {engine.rank}: device groups are not profiled"
    filled, rows, peak_bytes = [], [], []
    for length in lengths:
        tokens = filled_batch(engine, length)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
        filled.append(timed(partial(graph.run, [as_run(engine, tokens)], 0.0), device))
        if device.type == "cuda":
            peak_bytes.append(slowest(torch.cuda.max_memory_allocated(device) - before) / len(tokens))
        rows.append(len(tokens))
    shortest = filled_batch(engine, lengths[0])[:1]
    one = timed(partial(graph.run, [as_run(engine, shortest)], 0.0), device, repeats=5)
    state.grads.flat.zero_()
    overhead, seconds = per_sequence(one, filled, rows)
    return {"seconds": seconds, "overhead": overhead, "memory_bytes": peak_bytes or None}


def measure_pipeline_increment(engine: Engine, strategy: Strategy, length: int) -> float:
    """For a pipeline: the fraction of a micro-batch's latency that each further one adds,
    from 1 and from 2 * pp micro-batches of ``length`` run under the engine's schedule
    (between 1/pp, perfect overlap, and 1, none). 1 without a pipeline."""
    if strategy.pp == 1:
        return 1.0
    state, tokens, count = engine.states[strategy], filled_batch(engine, length), 2 * strategy.pp
    assert state.graph is not None, f"{strategy} has no graph on rank {engine.rank}: device groups are not profiled"
    run = partial(state.graph.run, scale=0.0, schedule=engine.schedule)
    one, many = (timed(partial(run, [(tokens, tokens)] * n), engine.device) for n in (1, count))
    state.grads.flat.zero_()
    return min(max((many / one - 1) / (count - 1), 1 / strategy.pp), 1.0)


def measure_sync(engine: Engine, strategy: Strategy) -> float:
    """Seconds to all-reduce the strategy's gradients over its replicas, dp x cp, as the engine
    reduces them (0 with one replica)."""
    state = engine.states[strategy]
    if strategy.replicas == 1:
        return 0.0
    group = engine.groups[strategy.replica_group(engine.rank)]
    elapsed = timed(lambda: dist.all_reduce(state.grads.flat, group=group), engine.device, repeats=1)
    state.grads.flat.zero_()
    return elapsed
