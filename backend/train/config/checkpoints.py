"""The checkpoints section of a run configuration: where the run resumes from, what it writes at
the end and every N steps, and a Hugging Face export."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.train.config.paths import resolve
from hotswitch.backend.train.config.setting import bad_setting, setting, whole_or_none
from hotswitch.backend.train.state.resume import ResumePoint


@dataclass(frozen=True)
class CheckpointSettings:
    """Relative paths resolve against the notebook's folder (``paths``); periodic checkpoints go
    to its ``checkpoints/step-N``."""

    final: str | None = setting(None, "save a checkpoint here at the end (a new folder)", key="checkpoint")
    checkpoint_every: int | None = setting(None, "checkpoint every N steps into ./checkpoints/step-N")
    keep_checkpoints: int | None = setting(None, "keep the newest K periodic checkpoints; default: all")
    resume_from: str | None = setting(None, "resume from this checkpoint folder (mid-schedule, exactly)")
    export_hf: str | None = setting(None, "write the trained model here as a Hugging Face checkpoint (a new folder)")

    def check(self) -> CheckpointSettings:
        """This section checked, its paths made absolute; the folders to write must not exist
        and ``resume_from`` must be a folder (its metadata is read by ``resume_point``)."""
        whole_or_none("checkpoint_every", self.checkpoint_every)
        whole_or_none("keep_checkpoints", self.keep_checkpoints)
        if self.keep_checkpoints is not None and self.checkpoint_every is None:
            why = "it keeps periodic checkpoints: set checkpoint_every too"
            raise bad_setting("keep_checkpoints", self.keep_checkpoints, why)
        final = _new_folder("checkpoint", self.final, "choose a new checkpoint path")
        export_hf = _new_folder("export_hf", self.export_hf, "choose a new folder to export into")
        resume_from = self.resume_from
        if resume_from is not None:
            if not isinstance(resume_from, str | os.PathLike):
                raise bad_setting("resume_from", resume_from, "give the folder of a checkpoint (a string) or None")
            path = resolve(resume_from)
            if not path.is_dir():
                raise bad_setting("resume_from", resume_from, f"{path} is not a folder; give a checkpoint folder")
            resume_from = str(path)
        return replace(self, final=final, export_hf=export_hf, resume_from=resume_from)

    def resume_point(self, model: ModelConfig) -> ResumePoint | None:
        """The checked section's checkpoint to resume from, its metadata read and checked to hold
        ``model``; None where the run starts fresh."""
        return None if self.resume_from is None else ResumePoint.read(self.resume_from, model)


def _new_folder(key: str, value, fix: str) -> str | None:
    """``value``, a folder to be written (or None), made absolute; it must not exist yet."""
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike):
        raise bad_setting(key, value, "give a folder path (a string) or None")
    path = resolve(value)
    if path.exists():
        raise bad_setting(key, value, f"{path} already exists; {fix}")
    return str(path)
