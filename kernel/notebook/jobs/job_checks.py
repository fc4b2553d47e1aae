"""Requests to a running job checked in the kernel, before anything is sent to its ranks."""

from __future__ import annotations

import os
from pathlib import Path

from hotswitch.backend.train.config.paths import unwritable


def checkpoint_target(path: str | os.PathLike | None, notebook_dir: Path) -> str | None:
    """``path`` made absolute against the notebook's folder (the ranks run elsewhere, in a
    temporary job folder), after checking a checkpoint can be written there; None stays None
    (the trainer's default place, under the notebook's ``checkpoints/``)."""
    if path is None:
        return None
    if not isinstance(path, str | os.PathLike) or not str(path).strip():
        raise ValueError(f"checkpoint takes a folder path (a string), got {path!r}")
    target = (notebook_dir / Path(path).expanduser()).resolve()
    if target.exists():
        raise ValueError(f"checkpoint path {target} already exists; choose a new one (nothing is overwritten)")
    problem = unwritable(target.parent)
    if problem:
        fix = "choose a path under a folder" if "not a folder" in problem else "choose a folder you can write"
        raise ValueError(f"checkpoint path {path}: {problem}; {fix}")
    return str(target)


def checked_rank(rank, world_size: int) -> int:
    """``rank`` if it is one of the job's ranks 0..world_size-1."""
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank!r} is not one of this job's ranks; give 0..{world_size - 1}")
    return rank
