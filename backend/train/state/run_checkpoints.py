"""Where a run's checkpoints go: on command, and every N steps keeping the newest K."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hotswitch.backend.train.config.checkpoints import CheckpointSettings


def unwritable(path: Path) -> str | None:
    """Why a checkpoint cannot be written at ``path``, or None."""
    if path.exists():
        return f"{path} already exists; choose a new checkpoint path"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{parent} is not writable; choose a checkpoint path in a folder you can write"
    return None


class CheckpointPolicy:
    """``directory/step-N`` every ``checkpoint_every`` steps of the checked checkpoints section
    (None: only when asked), keeping the newest ``keep_checkpoints`` of those periodic ones
    (None: all); the section checks both (``CheckpointSettings.check``: one place). Only
    checkpoints this policy wrote in this run are ever removed: one written on command, or by
    an earlier run, stays."""

    def __init__(self, directory: str | Path, settings: CheckpointSettings):
        self.directory = Path(directory)
        self.every = settings.checkpoint_every
        self.keep = settings.keep_checkpoints
        self.written: list[Path] = []

    def path_for(self, step: int) -> Path:
        return self.directory / f"step-{step}"

    def due(self, step: int) -> bool:
        return self.every is not None and step % self.every == 0

    def periodic_written(self, path: Path) -> list[Path]:
        """Record a periodic checkpoint; the older ones to delete now (rank 0 deletes them)."""
        self.written.append(path)
        if self.keep is None or len(self.written) <= self.keep:
            return []
        stale, self.written = self.written[: -self.keep], self.written[-self.keep :]
        return stale


def remove(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
