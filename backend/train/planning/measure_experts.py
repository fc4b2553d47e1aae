"""Measuring expert parallelism on the ranks (collective): how unevenly the router sends a
micro-batch's tokens to the ranks of an ep group, and what their all-to-all costs.

A profile's compute seconds (``measure.measure_stage``) already hold the all-to-all: it runs
inside the timed graph, at the routing the profile's tokens get. These measurements name that
part: the router's load on each ep rank is read off the layer's own inputs (a forward pre-hook
routing them again with ``models.experts.route``, untimed), and the exchange is replayed alone
with exactly those counts on the layer's own process group: per routed layer the counts, the
expert ids, the tokens out and the outputs back, and in backward the two gradients' exchanges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist

from hotswitch.backend.graph.exec_graph import ExecGraph
from hotswitch.backend.models.experts import route
from hotswitch.backend.parallel.expert_parallel import ExpertParallel
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.planning.dispatch import Stage
from hotswitch.backend.train.planning.measure import (
    as_run,
    each_rank,
    filled_batch,
    own_strategy,
    slowest_of,
    timed_each,
)

Sends = list[tuple[ExpertParallel, torch.Tensor, list[int]]]  # (layer, its input, rows to each ep rank)


def expert_layers(graph: ExecGraph) -> list[ExpertParallel]:
    """The graph's expert-parallel mixtures, in graph order (none without ep)."""
    return [m for m in graph.module.modules() if isinstance(m, ExpertParallel)]


@contextmanager
def seen_sends(layers: list[ExpertParallel]) -> Iterator[Sends]:
    """While open, each forward of ``layers`` appends (layer, its tokens, how many (token,
    expert) pairs this rank sends each rank of its ep group), routed as the layer routes them."""
    seen: Sends = []

    def hook(module: ExpertParallel, inputs: tuple) -> None:
        x, router = inputs[0].detach(), inputs[1].detach()
        bias = inputs[5].detach() if len(inputs) > 5 else None  # a router's choice bias
        tokens = x.reshape(-1, x.shape[-1])
        with torch.no_grad():
            picked, _ = route(tokens, router, module.gate, bias=bias)
        owners = torch.bincount(picked.reshape(-1) // module.held, minlength=len(module.ranks))
        seen.append((module, tokens, owners.tolist()))

    handles = [m.register_forward_pre_hook(hook) for m in layers]
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def first_forwards(seen: Sends) -> Sends:
    """Each layer's first forward only (a checkpointed layer's recompute routes the same again)."""
    out: dict[int, tuple] = {}
    for entry in seen:
        out.setdefault(id(entry[0]), entry)
    return list(out.values())


def imbalance(sends: Sends) -> float:
    """Over the routed layers, the busiest ep rank's load over the mean load (1 for an even
    split): the sum over layers of each one's largest load, over the sum of their mean loads,
    which is what the slowest rank of each exchange holds the others to (collective over each
    layer's ep group; 1.0 where this rank holds no such layer)."""
    busiest = mean = 0.0
    for module, _, send in sends:
        load = torch.tensor(send, dtype=torch.float64)
        dist.all_reduce(load, group=module.bound_group())  # pairs each rank receives from the group
        busiest += load.max().item()
        mean += load.mean().item()
    return busiest / mean if mean > 0 else 1.0


def replay(sends: Sends) -> Callable[[], None]:
    """The exchanges of ``sends``' layers alone, forward and backward, as ``ExpertParallel``
    runs them: the counts, the expert ids, the tokens out, the outputs back, then their gradients."""
    plans = []
    for module, tokens, send in sends:
        group = module.bound_group()
        counts = torch.tensor(send)
        receive = torch.empty_like(counts)
        dist.all_to_all_single(receive, counts, group=group)
        plans.append((group, tokens, counts, send, receive.tolist()))

    def run() -> None:
        for group, tokens, counts, send, receive in plans:
            dist.all_to_all_single(torch.empty_like(counts), counts, group=group)
            ids = torch.zeros(sum(send), dtype=torch.int64, device=tokens.device)
            _exchange(ids, send, receive, group)
            rows = tokens.new_empty((sum(send), tokens.shape[-1]))
            outputs = _exchange(rows, send, receive, group)  # tokens to their experts
            back = _exchange(outputs, receive, send, group)  # outputs back
            grad = _exchange(back, send, receive, group)  # backward: the outputs' gradient
            _exchange(grad, receive, send, group)  # and the tokens'

    return run


def _exchange(x: torch.Tensor, send: list[int], receive: list[int], group) -> torch.Tensor:
    out = x.new_empty((sum(receive), *x.shape[1:]))
    dist.all_to_all_single(out, x.contiguous(), receive, send, group=group)
    return out


def measure_experts(engine: Engine, stage: Stage, lengths: list[int]) -> dict[Strategy, dict]:
    """Per strategy of ``stage`` with ep > 1, at each length a micro-batch filled to the token
    budget (the one ``measure_stage`` timed): {"exchange_s": the seconds of its all-to-alls,
    every routed layer's, forward and backward, on the slowest rank; "imbalance": the busiest ep
    rank's load over the mean, the largest over the strategy's ep groups}. Strategies without
    ep are left out (an empty dict where none has it; collective all the same)."""
    if all(s.ep == 1 for s in stage):
        return {}
    mine = own_strategy(engine, stage)
    graph = engine.states[mine].graph if mine and mine.ep > 1 else None
    layers = expert_layers(graph) if graph else []
    exchange: list[dict[Strategy, float]] = []
    ratios: list[dict[Strategy, float]] = []
    for length in lengths:
        with seen_sends(layers) as seen:
            if graph:
                graph.run([as_run(engine, filled_batch(engine, length))], 0.0)
        sends = first_forwards(seen)
        ratios.append(slowest_of(stage, each_rank(imbalance(sends))))
        run = replay(sends) if sends else lambda: None
        exchange.append(slowest_of(stage, timed_each(run, engine.device)))
    if mine:
        engine.states[mine].grads.flat.zero_()
    return {
        s: {"exchange_s": [e[s] for e in exchange], "imbalance": [round(r[s], 4) for r in ratios]}
        for s in stage
        if s.ep > 1
    }
