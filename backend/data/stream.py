"""Global batches of sequences, deterministic from a seed, resumable from a position."""

from __future__ import annotations

import random
from dataclasses import dataclass

from hotswitch.backend.data.sources import DocumentSource


@dataclass(frozen=True)
class Sequence:
    """One training sequence: ``tokens[:-1]`` are the inputs, ``tokens[1:]`` the targets."""

    doc: int
    tokens: tuple[int, ...]

    @property
    def length(self) -> int:
        return len(self.tokens) - 1


class BatchStream:
    """Documents in a seeded random order, epoch after epoch, cut to ``max_len`` input tokens
    and grouped ``batch_size`` at a time. ``position`` says where the next batch starts."""

    def __init__(self, source: DocumentSource, batch_size: int, max_len: int, seed: int = 0, min_len: int = 2):
        if len(source) == 0:
            raise ValueError("the dataset is empty: give at least one document")
        if batch_size < 1 or max_len < 1:
            raise ValueError(f"batch_size and max_len must be positive, got {batch_size} and {max_len}")
        self.source, self.batch_size, self.max_len, self.seed, self.min_len = source, batch_size, max_len, seed, min_len
        self.position = 0  # documents consumed so far, over all epochs
        self._orders: dict[int, list[int]] = {}

    def _order(self, epoch: int) -> list[int]:
        if epoch not in self._orders:
            order = list(range(len(self.source)))
            random.Random(self.seed * 1_000_033 + epoch).shuffle(order)
            self._orders = {epoch: order}
        return self._orders[epoch]

    def next_batch(self) -> list[Sequence]:
        batch: list[Sequence] = []
        while len(batch) < self.batch_size:
            epoch, index = divmod(self.position, len(self.source))
            doc = self._order(epoch)[index]
            self.position += 1
            tokens = self.source.tokens(doc)[: self.max_len + 1]
            if len(tokens) - 1 >= self.min_len:
                batch.append(Sequence(doc, tuple(tokens)))
            elif self.position > 2 * len(self.source) and not batch:
                raise ValueError(f"no document has at least {self.min_len + 1} tokens")
        return batch

    def state_dict(self) -> dict:
        return {"position": self.position, "seed": self.seed, "batch_size": self.batch_size, "max_len": self.max_len}

    def load_state_dict(self, state: dict) -> None:
        self.position = int(state["position"])
