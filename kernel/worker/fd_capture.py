"""What a rank writes below Python: fd 1 and 2 captured into pipes while its body runs, each line
sent on the job's channel labelled with its stream, as ``sys.stdout``'s lines are.

C and C++ code (a gloo or NCCL error, PyTorch's C++ warnings, a CUDA device-side assert), a
subprocess the body starts and anything else writing to the file descriptors themselves bypass
``sys.stdout``; on a cluster those are the lines that explain a hang or a crash. Monarch closed
the same gap the same way (its #1407). Every byte read still goes to the original descriptor,
so the launcher's agent log keeps it as before, and each line to the rank's own log.

Python-level output does not pass through here: ``sys.stdout`` and ``sys.stderr`` send their
lines themselves, in order with the rank's events, and write through to ``originals`` (the
descriptors as they were), so nothing is sent twice.
"""

from __future__ import annotations

import codecs
import contextlib
import faulthandler
import os
import sys
import threading
from collections.abc import Callable
from typing import TextIO

STREAMS = ((1, "stdout"), (2, "stderr"))
# how long the end of a body waits for a subprocess it left running to close the pipe
LINGER_S = 5.0
CHUNK = 65536

Sink = Callable[[str, str], None]  # (stream, line)
# fd 2 as it was before the capture began, while one lasts: lines that must reach the agent's
# log even as the process ends at once (a watchdog's exit, a segfault's trace) are written there
_agent_stderr: list[int] = []


def agent_stderr() -> int:
    """The descriptor of the agent's log for this rank's stderr: fd 2, or what fd 2 was before a
    capture began."""
    return _agent_stderr[-1] if _agent_stderr else 2


def say_on_agent_log(text: str) -> None:
    """``text`` on the agent's log at once, not through a pipe a dying process would not drain."""
    with contextlib.suppress(OSError):  # no stderr at all: the process still goes on (or exits)
        write_all(agent_stderr(), text.encode("utf-8", errors="replace"))


class BelowPython:
    """fd 1 and 2 into pipes from ``start`` to ``stop``; each line read goes to ``sink`` and to
    ``log`` (the rank's log, when there is one), every byte to the original descriptor."""

    def __init__(self, sink: Sink, log: TextIO | None):
        self.sink = sink
        self.log = log
        self.readers: list[threading.Thread] = []
        self.saved: list[tuple[int, int]] = []  # (fd, its original, duplicated)
        self.sink_failed = False
        self.faults = False  # whether faulthandler was on before start
        self.lock = threading.Lock()  # one line at a time into the rank's log

    def start(self) -> tuple[TextIO, TextIO]:
        """Capture; text streams on the original descriptors (line-buffered), for Python's own
        streams to write through to."""
        for stream in (sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
        originals = []
        for fd, name in STREAMS:
            original = os.dup(fd)
            read, write = os.pipe()
            os.dup2(write, fd)
            os.close(write)
            self.saved.append((fd, original))
            reader = threading.Thread(target=self.forward, args=(read, original, name), daemon=True)
            reader.name = f"hotswitch-{name}-below-python"
            reader.start()
            self.readers.append(reader)
            copy = os.dup(original)  # Python's stream owns a descriptor of its own: closing it closes only that
            originals.append(open(copy, "w", encoding="utf-8", errors="replace", buffering=1))  # noqa: SIM115  # the caller closes it after stop()
        _agent_stderr.append(originals[1].fileno())
        self.faults = faulthandler.is_enabled()
        faulthandler.enable(file=originals[1], all_threads=False)  # a crash's trace: past the pipe
        return originals[0], originals[1]

    def stop(self, linger_s: float = LINGER_S) -> bool:
        """The descriptors back as they were; what is still in the pipes delivered. False where a
        process the body started still holds a pipe after ``linger_s`` (its output then goes
        on reaching the agent log and, while the channel is open, the cell)."""
        faulthandler.disable()
        _agent_stderr.pop()
        if _agent_stderr:  # inside another capture (a warm pool's task): its agent's log again
            faulthandler.enable(file=_agent_stderr[-1], all_threads=False)
        elif self.faults and sys.__stderr__ is not None:
            faulthandler.enable(file=sys.__stderr__, all_threads=True)
        for fd, original in self.saved:
            os.dup2(original, fd)  # closes this process's end of the pipe
        for reader in self.readers:
            reader.join(linger_s)
        return not any(reader.is_alive() for reader in self.readers)

    def forward(self, read: int, original: int, name: str) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        partial = ""
        unwritten = b""
        try:
            while chunk := os.read(read, CHUNK):
                # whole lines to the agent's log, so that Python's own lines (written there
                # directly) fall between lines, not inside one; a long unended line goes anyway
                unwritten += chunk
                cut = len(unwritten) if len(unwritten) > CHUNK else unwritten.rfind(b"\n") + 1
                write_all(original, unwritten[:cut])
                unwritten = unwritten[cut:]
                partial += decoder.decode(chunk)
                *lines, partial = partial.split("\n")
                for line in lines:
                    self.deliver(name, line)
            write_all(original, unwritten)
            if partial := partial + decoder.decode(b"", final=True):
                self.deliver(name, partial)
        finally:
            os.close(read)
            os.close(original)

    def deliver(self, name: str, line: str) -> None:
        with self.lock:
            if self.log is not None and not self.log.closed:
                self.log.write(line + "\n")
        if self.sink_failed:
            return
        try:
            self.sink(name, line)
        except Exception:  # the channel closed under a lingering subprocess: the agent log has it
            self.sink_failed = True


def write_all(fd: int, data: bytes) -> None:
    """``data`` written whole to ``fd`` (a pipe or a file may take it in parts)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
