"""Rank functions for the training tests (importable by spawned processes)."""

from hotswitch.backend import get_config
from hotswitch.backend.data import BatchStream, stdlib_documents
from hotswitch.backend.train.dispatch import HotSwitchPlan, execution_order, instantiation_strategy
from hotswitch.backend.train.engine import Engine
from hotswitch.backend.train.reference import OptimizerConfig, ReferenceTrainer

MODEL, SEED, BATCH, MAX_LEN, BUDGET = "tiny", 0, 8, 256, 1024


def stream():
    return BatchStream(stdlib_documents(), BATCH, MAX_LEN, seed=SEED)


def reference_run(steps: int):
    trainer = ReferenceTrainer(get_config(MODEL), OptimizerConfig(), SEED, BUDGET)
    batches = stream()
    losses = [trainer.step(batches.next_batch()) for _ in range(steps)]
    return losses, {n: p.detach().clone() for n, p in trainer.model.named_parameters()}


def hot_switch_run(rank: int, world: int, steps: int, spec):
    plan = HotSwitchPlan.of(spec)
    instantiation = instantiation_strategy(plan.strategies)
    engine = Engine(get_config(MODEL), plan.strategies, instantiation, OptimizerConfig(), SEED, BUDGET)
    order = execution_order(plan.strategies, instantiation, lambda a, b: 0.0)
    batches = stream()
    losses, used = [], set()
    for _ in range(steps):
        groups = plan.assign(batches.next_batch())
        used |= {str(s) for s, seqs in groups.items() if seqs}
        losses.append(engine.step(groups, order)[0])
    params = engine.global_params()
    return losses, (params if rank == 0 else None), sorted(used), [str(s) for s in order]
