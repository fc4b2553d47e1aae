"""The recipe's edge: a run described by a flat dict (the spec: ``{"model": "tiny", "steps":
20}``, the keys of ``config.run_config.KNOWN``), a ``RunConfig`` or a TOML file, checked before
anything starts. The settings, their defaults and their checks live in ``backend.train.config``,
one section per component; this module turns whatever describes a run into a checked one.

``check_run(spec)`` checks every setting and reads the resume checkpoint's metadata (the one read
of it: the trainer takes it as read); ``check_spec(spec)`` gives the same run as a flat dict, for
callers that read ``s["max_len"]``. A ``memory_budget`` at or below what the model states of a
fixed plan's strategy alone take is refused there ("auto" needs the world size: the command line
checks what it would instantiate). Relative ``data``, ``checkpoint``, ``export_hf`` and
``resume_from`` paths resolve against $HOTSWITCH_NOTEBOOK_DIR (the notebook's folder, set by the
launcher), else the working directory; checkpoint commands without a path write under its
``checkpoints/``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.precision import Precision
from hotswitch.backend.train.config.run_config import RunConfig
from hotswitch.backend.train.config.setting import bad_setting
from hotswitch.backend.train.state.resume import ResumePoint

DEFAULTS = RunConfig().as_spec()

Spec = RunConfig | dict | str | os.PathLike


@dataclass(frozen=True)
class CheckedRun:
    """A run configuration checked, with what checking it read: the model's architecture and
    the checkpoint to resume from (None: a fresh start)."""

    config: RunConfig
    model: ModelConfig
    resume: ResumePoint | None


def check_run(spec: Spec) -> CheckedRun:
    """``spec`` (a flat dict, a ``RunConfig`` or a ``.toml`` path) checked; ValueError naming
    the setting, its value and the fix. Checks nothing that needs the ranks."""
    config = RunConfig.of(spec).check()
    model = config.model.architecture()
    resume = config.checkpoints.resume_point(model)
    exporting = config.checkpoints.export_hf is not None  # steps == done: export it, training nothing
    if resume is not None and (config.steps < (done := resume.step) or (config.steps == done and not exporting)):
        why = f"{resume.path} has trained {done} steps already, and steps counts from the start"
        fix = f"give more than {done} to train on, or {done} with export_hf to export it as it is"
        raise bad_setting("steps", config.steps, f"{why}; {fix}")
    return CheckedRun(config, model, resume)


def check_spec(spec: Spec) -> dict:
    """The full spec (defaults filled in, paths absolute) after checking every setting, flat."""
    return check_run(spec).config.as_spec()


def run_config(spec: Spec) -> RunConfig:
    """``spec`` checked, as a typed ``RunConfig``."""
    return check_run(spec).config


def precision_of(s: RunConfig | dict) -> Precision:
    """The ``Precision`` a checked spec trains in."""
    return RunConfig.of(s).precision.precision()
