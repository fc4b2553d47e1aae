"""The kernel's side of a rank's debugger (``kernel/worker/debugger.py``): the breakpoints ranks
stopped at, fed by the channel's thread, and the loop that drives one from the cell: pdb's
output shown labelled with the rank, each line asked for through the cell's stdin (``input``,
which the kernel turns into an ``input_request`` to the frontend), sent back to that rank.

It drives a session from ``Job.wait`` (a ``%%train --wait`` cell) and from ``%train_debug``;
a breakpoint hit while no cell waits is announced once, naming ``%train_debug``. ``stacks``
are the answers to ``%train_stacks``; ``waits`` the collectives that waited past their limit.
None of it costs anything while no rank stops.
"""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Callable

from hotswitch.kernel.notebook.jobs.collective_waits import CollectiveWaits

DEBUG_KINDS = ("debug", "debug_end", "stacks", "collective_wait")
SETTLE_S = 0.3  # after a session ends, how long a next breakpoint (or the same rank's) may take to show


class DebugSessions:
    """Per rank: the pdb prompt it waits at (``pending``), the ranks in a session, their stacks."""

    def __init__(self, output, name: str):
        self.output = output
        self.name = name
        self.driving = output  # where a session's output goes: the cell that drives it
        self.pending: dict[int, dict] = {}  # rank -> its "debug" message, not yet answered
        self.active: set[int] = set()
        self.stacks: dict[int, str] = {}
        self.waits = CollectiveWaits(output, name)
        self.changed = threading.Condition()

    def receive(self, rank: int, body: dict) -> None:
        """One ``debug``, ``debug_end``, ``stacks`` or ``collective_wait`` message of ``rank`` (the
        channel's thread)."""
        kind = body.get("kind")
        if kind == "collective_wait":
            self.waits.receive(rank, body)
            return
        with self.changed:
            if kind == "debug":
                if rank not in self.active:
                    self.output.write(
                        f"[hotswitch] rank {rank} of job {self.name!r} stopped at a breakpoint; "
                        f"%train_debug {self.name} {rank} drives it (a --wait cell does at once)\n",
                        "stderr",
                    )
                self.active.add(rank)
                self.pending[rank] = body
            elif kind == "debug_end":
                self.active.discard(rank)
                self.pending.pop(rank, None)
                if body.get("text"):
                    self.driving.write(labelled(rank, str(body["text"])), "stdout")
            elif kind == "stacks":
                self.stacks[rank] = str(body.get("text", ""))
            self.changed.notify_all()

    def expect(self, rank: int) -> None:
        """``rank`` was asked to open a session (a post-mortem): it is driven, not announced."""
        with self.changed:
            self.active.add(rank)
            self.changed.notify_all()

    def waiting(self, rank: int | None = None) -> int | None:
        """A rank waiting at a prompt (``rank`` itself where given), else None."""
        with self.changed:
            if rank is not None:
                return rank if rank in self.pending else None
            return min(self.pending) if self.pending else None

    def take_prompt(self, rank: int) -> dict | None:
        with self.changed:
            return self.pending.pop(rank, None)

    def wait_change(self, seconds: float) -> None:
        with self.changed:
            self.changed.wait(seconds)


def labelled(rank: int, text: str) -> str:
    return "".join(f"[pdb:{rank}] {line}\n" for line in text.splitlines())


def drive(
    sessions: DebugSessions,
    answer: Callable[[int, str], None],
    alive: Callable[[], bool],
    ask: Callable[[str], str] | None = None,
    rank: int | None = None,
    output=None,
) -> int:
    """Drive the ranks' prompts (``rank``'s only, where given) from this cell until none waits
    and none stops again within ``SETTLE_S``, or the job ends (``alive``). Each prompt: its output
    shown, a line read with ``ask``, sent with ``answer(rank, line)``. An interrupt while asking
    lets the rank continue, then propagates. Returns how many lines were sent. Its output goes to
    ``output`` (the driving cell's; the job's own by default). ``ask`` defaults
    to ``input`` as it is when called (the kernel replaces it with one that asks the frontend)."""
    ask = ask or (lambda prompt: builtins.input(prompt))
    sessions.driving = output or sessions.output
    try:
        return _drive(sessions, answer, alive, ask, rank)
    finally:
        sessions.driving = sessions.output


def _drive(sessions: DebugSessions, answer, alive, ask, rank: int | None) -> int:
    sent = 0
    quiet_since = time.monotonic()
    while alive() and time.monotonic() - quiet_since < SETTLE_S:
        waiting = sessions.waiting(rank)
        if waiting is None:
            if not sessions.active or (rank is not None and rank not in sessions.active):
                sessions.wait_change(SETTLE_S / 3)
                continue
            sessions.wait_change(0.05)  # a rank in a session, between two prompts
            quiet_since = time.monotonic()
            continue
        prompt = sessions.take_prompt(waiting) or {}
        sessions.driving.write(labelled(waiting, str(prompt.get("text", ""))), "stdout")
        try:
            line = ask(str(prompt.get("prompt") or f"(Pdb rank {waiting}) "))
        except (KeyboardInterrupt, EOFError):
            answer(waiting, "continue")
            raise
        answer(waiting, line)
        sent += 1
        quiet_since = time.monotonic()
    return sent
