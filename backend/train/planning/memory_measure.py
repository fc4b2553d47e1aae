"""Memory measured, not estimated: the bytes autograd keeps from forward to backward for one
sequence, counted with ``torch.autograd.graph.saved_tensors_hooks`` (each storage once,
parameters left out: they are model state); on CUDA, the allocator's peak.

With activation checkpointing a block keeps only its inputs (held by the checkpoint, not
saved through the hooks): ``CheckpointedBlock`` reports them while a count is open. Its inside
is recomputed in backward, one block at a time (``memory.activation_bytes`` adds it). Selective
recompute frees what it recomputes once its readers have run (``selective_recompute``
reports it): those storages are not kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch

from hotswitch.backend.graph import checkpoint_blocks, selective_recompute


class SavedCount:
    """Storages seen by the hooks (and reported by checkpointed blocks), each counted once."""

    def __init__(self, exclude: Iterable[torch.Tensor] = ()):
        self.excluded = {t.untyped_storage().data_ptr() for t in exclude}
        self.storages: dict[int, int] = {}
        self._held: list[torch.Tensor] = []  # alive until the count ends: no address is reused meanwhile

    def add(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in self.excluded:
            self.storages[key] = max(self.storages.get(key, 0), storage.nbytes())
            self._held.append(tensor.detach())

    def release(self, tensor: torch.Tensor) -> None:
        """Selective recompute frees ``tensor``'s storage until backward: no longer kept."""
        self.storages.pop(tensor.untyped_storage().data_ptr(), None)

    @property
    def bytes(self) -> int:
        return sum(self.storages.values())


@contextlib.contextmanager
def counting_saved(exclude: Iterable[torch.Tensor] = ()) -> Iterator[SavedCount]:
    """Count what autograd saves for backward inside the block (and checkpointed blocks keep)."""
    count = SavedCount(exclude)

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        count.add(tensor)
        return tensor

    hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor)
    with hooks, checkpoint_blocks.reporting(count.add), selective_recompute.releasing(count.release):
        yield count


def measured_activation_bytes(engine, strategy, length: int) -> int:
    """The bytes one sequence of ``length`` keeps for backward on the busiest rank of
    ``strategy`` (collective): ``memory.kept_activation_bytes`` as measured. A pipeline gets
    ``pp`` such sequences, as many as its first stage keeps in flight under 1F1B."""
    from hotswitch.backend.train.planning.measure import slowest

    state = engine.states[strategy]
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, engine.config.vocab_size, (1, length), generator=gen).to(engine.device)
    module = state.graph.module
    with engine.holding(strategy), counting_saved([*module.parameters(), *module.buffers()]) as count:
        state.graph.run([(tokens, tokens)] * strategy.pp, 0.0, engine.schedule)
    return int(slowest(count.bytes))
