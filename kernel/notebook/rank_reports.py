"""What a job's ranks report on its channel, folded as it arrives: events, output lines, which
ranks started and ended, and the first failure."""

from __future__ import annotations

from collections.abc import Callable

from hotswitch.kernel.notebook.event_log import EventLog


class RankReports:
    """Fed by the channel thread (``receive``, the channel's ``on_message``); read from any thread.

    ``log`` holds every event the ranks emitted (with "rank"), in arrival order, with their
    arrival times and subscribers. ``failure`` is the
    first rank error, ``{"rank", "error", "traceback"}``, or None. Output lines and tracebacks
    also go to ``output`` (``write(text, stream)``) as they arrive. ``on_started`` is called on
    every rank's "started", ``on_failure`` once, after the first error has been written out.
    """

    def __init__(self, output, on_started: Callable[[], None], on_failure: Callable[[], None]):
        self.log = EventLog()
        self.failure: dict | None = None
        self._output = output
        self._on_started = on_started
        self._on_failure = on_failure
        self._logs: dict[int, list[str]] = {}
        self._started_ranks: set[int] = set()
        self._ended_ranks: set[int] = set()

    def logs(self, rank: int) -> str:
        """Everything rank ``rank`` wrote to stdout and stderr, as ``[stdout:N] line`` lines."""
        return "".join(self._logs.get(rank, []))

    def every_started_rank_ended(self) -> bool:
        """Whether each rank that reported "started" has also reported "finished" or an error."""
        return self._started_ranks <= self._ended_ranks

    def receive(self, sender: str, body: dict) -> None:
        """Fold one verified message from ``sender`` ("rank-N") into the reports."""
        rank = int(sender.removeprefix("rank-")) if sender.startswith("rank-") else -1
        kind = body.get("kind")
        if kind == "log":
            line = f"[{body.get('stream')}:{rank}] {body.get('line')}\n"
            self._logs.setdefault(rank, []).append(line)
            self._output.write(line, "stderr" if body.get("stream") == "stderr" else "stdout")
        elif kind == "event" and isinstance(body.get("event"), dict):
            self.log.append(body["event"])
        elif kind == "started":
            self._started_ranks.add(rank)
            self._on_started()
        elif kind == "finished":
            self._ended_ranks.add(rank)
        elif kind == "error":
            self._ended_ranks.add(rank)
            self._rank_failed(rank, body)

    def _rank_failed(self, rank: int, body: dict) -> None:
        if self.failure is None:
            self.failure = {"rank": rank, "error": str(body.get("error")), "traceback": str(body.get("traceback"))}
            text = "".join(f"[rank {rank}] {line}\n" for line in self.failure["traceback"].splitlines())
            self._output.write(text, "stderr")
            self._on_failure()
        else:
            self._output.write(f"[rank {rank}] also failed: {body.get('error')}\n", "stderr")
