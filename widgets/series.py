"""A bounded table of numeric points: old points are merged into evenly sized bucket means."""

from __future__ import annotations

from collections.abc import Sequence


class BoundedSeries:
    """Rows of floats under fixed column names; memory stays O(``capacity``) however many rows
    are appended. Every kept row is the mean of ``stride`` consecutive appended rows; when more
    than ``capacity`` are kept, neighbours merge and ``stride`` doubles, so the whole history
    stays evenly covered. ``rows`` ends with the mean of the not yet full bucket, so the newest
    point always shows. ``appended`` counts every row ever given.
    """

    def __init__(self, columns: Sequence[str], capacity: int = 2000):
        if capacity < 2:
            raise ValueError(f"a series needs room for at least 2 points, got capacity={capacity}")
        self.columns = tuple(columns)
        self.capacity = capacity
        self.stride = 1
        self.appended = 0
        self._full: list[tuple[float, ...]] = []
        self._sum = [0.0] * len(self.columns)
        self._count = 0

    def append(self, row: dict[str, float]) -> None:
        self.appended += 1
        self._count += 1
        self._sum = [s + float(row[c]) for s, c in zip(self._sum, self.columns)]
        if self._count == self.stride:
            self._full.append(tuple(s / self.stride for s in self._sum))
            self._sum = [0.0] * len(self.columns)
            self._count = 0
            if len(self._full) > self.capacity:
                self._merge()

    def _merge(self) -> None:
        odd = self._full.pop() if len(self._full) % 2 else None
        self._full = [tuple((a + b) / 2 for a, b in zip(x, y)) for x, y in zip(self._full[::2], self._full[1::2])]
        self.stride *= 2
        if odd is not None:  # half a bucket of the new stride: it becomes the partial one
            self._sum = [v * (self.stride // 2) for v in odd]
            self._count = self.stride // 2

    @property
    def rows(self) -> list[tuple[float, ...]]:
        partial = [tuple(s / self._count for s in self._sum)] if self._count else []
        return self._full + partial

    def column(self, name: str) -> list[float]:
        index = self.columns.index(name)
        return [r[index] for r in self.rows]

    def __len__(self) -> int:
        return len(self._full) + (1 if self._count else 0)
