"""Documents back to back in a row: positions that restart at every document, and attention
that never crosses one.

A micro-batch row holds one document or several; ``positions[row, i]`` is token ``i``'s
position in its own document (0 at a document's first token). A padded row continues the
positions of its last document over the padding: causal attention keeps every real token
from seeing it, and its targets are ignored. Where a token's document starts in the row is
``i - positions[row, i]``, so any shard of a row (a sequence-parallel split, context
parallelism's zig-zag chunks) can tell from indices and positions alone whether two tokens
share a document (``same_document``).

Positions stay on the host (the micro-batch's other tensors go to the device): attention reads
the documents' spans from them without waiting on the device, and rotary embedding copies them
over once a micro-batch (``on_device``).
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from typing import Any

import torch


class NewestMicroBatch:
    """What is built from a micro-batch's positions (and a ``key``: the device, the tables), kept
    for the newest micro-batch only: every layer reads the same, and the previous micro-batch's
    goes as the next one's is built."""

    def __init__(self) -> None:
        self._positions: weakref.ref[torch.Tensor] | None = None
        self._key: object = None
        self._value: Any = None

    def get(self, positions: torch.Tensor, key: object, build: Callable[[], Any]) -> Any:
        if self._positions is not None and self._positions() is positions and self._key == key:
            return self._value
        self._positions = self._value = None
        self._value = build()
        self._positions = weakref.ref(positions)
        self._key = key
        return self._value


_MOVED = NewestMicroBatch()
_GATHERED = NewestMicroBatch()
_SPANS = NewestMicroBatch()


def row_positions(lengths: list[int], length: int | None = None) -> torch.Tensor:
    """Positions of documents of ``lengths`` back to back, continued over padding to ``length``."""
    parts = [torch.arange(n) for n in lengths]
    used = sum(lengths)
    if length is not None and length > used:
        last = lengths[-1] if lengths else 0
        parts.append(torch.arange(last, last + length - used))
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long)


def unpacked_positions(rows: int, length: int) -> torch.Tensor:
    """Positions of rows that each hold one document from their first token."""
    return torch.arange(length).expand(rows, length)


def pad_positions(positions: torch.Tensor, extra: int) -> torch.Tensor:
    """``positions`` [rows, length] continued by ``extra`` more tokens of each row's last document."""
    if not extra:
        return positions
    step = torch.arange(1, extra + 1)
    return torch.cat([positions, positions[:, -1:] + step], dim=1)


def spans(positions: torch.Tensor) -> list[list[tuple[int, int]]] | None:
    """Per row, the (start, end) of each of its documents; None when every row is a single
    document (the rows of today's padded micro-batches: one fused call serves them). Read once
    a micro-batch (every layer's attention asks; about 0.1 ms for a 16K-token row)."""
    if positions.device.type == "meta" or positions.shape[1] < 2:
        return None
    return _SPANS.get(positions, None, lambda: _spans(positions))


def _spans(positions: torch.Tensor) -> list[list[tuple[int, int]]] | None:
    host = positions.cpu()
    starts = host[:, 1:] == 0
    if not bool(starts.any()):
        return None
    out = []
    length = host.shape[1]
    for row in starts:
        cuts = [0, *(row.nonzero().flatten() + 1).tolist(), length]
        out.append(list(itertools.pairwise(cuts)))
    return out


def counts_from_zero(positions: torch.Tensor) -> bool:
    """Every row is 0, 1, 2, ...: one document from the row's first token."""
    host = positions.cpu()
    return bool(torch.equal(host, torch.arange(host.shape[1]).expand_as(host)))


def same_document(
    q_index: torch.Tensor, q_positions: torch.Tensor, k_index: torch.Tensor, k_positions: torch.Tensor
) -> torch.Tensor:
    """[rows, queries, keys]: key ``j`` is visible to query ``i`` (same document, not later).
    Indices are the tokens' places in the whole row [queries] / [keys]; positions [rows, n]."""
    q_start = q_index - q_positions  # [rows, queries]
    k_start = k_index - k_positions
    same = q_start[:, :, None] == k_start[:, None, :]
    return same & (k_index[None, None, :] <= q_index[None, :, None])


def on_device(positions: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``positions`` on ``device``, copied once per tensor (every layer's rotary reads them)."""
    if positions.device == device:
        return positions
    return _MOVED.get(positions, str(device), lambda: positions.to(device, non_blocking=True))


def per_document(
    attend: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    rows_spans: list[list[tuple[int, int]]],
) -> torch.Tensor:
    """``attend`` (causal attention over [batch, seq, heads, head_dim]) run on every document
    of every row apart, the results back in place: exact, whatever the kernel."""
    rows = []
    for r, row in enumerate(rows_spans):
        parts = [attend(q[r : r + 1, a:b], k[r : r + 1, a:b], v[r : r + 1, a:b]) for a, b in row]
        rows.append(torch.cat(parts, dim=1) if len(parts) > 1 else parts[0])
    return torch.cat(rows, dim=0)


def gather_tables(cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The rotary tables at ``positions`` [rows, seq]: the tables themselves where every row
    counts from 0 unbroken (``RotaryFunction`` reads their first rows, no copy), else
    [rows, seq, half]; decided and built once per micro-batch, shared by every layer; positions past the
    tables (padding continued past the model's context) clamp to the last row."""
    if positions.device.type == "meta":
        return cos, sin

    def build() -> tuple[torch.Tensor, torch.Tensor]:  # the first layer's call; the others read it back
        if counts_from_zero(positions):
            return cos, sin
        at = on_device(positions, cos.device).clamp(max=cos.shape[0] - 1)
        return cos[at], sin[at]

    return _GATHERED.get(positions, id(cos), build)
