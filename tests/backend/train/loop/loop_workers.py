"""Rank functions for the training-loop tests (importable by spawned processes)."""

import os

from hotswitch.backend.train.loop.reference import ReferenceTrainer
from hotswitch.backend.train.run.recipe import (
    ENV_NOTEBOOK_DIR,
    batches,
    build,
    check_spec,
    evaluation,
    model_config,
    optimizer,
)
from hotswitch.backend.train.run.spec import run_config

PLAN = [["tp4", 128], ["dp2tp2", 48], ["dp4", 0]]


def loop_spec(**changes) -> dict:
    return {
        "steps": 6,
        "plan": PLAN,
        "max_len": 256,
        "batch_size": 8,
        "token_budget": 1024,
        "lr": 2e-3,
        "lr_schedule": "cosine",
        "warmup_steps": 2,
        "min_lr": 2e-4,
        "eval_every": 2,
        "eval_batches": 2,
        "eval_fraction": 0.02,
        **changes,
    }


def train_events(rank: int, world: int, spec: dict, folder: str):
    """Train ``spec`` as a notebook in ``folder`` would; rank 0's events and the gathered master
    weights."""
    os.environ[ENV_NOTEBOOK_DIR] = folder
    events = []
    trainer, s = build(spec, events.append)
    trainer.train(s["steps"])
    params = trainer.engine.master.global_params()
    return (events, params) if rank == 0 else None


def one_device(spec: dict):
    """One device on the same spec: each step's loss and lr, and the eval losses when due."""
    s = check_spec(spec)
    config = run_config(s).model.architecture()
    trainer = ReferenceTrainer(config, optimizer(s), s["seed"], s["token_budget"])
    stream, held_out = batches(s, config), evaluation(s, config)
    losses, rates, evals = [], [], {}
    for step in range(1, s["steps"] + 1):
        losses.append(trainer.step(stream.next_batch()))
        rates.append(trainer.optim.lr_at(trainer.updates))
        if held_out and held_out.due(step):
            summed = [trainer.evaluate(batch) for batch in held_out.batches]
            evals[step] = sum(loss for loss, _ in summed) / sum(count for _, count in summed)
    return losses, rates, evals


def evaluate_under(rank: int, world: int, strategies: list[str]):
    """The held-out loss sum and token count of one batch, forward only, with each strategy as
    the instantiation strategy (fresh weights)."""
    from hotswitch.backend.strategy import Strategy
    from hotswitch.backend.train.config.run_config import engine_run
    from hotswitch.backend.train.loop.engine import Engine

    batch = batches(check_spec(loop_spec()), model_config("tiny")).next_batch()
    out = {}
    for name in strategies:
        strategy = Strategy.parse(name)
        engine = Engine(model_config("tiny"), [strategy], strategy, engine_run(1024, seed=0))
        out[name] = engine.evaluate(batch)
    return out


def auto_run(rank: int, world: int, spec: dict, folder: str):
    """Train ``spec`` (plan "auto") in ``folder``: rank 0's events and the strategies auto profiled
    (measured: the profile cache is the folder's own)."""
    os.environ[ENV_NOTEBOOK_DIR] = folder
    os.environ["HOTSWITCH_CACHE"] = os.path.join(folder, "cache")
    events = []
    trainer, s = build(spec, events.append)
    trainer.train(s["steps"])
    return (events, [str(x) for x in trainer.cost.strategies]) if rank == 0 else None


def misled_run(rank: int, world: int, spec: dict, folder: str):
    """Train ``spec`` (plan "auto") with its measured cost model made to predict 5 s more per
    step (its update's), as a profile measured on a busy machine would: rank 0's events and the
    update's predicted seconds before and after the run."""
    import dataclasses

    os.environ[ENV_NOTEBOOK_DIR] = folder
    os.environ["HOTSWITCH_CACHE"] = os.path.join(folder, "cache")
    events = []
    trainer, s = build(spec, events.append)
    trainer.train(1)  # profiled (and cached)
    misled = dataclasses.replace(trainer.cost, update_s=trainer.cost.update_s + 5.0)
    trainer.use_cost(misled)
    before = misled.update_s
    trainer.train(s["steps"])
    return (events, before, trainer.cost.update_s) if rank == 0 else None


class RecordingJob:
    """What a ``WarmTrainer`` needs of a cell's job: it keeps what is emitted, sends no control."""

    def __init__(self):
        self.events: list[dict] = []

    def emit(self, event: dict) -> None:
        self.events.append(event)

    def control(self) -> list[dict]:
        return []


def warm_cells(rank: int, world: int):
    """Two cells on one ``WarmTrainer`` (a trainer kept on a warm pool): 2 steps under dp2, a
    switch to tp2, 2 more steps; each cell's job's events (rank 0)."""
    from hotswitch.backend.data import BatchStream, stdlib_documents
    from hotswitch.backend.train.loop.trainer import Trainer
    from hotswitch.backend.train.loop.warm import WarmTrainer

    data = BatchStream(stdlib_documents(), 4, 64, seed=0)
    run = {"plan": "dp2", "instantiation": "tp2", "token_budget": 1024}
    trainer = WarmTrainer(Trainer(model_config("tiny"), data, run))
    jobs = [RecordingJob(), RecordingJob()]
    trainer.train(2, jobs[0])
    trainer.switch("tp2")
    trainer.train(2, jobs[1])
    return [job.events for job in jobs] if rank == 0 else None


def trainer_settings(rank: int, world: int):
    """What a trainer reads from the run it is given, and its refusal of a plan given in its place."""
    from hotswitch.backend.data import BatchStream, stdlib_documents
    from hotswitch.backend.train.loop.trainer import Trainer

    def built(run):
        try:
            trainer = Trainer(model_config("tiny"), BatchStream(stdlib_documents(), 4, 64, seed=0), run)
        except TypeError as error:
            return str(error)
        engine = trainer.engine
        return str(trainer.plan), str(engine.instantiation), engine.token_budget, engine.optim.lr

    run = {"plan": "dp2", "instantiation": "tp2", "token_budget": 512, "lr": 3e-4}
    return [built(run), built({"plan": "dp2"}), built("dp2"), built([["tp2", 32], ["dp2", 0]])]
