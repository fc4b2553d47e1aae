"""How long a corpus's documents are in tokens, from a seeded sample of them, and what a
``max_len`` does to them: how many are longer, how much of their text ``cut`` trains (the rest
never does) and how many sequences ``split`` makes of each. What a user reads before choosing
``max_len`` and ``long_documents`` (``hotswitch data``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hotswitch.backend.data.sources import Context, DocumentSource
from hotswitch.backend.data.stream import untrained_targets

QUANTILES = (0.5, 0.9, 0.99)


def length_profile(
    source: DocumentSource,
    max_lens: list[int],
    sample: int = 2000,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """``sample`` documents of ``source`` drawn without replacement (all where it holds fewer),
    tokenised: their lengths' quantiles, and for each of ``max_lens`` what it does to them.
    A document of n tokens has n - 1 targets, of which its context's tokens are not (a prompt
    of p tokens leaves out p - 1: ``PromptedDocuments``); a sequence holds at most ``max_len``."""
    if sample < 1:
        raise ValueError(f"a sample of {sample} documents shows nothing; give at least 1")
    count = min(sample, len(source))
    picked = np.sort(np.random.default_rng(seed).choice(len(source), count, replace=False))
    targets = np.zeros(count, dtype=np.int64)
    trains: list[np.ndarray | None] = []  # per document, which of its targets train (None: all)
    for done, index in enumerate(picked, 1):
        tokens, context = source.document(int(index))
        targets[done - 1] = max(len(tokens) - 1, 0)
        trains.append(_trains(context, int(targets[done - 1])))
        if progress:
            progress(done, count)
    total = sum(int(t.sum()) if t is not None else int(n) for t, n in zip(trains, targets))
    return {
        "documents": len(source),
        "sampled": count,
        "seed": seed,
        "targets": total,  # tokens a model learns to predict: every token but each document's first (and context)
        "quantiles": {f"p{round(q * 100)}": int(np.quantile(targets, q)) for q in QUANTILES},
        "longest": int(targets.max()),
        "max_len": [_at(targets, trains, total, max_len) for max_len in max_lens],
    }


def _trains(context: Context, targets: int) -> np.ndarray | None:
    """Which of a document's ``targets`` train, its ``context``'s left out; None where all do."""
    if not context:
        return None
    trains = np.ones(targets, dtype=bool)
    for start, end in untrained_targets(context, 0, targets):
        trains[start:end] = False
    return trains


def _at(targets: np.ndarray, trains: list[np.ndarray | None], total: int, max_len: int) -> dict:
    if max_len < 1:
        raise ValueError(f"max_len {max_len} holds no token; give at least 1")
    longer = targets > max_len
    pieces = np.ceil(targets / max_len)
    kept = np.minimum(targets, max_len)  # the trained targets among the first max_len
    for i, trained in enumerate(trains):
        if trained is not None:  # a piece all context is left out: it trains nothing
            kept[i] = trained[:max_len].sum()
            pieces[i] = sum(trained[at : at + max_len].any() for at in range(0, len(trained), max_len))
    return {
        "max_len": max_len,
        "longer": float(longer.mean()),  # the fraction of documents longer than max_len
        "cut_trains": float(kept.sum() / total) if total else 1.0,
        "split_sequences": float(np.maximum(pieces, 1).mean()),  # per document
    }
