"""Evaluation on a held-out split: the same fixed batches every time, forward only."""

from __future__ import annotations

import time

from hotswitch.backend.data.stream import BatchStream
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.loop.events import event


class Evaluation:
    """Every ``every`` steps, the mean token loss over ``batches`` global batches drawn once
    from ``stream`` (the held-out documents), under the instantiation strategy; over fewer
    sequences where the held-out documents hold fewer, each of them once (drawn again, some
    would count twice and the loss would depend on the batch size)."""

    def __init__(self, stream: BatchStream, every: int, batches: int = 1):
        if every < 1 or batches < 1:
            raise ValueError(f"eval_every and eval_batches must be at least 1, got {every} and {batches}")
        self.every = every
        size = stream.batch_size
        try:
            sequences = stream.one_pass(batches * size)
        except ValueError as error:
            raise ValueError(f"the held-out documents (eval_data, or the eval_fraction split): {error}") from None
        self.batches = [sequences[i : i + size] for i in range(0, len(sequences), size)]

    def due(self, step: int) -> bool:
        return step % self.every == 0

    def run(self, engine: Engine, step: int) -> dict:
        """The ``eval`` event after ``step`` updates (collective)."""
        started = time.perf_counter()
        loss = 0.0
        tokens = 0
        for batch in self.batches:
            summed, count = engine.evaluate(batch)
            loss, tokens = loss + summed, tokens + count
        return event("eval", step=step, loss=loss / tokens, tokens=tokens, seconds=time.perf_counter() - started)
