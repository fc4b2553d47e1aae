"""A text stream that sends each complete line to the kernel, labelled with the rank.

Why the worker reports its own output instead of torchrun's ``--redirects``/``--tee``: lines
travel on the same ordered channel as events and tracebacks, carry the rank wherever the rank
runs (another node, later a Ray actor) with no shared filesystem or log-file polling, and do not
depend on torchrun's log layout, which changes between versions. Output written below Python
(C extensions, subprocesses writing to fd 1/2) is captured apart (``fd_capture``) and sent on
the same channel; both also reach the original descriptors, which the launcher keeps in the
job's agent log.
"""

from __future__ import annotations

import codecs
import io

from hotswitch.kernel.channel.worker_end import WorkerChannel


class RankBuffer(io.RawIOBase):
    """``sys.stdout.buffer`` of a rank: bytes written here are decoded as UTF-8 (a character
    split between two writes is kept until it is whole) and go on as text."""

    def __init__(self, text: LineStream):
        self._text = text
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        chunk = bytes(data)
        self._text.write(self._decoder.decode(chunk))
        return len(chunk)

    def flush(self) -> None:
        self._text.flush()


class LineStream(io.TextIOBase):
    """Line-buffered: each complete line goes to ``send_line`` (a subclass's), and everything
    is written through to ``original``. ``buffer`` takes bytes."""

    def __init__(self, name: str, original):
        self._name = name
        self._original = original
        self._partial = ""
        self._buffer = RankBuffer(self)

    @property
    def buffer(self) -> RankBuffer:
        return self._buffer

    @property
    def encoding(self) -> str:  # type: ignore[override]  # read-only at run time too; the stubs say attribute
        return "utf-8"

    @property
    def name(self) -> str:
        return f"<{self._name} of this rank>"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._original.write(text)
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self.send_line(line)
        return len(text)

    def flush(self) -> None:
        self._original.flush()
        if self._partial:
            self.send_line(self._partial)
            self._partial = ""

    def fileno(self) -> int:
        return self._original.fileno()

    def send_line(self, line: str) -> None:
        raise NotImplementedError


class RankStream(LineStream):
    """A rank's stdout or stderr: each line to the kernel on the job's channel."""

    def __init__(self, channel: WorkerChannel, name: str, original):
        super().__init__(name, original)
        self._channel = channel

    def send_line(self, line: str) -> None:
        self._channel.send_line(self._name, line)  # cut to what the channel carries
