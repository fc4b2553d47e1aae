"""Collectives that wait past their limit, kernel side: each rank stuck in one says so once
(``kernel/worker/collective_wait.py``); a moment after the first report of a collective, the
job's cell names it, its group, the ranks waiting in it, and those of the group that have not
arrived, with what each of those waits in where it said."""

from __future__ import annotations

import threading
from collections.abc import Iterable

SETTLE_S = 2.5  # after the first report of a wait, how long the others' reports may take to come


def ranks_text(ranks: Iterable[int]) -> str:
    """``0-3``, ``0, 2, 5``: ranks as a user reads them."""
    ranks = sorted(ranks)
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(str(r) for r in ranks)


class CollectiveWaits:
    """The waits reported on job ``name``, written to ``output`` (the job's cell)."""

    def __init__(self, output, name: str, settle_s: float = SETTLE_S):
        self.output = output
        self.name = name
        self.settle_s = settle_s
        self.lock = threading.Lock()
        self.waiting: dict[int, tuple[str, tuple[int, ...], float]] = {}  # rank -> (op, group, seconds)
        self.said: set[tuple[str, tuple[int, ...]]] = set()

    def receive(self, rank: int, body: dict) -> None:
        """One ``collective_wait`` report (the channel's thread)."""
        key = (str(body.get("op")), tuple(int(r) for r in body.get("group", ())))
        with self.lock:
            self.waiting[rank] = (*key, float(body.get("seconds", 0.0)))
            first = key not in self.said
            self.said.add(key)
        if first:
            timer = threading.Timer(self.settle_s, self.say, key)
            timer.daemon = True
            timer.start()

    def say(self, op: str, group: tuple[int, ...]) -> None:
        """Name the wait on ``op`` over ``group``: who waits, who has not arrived and where they are."""
        self.output.write(self.text(op, group), "stderr")

    def text(self, op: str, group: tuple[int, ...]) -> str:
        with self.lock:
            waiting = {r: w for r, w in self.waiting.items() if w[:2] == (op, group)}
            elsewhere = {r: w for r, w in self.waiting.items() if r in group and r not in waiting}
        longest = max(w[2] for w in waiting.values())
        missing = [r for r in group if r not in waiting]
        head = (
            f"[hotswitch] job {self.name!r}: {op} over ranks {ranks_text(group)} has waited {longest:.0f} s on "
            f"rank(s) {ranks_text(waiting)}"
        )
        if not missing:
            return (
                head
                + "; every rank of its group is in it: the collective itself hangs (a peer's network, a "
                + (f"device). %train_stacks {self.name} shows each rank's stack\n")
            )
        where = [f"rank {r} waits in {w[0]} over ranks {ranks_text(w[1])}" for r, w in sorted(elsewhere.items())]
        busy = [r for r in missing if r not in elsewhere]
        if busy:
            where.append(f"rank(s) {ranks_text(busy)} still compute, or are stuck outside a collective")
        return (
            f"{head}; not arrived: rank(s) {ranks_text(missing)} ({'; '.join(where)}). "
            f"%train_stacks {self.name} shows where each rank is\n"
        )
