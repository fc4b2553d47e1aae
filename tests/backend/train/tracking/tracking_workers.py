"""Rank function for the tracking tests (importable by spawned processes)."""

import os

from hotswitch.backend.train.run.recipe import ENV_NOTEBOOK_DIR, run


def tracked_run(rank: int, world: int, spec: dict, folder: str):
    os.environ[ENV_NOTEBOOK_DIR] = folder
    os.environ["WANDB_SILENT"] = "true"
    events = []
    run(spec, events.append)
    return events if rank == 0 else None
