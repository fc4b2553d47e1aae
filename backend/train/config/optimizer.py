"""The optimizer and schedule section of a run configuration: AdamW and its learning-rate
schedule. Its defaults are the engine's own (``state.optim.OptimizerConfig``): one place."""

from __future__ import annotations

from dataclasses import dataclass

from hotswitch.backend.train.config.setting import choice, setting
from hotswitch.backend.train.state.optim import OptimizerConfig

SCHEDULES = ("constant", "cosine")


@dataclass(frozen=True)
class OptimizerSettings:
    """AdamW with gradient clipping; ``cosine`` warms up linearly over ``warmup_steps`` and decays
    to ``min_lr`` by the last of the run's steps, ``constant`` holds ``lr`` after the warmup."""

    lr: float = setting(OptimizerConfig.lr, "peak learning rate")
    lr_schedule: str = setting(
        "constant", "cosine: linear warmup, then decay to --min-lr by the last step", choices=SCHEDULES
    )
    warmup_steps: int = setting(OptimizerConfig.warmup_steps, "linear warmup steps of the learning rate")
    min_lr: float = setting(OptimizerConfig.min_lr, "the cosine schedule's final learning rate")
    weight_decay: float = setting(OptimizerConfig.weight_decay, "AdamW's weight decay")
    betas: tuple[float, float] = setting(OptimizerConfig.betas, "AdamW's two moment decays, each in [0, 1)", many=2)
    max_grad_norm: float = setting(OptimizerConfig.max_grad_norm, "clip gradients to this global norm")

    def check(self) -> OptimizerSettings:
        """This section checked: the schedule's name here, the values by the engine's own
        ``OptimizerConfig`` (one check for both)."""
        choice("lr_schedule", self.lr_schedule, SCHEDULES)
        self._adamw(None, self.betas)  # as given, so that a refusal shows the value written
        return self

    def adamw(self, steps: int) -> OptimizerConfig:
        """The engine's optimizer for a checked section and a run of ``steps`` steps."""
        cosine = self.lr_schedule == "cosine"
        return self._adamw(max(1, steps - self.warmup_steps) if cosine else None, tuple(self.betas))

    def _adamw(self, decay_steps: int | None, betas) -> OptimizerConfig:
        return OptimizerConfig(
            lr=self.lr,
            betas=betas,  # OptimizerConfig checks that it is a pair of fractions
            weight_decay=self.weight_decay,
            max_grad_norm=self.max_grad_norm,
            warmup_steps=self.warmup_steps,
            decay_steps=decay_steps,
            min_lr=self.min_lr,
        )
