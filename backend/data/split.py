"""A held-out split: documents set aside for evaluation, never trained on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hotswitch.backend.data.sources import Context, DocumentSource


class Subset(DocumentSource):
    """The documents ``indices`` of ``source``, tokenised as ``source`` is."""

    def __init__(self, source: DocumentSource, indices: Sequence[int] | np.ndarray, name: str):
        self.source = source
        self.indices = np.asarray(indices, dtype=np.int64)
        self.name = name
        self.tokenizer = source.tokenizer

    def __len__(self) -> int:
        return len(self.indices)

    def text(self, index: int) -> bytes:
        return self.source.text(int(self.indices[index]))

    def tokens(self, index: int) -> list[int]:
        return self.source.tokens(int(self.indices[index]))

    def document(self, index: int) -> tuple[list[int], Context]:
        return self.source.document(int(self.indices[index]))

    def describe(self) -> str:
        return f"{self.name}: {len(self)} of {self.source.describe()}"


def holdout(source: DocumentSource, fraction: float, seed: int = 0) -> tuple[Subset, Subset]:
    """(train, eval): ``fraction`` of the documents (at least one), drawn with ``seed``, held
    out for evaluation; the rest keep their order for training."""
    if not 0 < fraction < 1:
        raise ValueError(f"a held-out fraction is between 0 and 1 (exclusive), got {fraction}")
    count = len(source)
    held = max(1, round(count * fraction))
    if held >= count:
        raise ValueError(
            f"holding out {fraction:g} of {count} document(s) for evaluation leaves none to train on; give more "
            "documents, or leave eval_every unset (no evaluation)"
        )
    chosen = np.zeros(count, dtype=bool)  # arrays, not sets and lists of Python ints: 40M documents
    chosen[np.random.default_rng([seed, 7_919]).choice(count, held, replace=False)] = True
    return Subset(source, np.flatnonzero(~chosen), "train"), Subset(source, np.flatnonzero(chosen), "eval")
