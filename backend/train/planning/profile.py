"""Building the cost model on the ranks (collective): ``measure`` the engine's strategies, or
read the measurements back from the disk cache (rank 0 reads and writes it), then fit them.
A strategy that recomputes (``ckpt``, ``sel``) is timed on its own executable graph, so its
recompute is in its seconds (and on CUDA its recomputed values in its peak bytes); one with
expert parallelism has its all-to-all in its seconds too, and beside them, at each length, that
exchange's own seconds and the router's imbalance over its ep ranks (``measure_experts``:
``StrategyCost.experts``)."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from functools import partial

import torch
import torch.distributed as dist

from hotswitch.backend.cache import cache_dir
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.loop.events import Sink, discard, event
from hotswitch.backend.train.planning.cost import CostModel, ExpertExchange, LinkProfile, Quadratic, StrategyCost
from hotswitch.backend.train.planning.dispatch import Stage, SwitchKey
from hotswitch.backend.train.planning.measure import (
    measure_link,
    measure_pipeline_increment,
    measure_stage,
    measure_sync,
    timed,
)
from hotswitch.backend.train.planning.measure_experts import measure_experts
from hotswitch.backend.train.planning.memory import activation_bytes, model_state_bytes


def profile_lengths(max_len: int) -> list[int]:
    """A few lengths spanning 16 .. max_len, doubling."""
    out = []
    n = 16
    while n < max_len:
        out.append(n)
        n *= 2
    return [*out[-5:], max_len]


def _key(engine: Engine, strategies: list[Strategy], lengths: list[int], device: str) -> str:
    identity = {
        "profile": 12,  # expert parallelism's all-to-all and router imbalance (measure_experts);
        # each measurement's spread kept, a noisy one measured again; raw measurements
        # per length, micro-batch overhead, steady-state means; fused attention without cuDNN's
        # per-shape plans; the update with its norm and compute copy (in compiled runs one kernel);
        # on the CPU one warm-up per graph (measure.cold_shapes)
        "config": asdict(engine.config),
        "strategies": [str(s) for s in strategies],
        "world": engine.world,
        "device": device,
        "precision": str(engine.precision),
        "budget": engine.token_budget,
        "packed": engine.batching.packed,  # packed micro-batches are measured as the engine runs them
        "compiled": engine.compiled,  # runs of tensor math torch.compiled
        "attention": [engine.attention.label, engine.attention.documents],  # attention's kernels in force
        "lengths": lengths,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


def measuring_stages(strategies: list[Strategy]) -> list[Stage]:
    """The stages a profile measures: each strategy over every device alone, and device groups
    side by side in pairs, a group at rank 0 beside one on the ranks after it (each pair
    measured at once, as a step trains them: on shared cores they share them as in training)."""
    whole = [(s,) for s in strategies if not s.is_group]
    groups = [s for s in strategies if s.is_group]
    stages: list[Stage] = []
    for size in sorted({s.world_size for s in groups if s.first == 0}):
        firsts = [s for s in groups if s.first == 0 and s.world_size == size]
        beside = [s for s in groups if s.first == size]
        stages += [tuple(s for s in pair if s) for pair in itertools.zip_longest(firsts, beside)]
    measured = {s for stage in stages for s in stage}
    return whole + stages + [(s,) for s in groups if s not in measured]


def _measure(engine: Engine, strategies: list[Strategy], lengths: list[int], report: Sink) -> dict:
    link = measure_link(engine.device)
    per_strategy: dict[str, dict] = {}
    stages = measuring_stages(strategies)
    for index, stage in enumerate(stages, 1):
        measuring = " + ".join(map(str, stage))
        report(event("profile", measuring=measuring, index=index, of=len(stages), lengths=lengths))
        with engine.holding(*stage):
            routed_weights(engine, stage)
            compute = measure_stage(engine, stage, lengths)
            experts = measure_experts(engine, stage, lengths)
            sync = measure_sync(engine, stage)
            increment = measure_pipeline_increment(engine, stage, lengths[len(lengths) // 2])
        for s in stage:
            per_strategy[str(s)] = {**compute[s], **experts.get(s, {}), "sync_s": sync[s], "increment": increment[s]}
    update_s = update_seconds(engine)
    return {
        "link": [link.bandwidth, link.latency, link.copy_bandwidth],
        "strategies": per_strategy,
        "update_s": update_s,
    }


def routed_weights(engine: Engine, stage: Stage) -> None:
    """A mixture of experts' time depends on its weights' values (the router picks which experts
    run, and with ep which ranks the tokens travel to): its stage's strategies get the model's own
    parameters, switched in from the instantiation strategy, so that a profile times the routing
    the run starts with, not that of a freshly allocated buffer's undefined values (with which
    every token went to the same experts). A dense model's time depends on shapes alone: nothing
    to do (collective)."""
    if engine.config.experts is None:
        return
    for s in stage:
        if s != engine.instantiation:
            engine.run_switch("params", engine.instantiation, s)


def update_seconds(engine: Engine) -> float:
    """A step's update timed on copies of the master's state (collective: the norm is global):
    the one compiled kernel where the master fuses it, else AdamW and what goes around it."""
    master = engine.master
    if master.fused is not None:
        fused = master.fused.scratch()  # its warm-up compiles the kernel (the run's) and makes the moments
        return timed(lambda: fused.step(1, master.norm_tensor()), engine.device, repeats=1)
    scratch = [torch.nn.Parameter(p.detach().clone()) for p in master.params.values()]  # this rank's part
    for p in scratch:
        p.grad = torch.zeros_like(p)
    optimizer = engine.optim.adamw(scratch)
    optimizer.step()  # first step allocates the moments
    return timed(optimizer.step, engine.device, repeats=1) + timed(partial(_around_update, engine), engine.device)


def _around_update(engine: Engine) -> None:
    """What a step's update costs beyond AdamW, run on the engine's own state without changing
    it: the gradients' global norm, the clip (by 1), the compute copy refreshed from the master
    weights (on an H200 these took 12 of the update's 21 ms for 1b)."""
    master = engine.master
    master.grad_norm()
    master.grads.flat.mul_(1.0)
    master.refresh()


def profile(
    engine: Engine,
    strategies: list[Strategy],
    lengths: list[int],
    budget: float,
    use_cache: bool = True,
    report: Sink = discard,
) -> CostModel:
    """Measure (or read back) compute, sync, update and link profiles and assemble the model;
    ``report`` hears a ``profile`` event as each stage of strategies is measured."""
    path = cache_dir("profiles") / f"{_key(engine, strategies, lengths, engine.device.type)}.json"
    box = [json.loads(path.read_text()) if use_cache and engine.rank == 0 and path.is_file() else None]
    dist.broadcast_object_list(box, src=0)
    measured = box[0]
    if measured is None:
        measured = _measure(engine, strategies, lengths, report)
        if engine.rank == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(measured))
    link = LinkProfile(*measured["link"])
    costs = {}
    for s in strategies:
        m = measured["strategies"][str(s)]
        # memory measured on the GPU, estimated from the shapes elsewhere
        memory = m["memory_bytes"] or [activation_bytes(engine.config, s, n, engine.precision) for n in lengths]
        static = model_state_bytes(engine.config, s, engine.precision)
        time, memory = Quadratic.fit(lengths, m["seconds"]), Quadratic.fit(lengths, memory)
        exchange = ExpertExchange(tuple(lengths), tuple(m["exchange_s"]), tuple(m["imbalance"])) if s.ep > 1 else None
        costs[s] = StrategyCost(time, memory, static, m["sync_s"], m["increment"], m["overhead"], exchange)
    switches = LinkSwitches(engine, link, strategies)
    return CostModel(costs, budget, link, measured["update_s"], switches, engine.token_budget, engine.batching.packed)


class LinkSwitches(Mapping[SwitchKey, float]):
    """``CostModel.switch_s`` on the ranks: ("params" | "grads", src, dst) -> the engine's switch
    plan priced on the measured link, planned on first use (a search asks for a few of the
    pairs that device groups multiply; only the rank searching plans them)."""

    def __init__(self, engine: Engine, link: LinkProfile, strategies: list[Strategy]):
        self.engine = engine
        self.link = link
        self.strategies = list(dict.fromkeys(strategies))
        self.seconds: dict[SwitchKey, float] = {}

    def __getitem__(self, key: SwitchKey) -> float:
        what, a, b = key
        if what not in ("params", "grads") or a == b or a not in self.strategies or b not in self.strategies:
            raise KeyError(key)
        if key not in self.seconds:
            self.seconds[key] = self.link.switch_seconds(self.engine.switch_plan(what, a, b))  # type: ignore[arg-type]
        return self.seconds[key]

    def __iter__(self) -> Iterator[SwitchKey]:
        pairs = itertools.permutations(self.strategies, 2)
        return ((what, a, b) for a, b in pairs for what in ("params", "grads"))

    def __len__(self) -> int:
        return 2 * len(self.strategies) * (len(self.strategies) - 1)
