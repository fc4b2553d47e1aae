"""``WarmTrainer``: a ``Trainer`` kept on a warm pool's ranks across notebook cells.

``train(10, job)`` in one cell and, after ``set_lr(...)`` or ``switch(...)`` in another,
``train(10, job)`` again is one 20-step run with that schedule: the model, the optimizer state,
the schedule position (updates so far) and the data position stay in the trainer between cells,
and each cell only rewires the trainer's events and control to that cell's job.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch.distributed as dist

from hotswitch.backend.train.loop.events import discard
from hotswitch.backend.train.loop.trainer import Trainer


class WarmTrainer:
    """Wraps ``trainer``; every rank makes the same calls, in the same order (they are
    collective). ``switch`` and ``set_lr`` take effect at the next step boundary of every rank."""

    def __init__(self, trainer: Trainer):
        self.trainer = trainer
        self._commands: list[dict] = []  # switch commands for the next boundary (rank 0 sends them)

    @property
    def steps_done(self) -> int:
        return self.trainer.step_index

    def train(self, steps: int, job=None) -> dict:
        """Train ``steps`` more steps; events go to ``job.emit`` and its control (stop, switch,
        pause) is obeyed, as in a fresh ``%%train`` job. The job's events begin, as a fresh
        job's do, with the plan in force and the executable graphs. Returns the ``done`` event."""
        rank0 = dist.get_rank() == 0
        if not rank0:  # only rank 0's commands are read; the trainer broadcasts them
            self._commands.clear()
        self.trainer.sink = job.emit if job is not None and rank0 else discard
        if rank0:  # the trainer reported them when it was built, to no job or an earlier one
            self.trainer.announce()
        self.trainer.control = self._control(job) if rank0 else (lambda: [])
        self.trainer.stopping = False
        try:
            return self.trainer.train(self.trainer.step_index + steps)
        finally:
            self.trainer.sink, self.trainer.control = discard, (lambda: [])

    def switch(self, plan: str | Sequence) -> None:
        """Train under ``plan`` ("tp2", or buckets [["tp2", 128], ["dp2", 0]], or "auto") from
        the next step on."""
        self._commands.append({"command": "switch", "strategy": plan})

    def set_lr(self, lr: float, **schedule) -> None:
        """The peak learning rate (and any other ``OptimizerConfig`` field given) from the next
        update on; the schedule's position (updates so far) is kept."""
        engine = self.trainer.engine
        engine.optim = dataclasses.replace(engine.optim, lr=lr, **schedule)
        engine.master.optim = engine.optim

    @property
    def lr(self) -> float:
        """The learning rate of the next update."""
        engine = self.trainer.engine
        return engine.optim.lr_at(engine.master.updates + 1)

    def _control(self, job):
        def control() -> list[dict]:
            queued, self._commands = self._commands, []
            return queued + (job.control() if job is not None else [])

        return control

    def __repr__(self) -> str:
        return f"WarmTrainer(steps_done={self.steps_done}, plan={self.trainer.plan}, lr={self.lr:g})"
