"""Global batches of sequence lengths for simulation: documents of a dataset's length
distribution (``data.lengths.SYNTHETIC``: a log-normal body with a power-law tail, its sources
and its assumptions stated there), truncated at the context."""

from __future__ import annotations

from hotswitch.backend.data.lengths import SYNTHETIC
from hotswitch.backend.data.sources import SyntheticDocuments

DATASETS = tuple(SYNTHETIC)
PAPER_BATCH = 512  # sequences per global batch, as in the paper


def batch_lengths(dataset: str, context: int, size: int = PAPER_BATCH, seed: int = 0) -> list[int]:
    """``size`` document lengths of ``dataset``, each truncated at ``context`` tokens."""
    if dataset not in SYNTHETIC:
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    if size < 1 or context < 2:
        raise ValueError(f"a batch needs at least one sequence of 2 tokens, got size={size}, context={context}")
    docs = SyntheticDocuments(dataset, count=size, seed=seed)
    return [min(context, docs.length(i)) for i in range(size)]
