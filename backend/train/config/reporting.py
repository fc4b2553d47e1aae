"""What a run reports beside its steps: the evaluation section (held-out loss) and the tracking
section (experiment trackers) of a run configuration."""

from __future__ import annotations

from dataclasses import dataclass

from hotswitch.backend.train.config.paths import resolve
from hotswitch.backend.train.config.setting import at_least_zero, bad_setting, setting, whole, whole_or_none
from hotswitch.backend.train.tracking.trackers import check_track


@dataclass(frozen=True)
class EvaluationSettings:
    """With ``eval_every`` set, ``eval_fraction`` of the documents never train; their loss over
    ``eval_batches`` global batches is reported as an ``eval`` event every ``eval_every`` steps."""

    eval_every: int | None = setting(None, "held-out loss every N steps (an eval event); default: none")
    eval_batches: int = setting(1, "global batches per evaluation")
    eval_fraction: float = setting(0.05, "the share of the documents held out of training for evaluation")

    def check(self) -> EvaluationSettings:
        whole("eval_batches", self.eval_batches, 1)
        whole_or_none("eval_every", self.eval_every)
        at_least_zero("eval_fraction", self.eval_fraction, below=1)
        if self.eval_every is not None and not self.eval_fraction > 0:
            why = "evaluation needs held-out documents: give e.g. 0.05"
            raise bad_setting("eval_fraction", self.eval_fraction, why)
        return self


@dataclass(frozen=True)
class TrackingSettings:
    """Rank 0 writes loss, tokens/s, learning rate, eval loss, the time split and switches to
    each tracker (the ``tracking`` extra)."""

    track: tuple[str, ...] = setting((), "tensorboard:DIR, mlflow:URI or wandb; repeatable", many="append")

    def check(self) -> TrackingSettings:
        """This section checked, each tracker's folder made absolute."""
        if not isinstance(self.track, list | tuple):
            raise bad_setting("track", self.track, "give a list like ['tensorboard:runs/tb', 'mlflow:mlruns', 'wandb']")
        try:
            return TrackingSettings(tuple(check_track(t, resolve) for t in self.track))
        except ValueError as error:
            raise bad_setting("track", self.track, str(error)) from None
