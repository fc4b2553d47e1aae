"""Rank functions for the distributed-optimizer tests (importable by spawned processes)."""

import torch

from hotswitch.backend import get_config
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, execution_order, instantiation_strategy
from hotswitch.backend.train.planning.profile import update_seconds
from hotswitch.backend.train.state import checkpoint
from hotswitch.backend.train.state.master import Master

from ..train_workers import BUDGET, MODEL, SEED, stream


def _engine(spec, shard: bool, precision: str = "fp32", fused: bool = False) -> tuple[Engine, HotSwitchPlan, list]:
    """An engine of the plan ``spec``; ``fused``: its master's update the one compiled kernel of
    compiled runs (``Master(fused=True)``), its model's runs left eager (no compile to wait for)."""
    plan = HotSwitchPlan.of(spec)
    instantiation = instantiation_strategy(plan.strategies)
    run = engine_run(BUDGET, seed=SEED, precision=precision, shard_optimizer=shard)
    engine = Engine(get_config(MODEL), plan.strategies, instantiation, run)
    if fused:
        state, rank, replicas = engine.states[instantiation], engine.rank, engine.master_replicas
        engine.master = Master(state, engine.optim, SEED, rank, None, engine.precision, replicas, shard, fused=True)
    return engine, plan, execution_order(plan.strategies, instantiation, lambda a, b: 0.0)


def train(
    rank: int,
    world: int,
    steps: int,
    spec,
    shard: bool,
    save: str | None = None,
    resume: str | None = None,
    fused: bool = False,
):
    """``steps`` steps (after resuming from ``resume``, skipping its batches); then save to
    ``save``. The losses, the gathered parameters (rank 0), and the bytes this rank holds for
    the update, whether it is sharded. ``fused``: the master updates in one compiled kernel."""
    engine, plan, order = _engine(spec, shard, fused=fused)
    batches, first = stream(), 0
    if resume:
        first = checkpoint.read_meta(resume, engine.config)["step"]
        checkpoint.load(engine, resume)
        for _ in range(first):
            batches.next_batch()
    losses = [engine.step(plan.assign(batches.next_batch()), order).loss for _ in range(steps - first)]
    if save:
        checkpoint.save(engine, save, {"step": steps})
    params = engine.master.global_params()
    return losses, (params if rank == 0 else None), engine.master.optimizer_bytes(), engine.master.sharded


def update_bytes(rank: int, world: int, spec, shard: bool) -> tuple[int, int, bool]:
    """In bf16, after one update: the bytes this rank holds for it, the model's parameters, sharded?"""
    engine, plan, order = _engine(spec, shard, "bf16")
    engine.step(plan.assign(stream().next_batch()), order)
    return engine.master.optimizer_bytes(), engine.config.n_params, engine.master.sharded


def fused_beside_eager(rank: int, world: int, spec, precision: str, steps: int):
    """Two engines on the same batches, one updating eagerly and one with the one-kernel update
    (``Master(fused=True)``, a compiled run's): per step both losses and gradient norms, and how
    far apart the master weights are after it (the largest distance relative to the largest
    weight); whether the fused one's compute copy is its weights cast; sharded?; and a profile's
    timing of its update: the seconds, and whether the weights were left as they were."""
    eager, plan, order = _engine(spec, True, precision)
    fused, _, _ = _engine(spec, True, precision, fused=True)
    state = fused.states[fused.instantiation]
    batches, runs, distances = stream(), [], []
    for _ in range(steps):
        groups = plan.assign(batches.next_batch())
        runs.append([(r.loss, r.grad_norm) for r in (eager.step(groups, order), fused.step(groups, order))])
        a, b = eager.master.master_weights().flat, fused.master.master_weights().flat
        distances.append(((a - b).abs().max() / a.abs().max()).item())
    copied = torch.equal(state.params.flat, fused.master.master_weights().flat.to(state.params.flat.dtype))
    before = fused.master.master_weights().flat.clone()
    timed = update_seconds(fused)  # what a profile measures: the same kernel, on copies
    untouched = torch.equal(fused.master.master_weights().flat, before)
    return runs, distances, copied, fused.master.sharded, (timed, untouched)


def frozen_through_updates(rank: int, world: int, variants: list[tuple[str, bool, bool]]):
    """Per (precision, sharded, fused) variant, a sigmoid-routed tiny mixture whose routers'
    choice biases start at 0.5 (``layout.FROZEN``), trained two steps under dp2 with a weight
    decay that visibly shrinks every other weight: each frozen bias's master and compute
    values, and how far a router's weights moved (rank 0)."""
    from dataclasses import replace

    from hotswitch.backend.layout import is_frozen
    from hotswitch.backend.models.llama import init_param

    base = get_config("tiny-moe")
    assert base.experts is not None
    config = base.with_(experts=replace(base.experts, scoring="sigmoid", score_bias=True))

    def initial(name, shape, box):
        return (torch.full(shape, 0.5) if is_frozen(name) else init_param(name, shape, SEED))[box.slices()]

    out = {}
    for precision, shard, fused in variants:
        plan = HotSwitchPlan.of([("dp2", 0)])
        run = engine_run(BUDGET, seed=SEED, precision=precision, shard_optimizer=shard, weight_decay=0.5, lr=1e-2)
        engine = Engine(config, plan.strategies, plan.strategies[0], run, initial=initial)
        state = engine.states[engine.instantiation]
        if fused:
            replicas = engine.master_replicas
            engine.master = Master(state, engine.optim, SEED, rank, initial, engine.precision, replicas, shard, True)
        router = engine.master.global_params()["layers.0.feed_forward.router.weight"].clone()
        batches = stream()
        order = execution_order(plan.strategies, engine.instantiation, lambda a, b: 0.0)
        for _ in range(2):
            engine.step(plan.assign(batches.next_batch()), order)
        params = engine.master.global_params()
        frozen = {n: (params[n], state.params.views[n].float()) for n in params if is_frozen(n)}
        moved = (params["layers.0.feed_forward.router.weight"] - router).abs().max().item()
        out[(precision, shard, fused)] = (frozen, moved)
    return out if rank == 0 else None
