"""Where a job's output goes: the notebook cell that launched it, from any thread.

What a cell is sent stays within what Jupyter's IOPub channel delivers: past its high-water mark
a frontend loses messages without a word, so a rank flooding its output would reach the cell in
part and nobody would know. Past ``BURST`` writes, at most ``RATE`` a second reach the cell; the
rest are held back and counted, and the cell is told how many, and where they all are (each
rank's lines stay whole in ``job.logs(rank)``'s newest and in the run folder's rank logs).
"""

from __future__ import annotations

import sys
import threading
import time

RATE = 200.0  # writes a second a cell receives, past the burst
BURST = 1000.0  # writes a cell receives at once (IOPub's high-water mark is 1000 messages)
RANK_OUTPUT = ("[stdout:", "[stderr:")  # how a rank's output lines begin (``RankReports``)


class Budget:
    """A token bucket of writes: ``take`` says whether one may go now; ``held`` counts refusals."""

    def __init__(self, rate: float = RATE, burst: float = BURST):
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.at = time.monotonic()
        self.held = 0
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens >= 1:
                self.tokens -= 1
                return True
            self.held += 1
            return False

    def released(self) -> int:
        """How many were held back since the last call (then counted afresh)."""
        with self.lock:
            held, self.held = self.held, 0
            return held


def held_note(count: int) -> str:
    return (
        f"[hotswitch] {count:,} output lines held back from this cell (more than {RATE:.0f} a second); "
        "job.logs(rank) keeps each rank's newest lines, and the run folder's logs/rank-N.log every one\n"
    )


class KernelCellOutput:
    """Sends ``stream`` messages on IOPub with the launching cell's header as parent.

    Frontends route output by parent message id, so lines from a background thread land in
    the cell that ran ``%%train`` even while other cells execute. ``kernel.iopub_socket`` is
    ipykernel's thread-safe background socket, so this may be called from the channel thread.
    """

    def __init__(self, kernel, budget: Budget | None = None):
        self._kernel = kernel
        self._parent = kernel.get_parent("shell")
        self.budget = budget or Budget()

    def write(self, text: str, stream: str = "stdout") -> None:
        """``text`` to the cell. A rank's output lines (``[stdout:N] ...``) go within the budget,
        held back (counted) past it, the count said with the next write that goes; the job's own
        words (its notices, a rank's traceback, a debugger's output) always go."""
        if text.startswith(RANK_OUTPUT) and not self.budget.take():
            return
        held = self.budget.released()
        if held:
            self.send(held_note(held), "stderr")
        self.send(text, stream)

    def flush(self) -> None:
        """Say what was held back and not yet said (at a job's end)."""
        held = self.budget.released()
        if held:
            self.send(held_note(held), "stderr")

    def send(self, text: str, stream: str) -> None:
        kernel = self._kernel
        kernel.session.send(
            kernel.iopub_socket,
            "stream",
            {"name": stream, "text": text},
            parent=self._parent,
            ident=f"kernel.{kernel.ident}.stream".encode(),  # the IOPub topic ipykernel gives stream output
        )


class ConsoleOutput:
    """Outside a kernel (terminal IPython, tests): the process' own stdout and stderr;
    ``all_to_stderr`` keeps stdout free for a command's own result (``--json``)."""

    def __init__(self, all_to_stderr: bool = False):
        self.all_to_stderr = all_to_stderr

    def write(self, text: str, stream: str = "stdout") -> None:
        target = sys.__stderr__ if stream == "stderr" or self.all_to_stderr else sys.__stdout__
        if target is None:  # a process without that stream (pythonw): nowhere to write
            return
        target.write(text)
        target.flush()

    def flush(self) -> None:
        pass  # written as it comes


def output_for_current_cell(shell):
    """The output of the cell now executing in ``shell`` (an IPython shell)."""
    kernel = getattr(shell, "kernel", None)
    return KernelCellOutput(kernel) if kernel is not None else ConsoleOutput()
