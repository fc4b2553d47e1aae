"""A worker's end of the job channel: signed sends to the kernel, control from the kernel.

Nothing is lost silently. The kernel confirms what it has folded in (``ack`` messages carrying
the newest sequence number it accepted from this rank), and a rank keeps at most
``WINDOW_MESSAGES`` messages (``WINDOW_BYTES``) unconfirmed: a rank that prints faster than the
kernel reads waits for it (back-pressure, bounded memory on both ends) instead of queueing
without end. ``close`` waits until every message is confirmed. Only a kernel silent for
``AWAY_S`` (gone, or a detached job's kernel away for hours) makes a rank give up; what it gives
up on is counted (``unsent``, ``unconfirmed``), said once on the rank's own log (``on_note``),
and reported to the kernel when it is back.

Thread-safe: one lock orders sends (sealing and sending happen under it, so sequence numbers
reach the kernel in order), another guards the socket. Imports only zmq and the standard
library: workers never load Jupyter machinery.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

import zmq

from hotswitch.kernel.channel.line_limit import MAX_LINE_CHARS, cut_line
from hotswitch.kernel.channel.messages import HeartbeatMessage, LogLineMessage, LogLinesMessage, RankMessage
from hotswitch.kernel.channel.secrets import CurveKeys
from hotswitch.kernel.channel.signing import ChannelStats, MessageSigner, MessageVerifier

# The socket's last frames after everything was confirmed (or given up on).
CLOSE_LINGER_MS = 3000
# A rank gives up on a kernel silent for this long (a live one acks and beats every second).
AWAY_S = 60.0
# ... and at close on one never heard at all (a kernel without this job's key, say), this long.
FIRST_WORD_S = 10.0
# Messages (and bytes) a rank may have sent and the kernel not yet confirmed.
WINDOW_MESSAGES = 4096
WINDOW_BYTES = 32 * 1024 * 1024
LINE_MESSAGE_OVERHEAD = 256  # a one-line message's bytes besides its line: header, keys, signature
WAIT_MS = 10  # one wait for the kernel's confirmations
# Output lines go one message each while fewer than LINES_ALONE messages are unconfirmed; past
# that the kernel is behind, and lines gather into one message, up to LINES_PER_MESSAGE.
LINES_ALONE = 32
LINES_PER_MESSAGE = 512


class WorkerChannel:
    """Connects rank ``rank`` to the kernel at ``address``, as a CURVE client when ``curve``
    gives (the server's public key, this worker's key pair). ``on_note(text)`` hears when the
    rank gives up on the kernel, and when the kernel is back (the worker writes it to the rank's
    log file)."""

    def __init__(
        self, address: str, key: bytes, rank: int, max_bytes: int, curve: tuple[bytes, CurveKeys] | None = None
    ):
        self.max_bytes = max_bytes
        self.on_note: Callable[[str], None] = lambda text: None
        self._signer = MessageSigner(key, f"rank-{rank}")
        self._verifier = MessageVerifier(key, max_bytes)
        self._order = threading.Lock()  # sealing and sending: sequence numbers go out in order
        self._lock = threading.Lock()  # the socket, the inbox and the in-flight record
        self._inbox: collections.deque[dict] = collections.deque()  # read, not yet taken
        self._in_flight: collections.deque[tuple[int, int]] = collections.deque()  # (seq, bytes) unconfirmed
        self._in_flight_bytes = 0
        self._heard_at = time.monotonic()  # when the kernel's latest valid message arrived
        self._ever_heard = False
        self._away_after = AWAY_S  # silence after which the kernel is taken as gone
        self.longest_silence = 0.0  # the longest gap between two of the kernel's messages, seconds
        self.unsent = 0  # messages given up on while the kernel was away
        self._told_unsent = 0  # of those, how many the kernel has been told of
        self.lines_sent = 0  # output lines sent or given up on
        self._lines: list[list[str]] = []  # [stream, line] waiting to go as one message
        self._lines_chars = 0
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.DEALER)
        # No IDENTITY: the kernel routes by signed sender, not by a name any peer could claim.
        self._socket.setsockopt(zmq.LINGER, CLOSE_LINGER_MS)
        if curve is not None:
            server_public, own = curve
            self._socket.curve_serverkey = server_public
            self._socket.curve_publickey, self._socket.curve_secretkey = own.public, own.secret
        self._socket.connect(address)

    @property
    def stats(self) -> ChannelStats:
        """Accepted and dropped counts of the messages this rank received from the kernel."""
        return self._verifier.stats

    @property
    def unconfirmed(self) -> int:
        """Messages sent that the kernel has not confirmed yet."""
        return len(self._in_flight)

    def send(self, body: RankMessage) -> None:
        """Send one JSON-able dict, in order after every earlier one; waits while the kernel is
        behind by a whole window. Raises ValueError if it is over the channel's size limit."""
        with self._order:
            self._tell_unsent()
            self._send_lines(wait=True)
            self._send_in_order(body, wait=True)

    def send_line(self, stream: str, line: str) -> None:
        """One output line of ``stream``, in order with everything sent. It goes at once while
        the kernel keeps up; while it is behind (``LINES_ALONE``), lines gather into one "log" message (up to
        ``LINES_PER_MESSAGE`` lines and half the size limit), so a flood costs the kernel a
        message per batch, not per line."""
        line = cut_line(line, self.line_chars)
        with self._order:
            self.lines_sent += 1
            cost = (len(line) if line.isascii() else 12 * len(line)) + 16  # its bytes in JSON, at most
            if self._lines and self._lines_chars + cost > self.max_bytes // 2:
                self._send_lines(wait=True)
            self._lines.append([stream, line])
            self._lines_chars += cost
            if len(self._lines) >= LINES_PER_MESSAGE or self._room_now():
                self._send_lines(wait=True)

    @property
    def line_chars(self) -> int:
        """The longest output line sent whole: ``MAX_LINE_CHARS``, or fewer where a message of
        this channel could not hold that many of any character (12 bytes each in JSON at most:
        an escaped surrogate pair); a longer line is cut, saying so, rather than failing the rank."""
        return max(16, min(MAX_LINE_CHARS, (self.max_bytes - LINE_MESSAGE_OVERHEAD) // 12))

    def try_send(self, body: HeartbeatMessage) -> bool:
        """Send ``body`` only if that needs no wait (a heartbeat: a rank that is sending or
        waiting to is heard anyway), and the lines gathered before it; whether it went."""
        if not self._order.acquire(blocking=False):
            return False
        try:
            return self._send_lines(wait=False) and self._send_in_order(body, wait=False)
        finally:
            self._order.release()

    def _room_now(self) -> bool:
        """Whether the kernel keeps up: few messages unconfirmed (after reading its confirmations)."""
        if len(self._in_flight) < LINES_ALONE:
            return True
        self.pump()
        return len(self._in_flight) < LINES_ALONE

    def _send_lines(self, wait: bool) -> bool:
        """The gathered lines as one message (one line alone as ``{"stream", "line"}``); False
        if they had to stay (``wait`` False and no room)."""
        if not self._lines:
            return True
        lines = self._lines
        body: LogLineMessage | LogLinesMessage = (
            {"kind": "log", "stream": lines[0][0], "line": lines[0][1]}
            if len(lines) == 1
            else {"kind": "log", "lines": lines}
        )
        if not self._send_in_order(body, wait) and not wait:
            return False
        self._lines = []
        self._lines_chars = 0
        return True

    def _send_in_order(self, body: RankMessage, wait: bool) -> bool:
        frames = self._signer.seal(body)
        size = sum(len(f) for f in frames)
        if size > self.max_bytes:
            raise ValueError(
                f"message of {size} bytes is over the channel limit of {self.max_bytes} bytes; "
                "send less (summaries, not tensors) or raise --max-message-bytes (%%train, %train_pool)"
            )
        while True:
            with self._lock:
                if self._socket.closed:
                    return False
                if self._has_room(size):
                    try:
                        self._socket.send_multipart(frames, zmq.NOBLOCK)
                        self._in_flight.append((self._signer.seq, size))
                        self._in_flight_bytes += size
                        return True
                    except zmq.Again:
                        pass
            if not wait:
                return False
            if self.silent_for() > self._away_after:  # a detached job's kernel may be away for hours
                self._give_up()
                return False
            self._wait_for_kernel()

    def _has_room(self, size: int) -> bool:
        if not self._in_flight:
            return True
        return len(self._in_flight) < WINDOW_MESSAGES and self._in_flight_bytes + size <= WINDOW_BYTES

    def _give_up(self) -> None:
        if self.unsent == self._told_unsent:
            self.on_note(
                f"hotswitch: the kernel has been silent for {self.silent_for():.0f} s; messages to it are "
                "dropped and counted until it is back (this log keeps every line)"
            )
        self.unsent += 1

    def _tell_unsent(self) -> None:
        """Once the kernel is heard again after the rank gave up on it, say how much it missed."""
        missed = self.unsent - self._told_unsent
        if missed and self.silent_for() < self._away_after:
            self._told_unsent = self.unsent
            self.on_note(f"hotswitch: the kernel is back; {missed} messages to it were dropped while it was away")
            self._send_in_order({"kind": "unsent", "count": missed, "total": self.unsent}, wait=True)

    def _wait_for_kernel(self) -> None:
        with self._lock:
            if not self._socket.closed:
                self._socket.poll(WAIT_MS, zmq.POLLIN)
        self.pump()

    @property
    def closed(self) -> bool:
        return self._socket.closed

    def pump(self) -> None:
        """Read what has arrived: note when the kernel was last heard and what it confirmed,
        keep all but heartbeats and confirmations."""
        with self._lock:
            while not self._socket.closed:
                try:
                    frames = self._socket.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                opened = self._verifier.open(frames)
                if opened is not None and opened[0] == "kernel":
                    self._heard(opened[1])

    def _heard(self, body: dict) -> None:
        now = time.monotonic()
        self.longest_silence = max(self.longest_silence, now - self._heard_at)
        self._heard_at = now
        self._ever_heard = True
        kind = body.get("kind")
        if kind == "ack":
            self._confirmed(int(body.get("seq", 0)))
        elif kind != "heartbeat":
            self._inbox.append(body)

    def _confirmed(self, seq: int) -> None:
        while self._in_flight and self._in_flight[0][0] <= seq:
            self._in_flight_bytes -= self._in_flight.popleft()[1]

    def away_after(self, seconds: float) -> None:
        """From now on take the kernel as gone once it has been silent for ``seconds`` (``AWAY_S``
        until then): a rank about to end for good waits for a following kernel's confirmations,
        which come within a second, but not for a kernel away for hours."""
        self._away_after = seconds

    def deliver_locally(self, body: dict) -> None:
        """Put ``body`` among the kernel's messages, as if the kernel had sent it: a rank keeping
        a detached job's deadline stops its own body (``worker.deadline``)."""
        with self._lock:
            self._inbox.append(body)

    def silent_for(self) -> float:
        """Seconds since the kernel's latest valid message (or since this channel opened)."""
        return time.monotonic() - self._heard_at

    def receive_all(self) -> list[dict]:
        """Every valid message the kernel sent since the last call (heartbeats and confirmations
        aside), oldest first; never blocks."""
        self.pump()
        bodies = []
        with self._lock:
            while self._inbox:
                bodies.append(self._inbox.popleft())
        return bodies

    def take(self, kind: str) -> list[dict]:
        """The messages of ``kind`` the kernel sent since the last call, oldest first, leaving
        every other message for ``receive_all``; never blocks."""
        self.pump()
        with self._lock:
            taken = [body for body in self._inbox if body.get("kind") == kind]
            kept = [body for body in self._inbox if body.get("kind") != kind]
            self._inbox.clear()
            self._inbox.extend(kept)
        return taken

    def close(self) -> int:
        """Wait until the kernel has confirmed every message (while it is heard from: one silent
        for ``AWAY_S``, or never heard for ``FIRST_WORD_S``, is taken as gone), then release the
        socket. Returns how many messages never reached the kernel as far as this rank knows
        (given up on, or unconfirmed)."""
        with self._order:
            self._send_lines(wait=True)
            while self._in_flight and not self.closed:
                if self.silent_for() > (self._away_after if self._ever_heard else min(FIRST_WORD_S, self._away_after)):
                    break
                self._wait_for_kernel()
            with self._lock:
                if not self._socket.closed:  # what is still unconfirmed is counted, not waited for
                    self._socket.close(linger=0 if self._in_flight else None)
                    self._context.term()
        return self.unsent + len(self._in_flight)
