"""What a run reports beside its steps: the evaluation section (held-out loss) and the tracking
section (experiment trackers) of a run configuration."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hotswitch.backend.train.config.inputs import check_data, data_from_words
from hotswitch.backend.train.config.paths import resolve
from hotswitch.backend.train.config.setting import at_least_zero, bad_setting, setting, whole, whole_or_none
from hotswitch.backend.train.tracking.trackers import check_track


@dataclass(frozen=True)
class EvaluationSettings:
    """With ``eval_every`` set, the loss over ``eval_batches`` global batches of documents that
    never train is reported as an ``eval`` event every ``eval_every`` steps: the documents of
    ``eval_data`` (a validation split), else ``eval_fraction`` of the data's, held out."""

    eval_every: int | None = setting(None, "held-out loss every N steps (an eval event); default: none")
    eval_batches: int = setting(1, "global batches per evaluation")
    eval_fraction: float = setting(
        0.05, "the share of the documents held out of training for evaluation, where eval_data is unset"
    )
    eval_data: str | list[str] | None = setting(  # noqa: RUF009  (a field with metadata; its default is None)
        None,
        "documents to evaluate on (a validation split: files, folders or patterns, read as data is); "
        "default: eval_fraction of the data's, held out",
        many="+",
        parse=data_from_words,
    )

    def check(
        self, text_field: str = "text", prompt_field: str | None = None, chat_field: str | None = None
    ) -> EvaluationSettings:
        """This section checked; ``eval_data``'s files read for ``text_field`` (and ``prompt_field``)
        or ``chat_field``, made absolute."""
        whole("eval_batches", self.eval_batches, 1)
        whole_or_none("eval_every", self.eval_every)
        at_least_zero("eval_fraction", self.eval_fraction, below=1)
        if self.eval_data is not None:
            if self.eval_every is None:
                why = "it names documents to evaluate on, but eval_every is unset: set it, e.g. 100"
                raise bad_setting("eval_data", self.eval_data, why)
            checked = check_data(self.eval_data, text_field, "eval_data", prompt_field, chat_field)
            return replace(self, eval_data=checked)
        if self.eval_every is not None and not self.eval_fraction > 0:
            why = "evaluation needs held-out documents: give e.g. 0.05, or eval_data"
            raise bad_setting("eval_fraction", self.eval_fraction, why)
        return self


@dataclass(frozen=True)
class TrackingSettings:
    """Rank 0 writes loss, tokens/s, learning rate, eval loss, the time split and switches to
    each tracker (the ``tracking`` extra)."""

    track: tuple[str, ...] = setting((), "tensorboard:DIR, mlflow:URI or wandb; repeatable", many="append")
    run_name: str | None = setting(
        None,
        "the name trackers give the run; default: the job's (%%train --name), for hotswitch train the --config "
        "file's, else the model's, with the time it started",
    )

    def check(self) -> TrackingSettings:
        """This section checked, each tracker's folder made absolute."""
        if not isinstance(self.track, list | tuple):
            raise bad_setting("track", self.track, "give a list like ['tensorboard:runs/tb', 'mlflow:mlruns', 'wandb']")
        if self.run_name is not None and (not isinstance(self.run_name, str) or not self.run_name.strip()):
            raise bad_setting("run_name", self.run_name, "give a name (a non-empty string), or leave it out")
        try:
            return TrackingSettings(tuple(check_track(t, resolve) for t in self.track), self.run_name)
        except ValueError as error:
            raise bad_setting("track", self.track, str(error)) from None
