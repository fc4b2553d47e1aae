"""Global batches of sequences, deterministic from a seed, resumable from a position."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
        self._orders: dict[int, np.ndarray] = {}

    def _order(self, epoch: int) -> np.ndarray:
        """The epoch's order of documents: a permutation as an array (8 bytes a document; a
        list of 40M Python ints took 1.4 GB on every rank and half a minute to shuffle)."""
        if epoch not in self._orders:
            generator = np.random.default_rng([self.seed, epoch])
            self._orders = {epoch: generator.permutation(len(self.source))}
        return self._orders[epoch]

    def next_batch(self) -> list[Sequence]:
        batch: list[Sequence] = []
        while len(batch) < self.batch_size:
            epoch, index = divmod(self.position, len(self.source))
            doc = int(self._order(epoch)[index])
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
