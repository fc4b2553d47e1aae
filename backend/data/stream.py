"""Global batches of sequences, deterministic from a seed, resumable from a position."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hotswitch.backend.data.sources import Context, DocumentSource


@dataclass(frozen=True)
class Sequence:
    """One training sequence: ``tokens[:-1]`` are the inputs, ``tokens[1:]`` the targets, of
    which those in the ``untrained`` ranges [start, end) train nothing (a prompt's, a
    conversation's turns but the assistant's: supervised fine-tuning)."""

    doc: int
    tokens: tuple[int, ...]
    untrained: tuple[tuple[int, int], ...] = ()

    @property
    def length(self) -> int:
        return len(self.tokens) - 1

    @property
    def trained(self) -> int:
        """The targets that train: what a step's mean loss is over."""
        return self.length - sum(end - start for start, end in self.untrained)


def untrained_targets(context: Context, start: int, length: int) -> tuple[tuple[int, int], ...]:
    """The ranges of a sequence's ``length`` targets that are ``context``'s tokens, for the
    sequence whose first input is its document's token ``start`` (its target i is token
    start + i + 1)."""
    ranges = ((max(a - 1 - start, 0), min(b - 1 - start, length)) for a, b in context)
    return tuple((a, b) for a, b in ranges if a < b)


class BatchStream:
    """Documents in a seeded random order, epoch after epoch, cut to ``max_len`` input tokens
    and grouped ``batch_size`` at a time. ``position`` says where the next batch starts.

    A document longer than ``max_len`` trains its first ``max_len`` tokens (the paper's setup),
    or with ``split`` all of them: consecutive sequences of ``max_len``, each one's last target
    the next one's first input, taken before the next document."""

    def __init__(
        self,
        source: DocumentSource,
        batch_size: int,
        max_len: int,
        seed: int = 0,
        min_len: int = 2,
        split: bool = False,
    ):
        if len(source) == 0:
            raise ValueError("the dataset is empty: give at least one document")
        if batch_size < 1 or max_len < 1:
            raise ValueError(f"batch_size and max_len must be positive, got {batch_size} and {max_len}")
        self.source = source
        self.batch_size = batch_size
        self.max_len = max_len
        self.seed = seed
        self.min_len = min_len
        self.split = split
        self.position = 0  # documents begun so far, over all epochs
        self.piece: tuple[int, int] | None = None  # (document, first token) of a split document's next piece
        self._orders: dict[int, np.ndarray] = {}
        self._tokens: tuple[int, list[int], Context] | None = None  # the document being split, tokenised once
        self._documents: str | None = None  # ``source.fingerprint()``, once asked for

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
            sequence = self._next_sequence()
            if sequence is not None:
                batch.append(sequence)
            elif self.position > 2 * len(self.source) and not batch:
                raise ValueError(self._nothing_trains())
        return batch

    def one_pass(self, most: int) -> list[Sequence]:
        """Up to ``most`` sequences of one pass over the documents from the start, each document
        (each piece of a split one) at most once: a held-out split smaller than its batches is
        evaluated once over, not partly twice. ValueError if none trains anything."""
        sequences: list[Sequence] = []
        while len(sequences) < most and (self.piece is not None or self.position < len(self.source)):
            sequence = self._next_sequence()
            if sequence is not None:
                sequences.append(sequence)
        if not sequences:
            raise ValueError(self._nothing_trains())
        return sequences

    def _next_sequence(self) -> Sequence | None:
        """The next sequence, or None where it is too short or trains nothing (then skipped)."""
        doc, start = self.piece or self._next_document()
        tokens, context = self._document(doc)
        end = start + self.max_len + 1
        self.piece = (doc, start + self.max_len) if self.split and end < len(tokens) else None
        piece = tuple(tokens[start:end])
        sequence = Sequence(doc, piece, untrained_targets(context, start, len(piece) - 1))
        return sequence if sequence.length >= self.min_len and sequence.trained else None

    def _nothing_trains(self) -> str:
        return (
            f"no document has at least {self.min_len + 1} tokens and a trained one among its first "
            f"{self.max_len + 1} (a prompt longer than max_len trains nothing)"
        )

    def _next_document(self) -> tuple[int, int]:
        epoch, index = divmod(self.position, len(self.source))
        self.position += 1
        return int(self._order(epoch)[index]), 0

    def _document(self, doc: int) -> tuple[list[int], Context]:
        """Document ``doc``'s tokens and its context's ranges of them (tokenised once)."""
        if self._tokens is None or self._tokens[0] != doc:
            self._tokens = (doc, *self.source.document(doc))
        return self._tokens[1], self._tokens[2]

    def _fingerprint(self) -> str:
        """The documents' digest, read once (every checkpoint saves it; the documents never change)."""
        if self._documents is None:
            self._documents = self.source.fingerprint()
        return self._documents

    def state_dict(self) -> dict:
        return {
            "position": self.position,
            "piece": list(self.piece) if self.piece else None,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "max_len": self.max_len,
            "documents": self._fingerprint(),
        }

    def load_state_dict(self, state: dict) -> str | None:
        """Continue where ``state`` left off, and return None. Where ``state`` came from other
        documents (other files or tokens, another count) or another seed, its position means
        nothing here: the documents start from their first batch, and the reason is returned."""
        documents = self._fingerprint()
        if state.get("documents", documents) != documents:  # checkpoints before 2026-11-29 lack it
            why = "this run's documents are not the ones the checkpoint trained on (other files, tokens or count)"
        elif int(state.get("seed", self.seed)) != self.seed:
            why = f"this run's seed ({self.seed}) is not the checkpoint's ({state['seed']}): another order"
        else:
            why = None
        if why:
            self.position = 0
            self.piece = None
            return f"{why}; this run's documents train from their first batch (the weights, optimizer and step resume)"
        self.position = int(state["position"])
        piece = state.get("piece")  # absent from checkpoints written before documents were split
        self.piece = (int(piece[0]), int(piece[1])) if piece else None
        return None
