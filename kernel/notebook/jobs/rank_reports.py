"""What a job's ranks report on its channel, folded as it arrives: events, output lines, which
ranks started and ended, and the first failure. Memory stays bounded however long the job runs:
the newest events (``EventLog``) and the newest output lines of each rank are kept, and the
cell is told once when older ones start to be dropped."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

from hotswitch.kernel.channel.line_limit import MAX_LINE_CHARS, cut_line
from hotswitch.kernel.notebook.jobs.debug_sessions import DEBUG_KINDS
from hotswitch.kernel.notebook.jobs.event_log import EventLog

LOG_LINES = 10_000  # output lines kept per rank
LOG_CHARS = 8 * 1024 * 1024  # ... and at most this many characters of them per rank
KEPT_LINE_CHARS = MAX_LINE_CHARS + 64  # room for the marker a rank adds to a line it cut


class RankLines:
    """The newest output lines of one rank, within ``max_lines`` lines and ``max_chars``
    characters; ``dropped`` counts the older lines let go, ``received`` every line that came,
    ``missing`` the lines the rank sent that never came (known once the rank says how many it
    sent: ``sent``)."""

    def __init__(self, max_lines: int, max_chars: int):
        self.max_lines = max_lines
        self.max_chars = max_chars
        self.dropped = 0
        self.received = 0
        self.sent: int | None = None
        self._lines: collections.deque[str] = collections.deque()
        self._chars = 0

    def __len__(self) -> int:
        return len(self._lines)

    @property
    def missing(self) -> int:
        return max(0, self.sent - self.received) if self.sent is not None else 0

    def append(self, line: str) -> None:
        self.received += 1
        self._lines.append(line)
        self._chars += len(line)
        while len(self._lines) > 1 and (len(self._lines) > self.max_lines or self._chars > self.max_chars):
            self._chars -= len(self._lines.popleft())
            self.dropped += 1

    def text(self, rank: int) -> str:
        lines = list(self._lines)  # one C-level copy: the channel thread may append meanwhile
        head = f"[hotswitch] {self.dropped} earlier lines of rank {rank} were dropped\n" if self.dropped else ""
        if self.missing:
            head += (
                f"[hotswitch] {self.missing} lines of rank {rank} never reached the kernel; "
                "the rank's own log file keeps every line\n"
            )
        return head + "".join(lines)


class RankReports:
    """Fed by the channel thread (``receive``, the channel's ``on_message``); read from any thread.

    ``log`` holds the events the ranks emitted (with "rank"), in arrival order, with their
    arrival times and subscribers (the newest ``max_events``; each rank's newest ``max_lines``
    output lines within ``max_chars``; module defaults when None). ``failure`` is the
    first rank error, ``{"rank", "error", "traceback"}``, or None. Output lines and tracebacks
    also go to ``output`` (``write(text, stream)``) as they arrive. ``on_started`` is called on
    every rank's "started", ``on_failure`` once, after the first error has been written out.
    """

    def __init__(
        self,
        output,
        on_started: Callable[[], None],
        on_failure: Callable[[], None],
        max_events: int | None = None,
        max_lines: int | None = None,
        max_chars: int | None = None,
        on_debug: Callable[[int, dict], None] | None = None,
    ):
        self.log = EventLog(max_events)
        self._on_debug = on_debug  # a rank's debugger messages (``debug_sessions``)
        self.failure: dict | None = None
        self._output = output
        self._on_started = on_started
        self._on_failure = on_failure
        self._logs: dict[int, RankLines] = {}
        self._line_limits = (max_lines or LOG_LINES, max_chars or LOG_CHARS)
        self._noted: set[str] = set()  # what the cell was already told was cut
        self._started_ranks: set[int] = set()
        self._heard: dict[int, float] = {}  # rank -> time.monotonic() of its latest message
        self.placement: dict[int, dict] = {}  # rank -> {"node", "host", "pid"}, from its "started"
        self._ended_ranks: set[int] = set()
        self._unsent: dict[int, int] = {}  # rank -> messages it gave up on while the kernel was away

    def logs(self, rank: int) -> str:
        """What rank ``rank`` wrote to stdout and stderr, as ``[stdout:N] line`` lines: the
        newest lines, after a one-line note of how many older ones were dropped, if any."""
        lines = self._logs.get(rank)
        return lines.text(rank) if lines is not None else ""

    def kept_lines(self, rank: int) -> int:
        """How many output lines of rank ``rank`` the kernel holds now."""
        lines = self._logs.get(rank)
        return len(lines) if lines is not None else 0

    def running_ranks(self) -> list[int]:
        """Ranks that reported "started" and not yet their end."""
        return sorted(self._started_ranks - self._ended_ranks)

    def silences(self) -> dict[int, float]:
        """Seconds since each running rank's latest message."""
        now = time.monotonic()
        return {rank: now - self._heard[rank] for rank in self.running_ranks()}

    def every_started_rank_ended(self) -> bool:
        """Whether each rank that reported "started" has also reported "finished" or an error."""
        return self._started_ranks <= self._ended_ranks

    def receive(self, sender: str, body: dict) -> None:
        """Fold one verified message from ``sender`` ("rank-N") into the reports."""
        rank = int(sender.removeprefix("rank-")) if sender.startswith("rank-") else -1
        self._heard[rank] = time.monotonic()
        kind = body.get("kind")
        if kind == "log" and isinstance(body.get("lines"), list):  # lines gathered while the kernel was behind
            for item in body["lines"]:
                if isinstance(item, list) and len(item) == 2:
                    self._log_line(rank, {"stream": item[0], "line": item[1]})
        elif kind == "log":
            self._log_line(rank, body)
        elif kind == "event" and isinstance(body.get("event"), dict):
            self.log.append(body["event"])
            if self.log.events.dropped:
                kept = self.log.events.capacity
                self._note_once("events", f"job.events keeps the newest {kept} events; older ones are dropped")
        elif kind == "started":
            self._started_ranks.add(rank)
            self.placement[rank] = {k: body.get(k) for k in ("node", "host", "pid")}
            self._on_started()
        elif kind in ("finished", "error"):
            self._ended_ranks.add(rank)
            self._count_sent(rank, body.get("lines"))
            if kind == "error":
                self._rank_failed(rank, body)
        elif kind == "unsent":
            self._gave_up(rank, body)
        elif kind in DEBUG_KINDS and self._on_debug is not None:
            self._on_debug(rank, body)

    def losses(self) -> dict[int, dict[str, int]]:
        """Per rank, what never reached the kernel: output lines (``missing_lines``) and the
        messages the rank said it gave up on while the kernel was away (``unsent``)."""
        ranks = set(self._unsent) | {r for r, lines in self._logs.items() if lines.missing}
        return {
            rank: {"missing_lines": self._lines_of(rank).missing, "unsent": self._unsent.get(rank, 0)}
            for rank in sorted(ranks)
        }

    def _lines_of(self, rank: int) -> RankLines:
        lines = self._logs.get(rank)
        if lines is None:
            lines = self._logs[rank] = RankLines(*self._line_limits)
        return lines

    def _count_sent(self, rank: int, sent) -> None:
        if isinstance(sent, int):
            self._lines_of(rank).sent = sent

    def _gave_up(self, rank: int, body: dict) -> None:
        count = int(body.get("count", 0))
        self._unsent[rank] = self._unsent.get(rank, 0) + count
        self.log.append({"type": "unsent", "rank": rank, "count": count})
        self._output.write(
            f"[hotswitch] rank {rank} could not reach the kernel for a while and dropped {count} messages "
            "(its own log file keeps every line)\n",
            "stderr",
        )

    def _log_line(self, rank: int, body: dict) -> None:
        line = f"[{body.get('stream')}:{rank}] {cut_line(str(body.get('line')), KEPT_LINE_CHARS)}\n"
        lines = self._lines_of(rank)
        lines.append(line)
        self._output.write(line, "stderr" if body.get("stream") == "stderr" else "stdout")
        if lines.dropped:
            self._note_once(
                f"logs-{rank}", f"job.logs({rank}) keeps the newest output of rank {rank}; older lines are dropped"
            )

    def _note_once(self, what: str, note: str) -> None:
        if what not in self._noted:
            self._noted.add(what)
            self._output.write(f"[hotswitch] {note}\n", "stderr")

    def _rank_failed(self, rank: int, body: dict) -> None:
        if self.failure is None:
            self.failure = {"rank": rank, "error": str(body.get("error")), "traceback": str(body.get("traceback"))}
            where = self.placement.get(rank)
            text = f"[rank {rank}] failed on node {where['node']} (pid {where['pid']})\n" if where else ""
            text += "".join(f"[rank {rank}] {line}\n" for line in self.failure["traceback"].splitlines())
            self._output.write(text, "stderr")
            self._on_failure()
        else:
            self._output.write(f"[rank {rank}] also failed: {body.get('error')}\n", "stderr")
