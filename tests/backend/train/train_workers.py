"""Rank functions for the training tests (importable by spawned processes)."""

import dataclasses
import warnings

import torch

from hotswitch.backend import get_config
from hotswitch.backend.data import BatchStream, stdlib_documents
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.loop.reference import ReferenceTrainer
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, execution_order, instantiation_strategy
from hotswitch.backend.train.state.optim import OptimizerConfig

MODEL, SEED, BATCH, MAX_LEN, BUDGET = "tiny", 0, 8, 256, 1024


def stream():
    return BatchStream(stdlib_documents(), BATCH, MAX_LEN, seed=SEED)


def reference_runs(steps: int, short: int):
    """One one-device run: (losses, parameters) after ``short`` steps and after ``steps``."""
    trainer = ReferenceTrainer(get_config(MODEL), OptimizerConfig(), SEED, BUDGET)
    batches = stream()
    losses, noted = [], []
    for step in range(1, steps + 1):
        losses.append(trainer.step(batches.next_batch()))
        if step in (short, steps):
            noted.append((list(losses), {n: p.detach().clone() for n, p in trainer.model.named_parameters()}))
    return noted[0], noted[-1]


def hot_switch_run(rank: int, world: int, steps: int, spec, schedule: str = "1f1b"):
    plan = HotSwitchPlan.of(spec)
    instantiation = instantiation_strategy(plan.strategies)
    config = get_config(MODEL)
    engine = Engine(config, plan.strategies, instantiation, engine_run(BUDGET, seed=SEED, pipeline_schedule=schedule))
    order = execution_order(plan.strategies, instantiation, lambda a, b: 0.0)
    batches = stream()
    losses, used = [], set()
    for _ in range(steps):
        groups = plan.assign(batches.next_batch())
        used |= {str(s) for s, seqs in groups.items() if seqs}
        losses.append(engine.step(groups, order).loss)
    params = engine.master.global_params()
    allocated = sorted(str(s) for s, state in engine.states.items() if state.params.allocated or state.grads.allocated)
    return losses, (params if rank == 0 else None), sorted(used), [str(s) for s in order], allocated


def static_runs(rank: int, world: int, steps: int, runs: list[tuple[str, str]]):
    """(strategy, schedule) after (strategy, schedule), each trained from scratch."""
    return {f"{spec}/{schedule}": hot_switch_run(rank, world, steps, spec, schedule)[:2] for spec, schedule in runs}


def _trainer(spec, control=None, resume_from=None, sink=None):
    from hotswitch.backend.train.loop.trainer import Trainer

    run = {"plan": spec, "seed": SEED, "token_budget": BUDGET, "resume_from": resume_from}
    return Trainer(get_config(MODEL), stream(), run, sink=sink or (lambda e: None), control=control)


def controlled_run(rank: int, world: int, steps: int, spec, switch_at: int, new_spec):
    """Train with ``spec``; a control command switches to ``new_spec`` before step ``switch_at + 1``."""
    calls = []
    events = []

    def control():
        calls.append(1)
        return [{"command": "switch", "strategy": new_spec}] if len(calls) == switch_at + 1 else []

    trainer = _trainer(spec, control, sink=events.append)
    trainer.train(steps)
    params = trainer.engine.master.global_params()
    losses = [e["loss"] for e in events if e["type"] == "step"]
    plans = [e["buckets"] for e in events if e["type"] == "plan"]
    return losses, (params if rank == 0 else None), plans, [e["type"] for e in events]


def checkpointed_run(rank: int, world: int, steps: int, spec, path: str):
    events = []
    trainer = _trainer(spec, sink=events.append)
    trainer.train(steps)
    trainer.save(path)
    return [e["loss"] for e in events if e["type"] == "step"]


def resumed_run(rank: int, world: int, steps: int, spec, path: str):
    events = []
    trainer = _trainer(spec, resume_from=path, sink=events.append)
    first = trainer.step_index
    trainer.train(steps)
    params = trainer.engine.master.global_params()
    return first, [e["loss"] for e in events if e["type"] == "step"], (params if rank == 0 else None)


def resume_error(rank: int, world: int, spec, path: str) -> str:
    """The error resuming from ``path`` raises on this rank, as ``Type: message``."""
    try:
        _trainer(spec, resume_from=path)
    except BaseException as error:
        return f"{type(error).__name__}: {error}"
    return "resumed"


def save_twice(rank: int, world: int, path: str):
    trainer = _trainer("dp2")
    trainer.save(path)
    try:
        trainer.save(path)
    except ValueError as error:
        return str(error)
    return "saved twice"


# grouped-query 3:1 with 6 layers: a shape the other tests do not use
GQA31 = get_config(MODEL).with_(name="gqa31", dim=96, n_layers=6, n_heads=12, n_kv_heads=4, ffn_dim=256)


def reference_gradients(steps: int):
    """One device on GQA31: per step, the accumulated gradients before clipping, their norm and
    the step's loss."""
    trainer = ReferenceTrainer(GQA31, OptimizerConfig(), SEED, BUDGET)
    batches, grads, norms, losses = stream(), [], [], []

    def record(model):
        grads.append({n: p.grad.detach().clone() for n, p in model.named_parameters()})

    for _ in range(steps):
        losses.append(trainer.step(batches.next_batch(), before_update=record))
        norms.append(trainer.grad_norm)
    return grads, norms, losses


def gradient_runs(rank: int, world: int, steps: int, runs: list[tuple], packed: bool = False, compiled: bool = False):
    """For each (plan spec, schedule[, steps]), trained from scratch on GQA31 for ``steps`` (or
    the run's own count): per step, the gradients gathered on the master layout before
    clipping, the norm the engine clipped by, the loss; and the strategies that trained some
    sequences. ``packed``: micro-batches of documents back to back (the reference stays
    unpacked); ``compiled``: runs of tensor math torch.compiled (the reference stays eager)."""
    out = {}
    for spec, schedule, *own in runs:
        plan = HotSwitchPlan.of(spec)
        instantiation = instantiation_strategy(plan.strategies)
        run = engine_run(BUDGET, seed=SEED, pipeline_schedule=schedule, packing=packed, compile=compiled)
        engine = Engine(GQA31, plan.strategies, instantiation, run)
        order = execution_order(plan.strategies, instantiation, lambda a, b: 0.0)
        batches, grads, norms, losses, used = stream(), [], [], [], set()
        for _ in range(own[0] if own else steps):
            groups = plan.assign(batches.next_batch())
            used |= {str(s) for s, seqs in groups.items() if seqs}
            result = engine.step(groups, order, lambda m, keep=grads: keep.append(m.global_grads()))
            norms.append(result.grad_norm)
            losses.append(result.loss)
        out[f"{spec}/{schedule}"] = (grads, norms, losses, used) if rank == 0 else None
    if compiled:
        from hotswitch.backend.graph.compiled_regions import compiled_runs

        out["compiled_runs"] = compiled_runs()
    return out


def packed_auto_run(rank: int, world: int, steps: int):
    """``auto`` with packed micro-batches through the Trainer: profiled packed, planned by the
    packed cost model. Per step the loss, and the plans it chose."""
    from hotswitch.backend.train.loop.trainer import Trainer

    events: list[dict] = []
    run = {"plan": "auto", "seed": SEED, "token_budget": BUDGET, "packing": True}
    trainer = Trainer(get_config(MODEL), stream(), run, sink=events.append)
    trainer.train(steps)
    assert trainer.engine.batching.packed and trainer.cost is not None and trainer.cost.packed
    return [e["loss"] for e in events if e["type"] == "step"], [e["buckets"] for e in events if e["type"] == "plan"]


def step_times(rank: int, world: int, spec):
    """The time split of a second step of the plan ``spec`` on this rank (the first compiles
    nothing here, but warms every allocation): ``StepTimes`` as a dict, and under
    "first_switches" the statistics of each switch's first run (in the first step)."""
    plan = HotSwitchPlan.of(spec)
    instantiation = instantiation_strategy(plan.strategies)
    engine = Engine(get_config(MODEL), plan.strategies, instantiation, engine_run(BUDGET, seed=SEED))
    order = execution_order(plan.strategies, instantiation, lambda a, b: 0.0)
    batches = stream()
    engine.step(plan.assign(batches.next_batch()), order)
    first_switches = engine.take_switch_stats()
    times = engine.step(plan.assign(batches.next_batch()), order).times
    return {**dataclasses.asdict(times), "first_switches": first_switches}


def stops_before_the_update(rank: int, world: int, spec, compiled: bool):
    """The synchronising CUDA calls (PyTorch's sync debug mode, warning) that a second step of
    the plan ``spec`` on this rank's GPU makes before its update, each as its warning's text;
    the first step builds what a new shape needs (kernels' plans, compiled runs, the NCCL
    communicator)."""
    plan = HotSwitchPlan.of(spec)
    instantiation = instantiation_strategy(plan.strategies)
    run = engine_run(BUDGET, seed=SEED, device="cuda", precision="bf16", compile=compiled)
    engine = Engine(get_config(MODEL), plan.strategies, instantiation, run)
    order = execution_order(plan.strategies, instantiation, lambda a, b: 0.0)
    batches = stream()
    engine.step(plan.assign(batches.next_batch()), order)
    groups = plan.assign(batches.next_batch())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:  # the update reads the gradients' norm: the step's one stop
            engine.step(groups, order, before_update=lambda master: torch.cuda.set_sync_debug_mode(0))
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return [str(w.message) for w in caught if "synchroniz" in str(w.message).lower()]
