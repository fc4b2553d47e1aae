"""Rank functions for the hf tests (importable by spawned processes)."""

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models.hf import HFCheckpoint, config_from_hf, hf_initializer
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine


class RecordingCheckpoint(HFCheckpoint):
    """An ``HFCheckpoint`` that records every read: (name, box), box None for a whole tensor."""

    def __init__(self, directory):
        super().__init__(directory)
        self.reads = []

    def read(self, name, box=None):
        self.reads.append((name, box))
        return super().read(name, box)


def engine_from_checkpoint(rank: int, world: int, directory: str, strategy: str, rows: list[list[int]]):
    """An engine initialised from the checkpoint: its gathered weights, the reads this rank made,
    this rank's master boxes, and the loss of one step on ``rows`` (before its update)."""
    checkpoint = RecordingCheckpoint(directory)
    s = Strategy.parse(strategy)
    engine = Engine(config_from_hf(directory), [s], s, engine_run(4096, seed=0), initial=hf_initializer(checkpoint))
    boxes = dict(engine.master.state.params.boxes)
    params = engine.master.global_params()
    batch = [Sequence(i, tuple(row)) for i, row in enumerate(rows)]
    loss = engine.step({s: batch}, [s]).loss
    return (params if rank == 0 else None), checkpoint.reads, boxes, loss
