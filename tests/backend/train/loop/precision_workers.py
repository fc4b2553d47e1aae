"""Rank functions for the mixed-precision tests (importable by spawned processes)."""

import torch

from hotswitch.backend import get_config
from hotswitch.backend.precision import Precision
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.loop.reference import ReferenceTrainer
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, execution_order, instantiation_strategy
from hotswitch.backend.train.state.optim import OptimizerConfig

from ..train_workers import BUDGET, MODEL, SEED, stream


def reference_losses(steps: int, precision: Precision) -> list[float]:
    trainer = ReferenceTrainer(get_config(MODEL), OptimizerConfig(), SEED, BUDGET, precision)
    batches = stream()
    return [trainer.step(batches.next_batch()) for _ in range(steps)]


def _run(rank: int, steps: int, spec, precision: Precision, packed: bool = False) -> dict:
    plan = HotSwitchPlan.of(spec)
    instantiation = instantiation_strategy(plan.strategies)
    run = engine_run(BUDGET, seed=SEED, packing=packed, **precision.as_settings())
    engine = Engine(get_config(MODEL), plan.strategies, instantiation, run)
    order = execution_order(plan.strategies, instantiation, lambda a, b: 0.0)
    batches, losses, switches = stream(), [], []
    for _ in range(steps):
        losses.append(engine.step(plan.assign(batches.next_batch()), order).loss)
        switches += engine.take_switch_stats()
    dtypes = {
        "master": str(engine.master.dtype),
        "compute": sorted({str(state.params.flat.dtype) for state in engine.states.values()}),
        "grads": sorted({str(state.grads.flat.dtype) for state in engine.states.values()}),
    }
    params = {k: v.to(torch.float32) for k, v in engine.master.global_params().items()}
    return {"losses": losses, "switches": switches, "dtypes": dtypes, "params": params if rank == 0 else None}


def precision_runs(rank: int, world: int, steps: int, runs: list[tuple]) -> dict:
    """Each (name, plan spec, precision[, packed]) trained from scratch (the one-device reference
    stays unpacked)."""
    return {name: _run(rank, steps, spec, precision, *packed) for name, spec, precision, *packed in runs}
