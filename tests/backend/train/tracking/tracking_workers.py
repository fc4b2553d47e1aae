"""Rank function for the tracking tests (importable by spawned processes)."""

import contextlib
import os

from hotswitch.backend.train.run.recipe import ENV_NOTEBOOK_DIR, run


def tracked_run(rank: int, world: int, spec: dict, folder: str):
    os.environ[ENV_NOTEBOOK_DIR] = folder
    os.environ["WANDB_SILENT"] = "true"
    events = []
    run(spec, events.append)
    return events if rank == 0 else None


def failed_then_tracked(rank: int, world: int, spec: dict, folder: str):
    """A run that raises at its second step, then another in the same process (a warm pool's
    rank runs one cell after another): the first is closed as failed, the second starts."""
    os.environ[ENV_NOTEBOOK_DIR] = folder

    def boom(event: dict) -> None:
        if event.get("type") == "step" and event["step"] == 2:
            raise RuntimeError("boom")

    with contextlib.suppress(RuntimeError):
        run(spec, boom)
    run(spec)
