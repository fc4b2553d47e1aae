"""A checkpoint to resume from, its metadata read once: the run configuration's check reads it
(before any rank does work) and the trainer takes it as read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hotswitch.backend.models.config import ModelConfig


@dataclass(frozen=True)
class ResumePoint:
    """``path``: the checkpoint folder; ``meta``: its metadata, checked to hold the model."""

    path: Path
    meta: dict

    @classmethod
    def read(cls, path: str | Path, model: ModelConfig) -> ResumePoint:
        """Read ``path``'s metadata; CheckpointError naming the fix where it is not a checkpoint
        of ``model`` (no metadata, damaged, another architecture)."""
        from hotswitch.backend.train.state import checkpoint  # torch: only where a run resumes

        return cls(Path(path), checkpoint.read_meta(path, model))

    @property
    def step(self) -> int:
        """The steps the checkpointed run had taken."""
        return self.meta["step"]

    @property
    def data(self) -> dict:
        """The batch stream's state when it was written."""
        return self.meta["data"]
