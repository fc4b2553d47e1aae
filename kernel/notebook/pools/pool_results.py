"""What a ``%%ranks`` cell gives back: each rank's value, labelled, or each failing rank's
traceback, grouped by rank (ipyparallel's ``Out[N:]`` and ``CompositeError``)."""

from __future__ import annotations


class RankResults(dict):
    """``{rank: value}`` (JSON values: a tensor arrives as its list of numbers, anything JSON
    cannot hold as its repr), shown one ``Out[N]: value`` line per rank."""

    def __repr__(self) -> str:
        return "\n".join(f"Out[{rank}]: {value!r}" for rank, value in sorted(self.items()))

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


class RanksFailed(RuntimeError):
    """A ``%%ranks`` cell raised on some ranks: ``errors`` maps each such rank to its error and
    traceback. The pool goes on."""

    def __init__(self, pool: str, failed: dict[int, dict]):
        self.pool = pool
        self.errors = {rank: {"error": r.get("error"), "traceback": r.get("traceback")} for rank, r in failed.items()}
        ranks = ", ".join(f"rank {rank}: {e['error']}" for rank, e in self.errors.items())
        super().__init__(f"%%ranks on pool {pool!r} raised on {len(failed)} rank(s): {ranks}")

    def _render_traceback_(self) -> list[str]:
        """What IPython shows: each failing rank's traceback, its lines labelled with the rank."""
        lines = [str(self)]
        for rank, error in self.errors.items():
            lines += [f"[rank {rank}] {line}" for line in str(error["traceback"]).splitlines()]
        return lines
