"""Documents packed into fixed-length rows as HotSPa's artifact feeds its runs (public repository
``ccchengff/HotSPa-AE``, ``hotspa/llama_hot_switch.py``): first-fit, longest first, each row
padded to its length; attention is dense and causal over the whole row (``ht.attn(q, k, v, 0,
-1, True)``, no per-document mask), so a row costs what a document of the row's length costs.

- static runs: rows as long as the context (``BUCKET_SIZES=(SEQ_LEN 0)``);
- hot switching (c1): documents of <= 4K tokens in 4K rows, of <= 16K in 16K rows, the rest in
  rows of the context (32K).
"""

from __future__ import annotations

from collections.abc import Sequence

C1_ROWS = (4096, 16384, 32768)


def first_fit_rows(lengths: Sequence[int], row: int) -> list[int]:
    """Rows of ``row`` tokens (their count) holding ``lengths``, first-fit longest first."""
    if any(n > row for n in lengths):
        raise ValueError(f"a document of {max(lengths)} tokens does not fit a {row}-token row")
    free: list[int] = []
    for n in sorted(lengths, reverse=True):
        for i, space in enumerate(free):
            if space >= n:
                free[i] -= n
                break
        else:
            free.append(row - n)
    return [row] * len(free)


def context_rows(lengths: Sequence[int], context: int) -> list[int]:
    """The artifact's static feed: every document in rows of the context."""
    return first_fit_rows(lengths, context)


def bucketed_rows(lengths: Sequence[int], context: int, rows: Sequence[int] = C1_ROWS) -> list[int]:
    """The artifact's hot-switching feed: each document in the shortest row kind that holds it
    (row kinds capped at the context)."""
    sizes = sorted({min(r, context) for r in rows} | {context})
    out = []
    lower = 0
    for size in sizes:
        group = [n for n in lengths if lower < n <= size]
        out += first_fit_rows(group, size) if group else []
        lower = size
    return out
