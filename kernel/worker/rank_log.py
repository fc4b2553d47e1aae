"""Each rank's own log file: everything the rank writes to stdout and stderr, and its traceback,
kept in the job's log folder (``LaunchSpec.log_dir``) after the kernel has gone; the launcher's
``logs(handle, rank)`` reads it."""

from __future__ import annotations

import faulthandler
import io
import os
import signal
import sys
from pathlib import Path
from typing import TextIO

from hotswitch.kernel.launch.launcher import rank_log

ENV_LOG_DIR = "HOTSWITCH_LOG_DIR"


def open_rank_log(rank: int) -> TextIO | None:
    """Rank ``rank``'s log in ``$HOTSWITCH_LOG_DIR`` (readable by the owner only), appended to;
    None when no folder is given."""
    folder = os.environ.get(ENV_LOG_DIR)
    if not folder:
        return None
    Path(folder).mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(rank_log(Path(folder), rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    return open(fd, "a", encoding="utf-8", errors="replace", buffering=1)


def note_in_rank_log(rank: int, text: str) -> None:
    """One line from the worker itself (not the body) in rank ``rank``'s log, and on the
    agent's output."""
    print(text, file=sys.__stderr__, flush=True)
    log = open_rank_log(rank)
    if log is not None:
        with log:
            log.write(text + "\n")


def stacks_on_signal(log: TextIO | None) -> None:
    """From now on ``kill -USR1 PID`` writes every thread's stack to the rank's log (else to the
    agent's output) and the rank goes on: what a rank that seems hung is waiting on. Where the
    signal does not exist (Windows), nothing."""
    target = log if log is not None else sys.__stderr__
    if hasattr(signal, "SIGUSR1") and target is not None:
        faulthandler.register(signal.SIGUSR1, file=target, all_threads=True)


def no_stacks_on_signal() -> None:
    """Undo ``stacks_on_signal`` (before its log file closes)."""
    if hasattr(signal, "SIGUSR1"):
        faulthandler.unregister(signal.SIGUSR1)


class Tee(io.TextIOBase):
    """Writes to ``original`` and to ``log`` (when there is one)."""

    def __init__(self, original: TextIO, log: TextIO | None):
        self._original = original
        self._log = log

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._original.write(text)
        if self._log is not None and not self._log.closed:
            self._log.write(text)
        return len(text)

    def flush(self) -> None:
        self._original.flush()
        if self._log is not None and not self._log.closed:
            self._log.flush()

    def fileno(self) -> int:
        return self._original.fileno()
