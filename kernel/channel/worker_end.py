"""A worker's end of the job channel: signed sends to the kernel, control from the kernel.

Thread-safe (one lock around the socket), because a rank's stdout may be written from any
thread. Imports only zmq and the standard library: workers never load Jupyter machinery.
"""

from __future__ import annotations

import collections
import threading
import time

import zmq

from hotswitch.kernel.channel.secrets import CurveKeys
from hotswitch.kernel.channel.signing import ChannelStats, MessageSigner, MessageVerifier

# Delivery of the last messages (a traceback, "finished") when the worker exits.
CLOSE_LINGER_MS = 3000
# A message that finds the queue to the kernel full waits while the kernel has been heard within
# this many seconds, and is dropped after: a rank never stalls on a kernel that is gone.
AWAY_S = 60.0


class WorkerChannel:
    """Connects rank ``rank`` to the kernel at ``address``, as a CURVE client when ``curve``
    gives (the server's public key, this worker's key pair)."""

    def __init__(
        self, address: str, key: bytes, rank: int, max_bytes: int, curve: tuple[bytes, CurveKeys] | None = None
    ):
        self.max_bytes = max_bytes
        self._signer = MessageSigner(key, f"rank-{rank}")
        self._verifier = MessageVerifier(key, max_bytes)
        self._lock = threading.Lock()
        self._inbox: collections.deque[dict] = collections.deque()  # read, not yet taken
        self._heard_at = time.monotonic()  # when the kernel's latest valid message arrived
        self.unsent = 0  # messages dropped while the kernel was away
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

    def send(self, body: dict) -> None:
        """Send one JSON-able dict; raises ValueError if it is over the channel's size limit."""
        frames = self._signer.seal(body)
        size = sum(len(f) for f in frames)
        if size > self.max_bytes:
            raise ValueError(
                f"message of {size} bytes is over the channel limit of {self.max_bytes} bytes; "
                "send less (summaries, not tensors) or raise HOTSWITCH_MAX_MESSAGE_BYTES"
            )
        while True:  # a full queue waits for the kernel to catch up; one away for long gets nothing
            with self._lock:
                if self._socket.closed:
                    return
                try:
                    self._socket.send_multipart(frames, zmq.NOBLOCK)
                    return
                except zmq.Again:
                    pass
            self.pump()  # is the kernel still there?
            if self.silent_for() > AWAY_S:  # a detached job's kernel may be away for hours
                self.unsent += 1
                return
            time.sleep(0.01)

    @property
    def closed(self) -> bool:
        return self._socket.closed

    def pump(self) -> None:
        """Read what has arrived: note when the kernel was last heard, keep all but heartbeats."""
        with self._lock:
            while not self._socket.closed:
                try:
                    frames = self._socket.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                opened = self._verifier.open(frames)
                if opened is not None and opened[0] == "kernel":
                    self._heard_at = time.monotonic()
                    if opened[1].get("kind") != "heartbeat":
                        self._inbox.append(opened[1])

    def silent_for(self) -> float:
        """Seconds since the kernel's latest valid message (or since this channel opened)."""
        return time.monotonic() - self._heard_at

    def receive_all(self) -> list[dict]:
        """Every valid message the kernel sent since the last call (heartbeats aside), oldest
        first; never blocks."""
        self.pump()
        bodies = []
        with self._lock:
            while self._inbox:
                bodies.append(self._inbox.popleft())
        return bodies

    def close(self) -> None:
        """Flush pending messages (up to CLOSE_LINGER_MS) and release the socket."""
        with self._lock:
            if not self._socket.closed:
                self._socket.close()
                self._context.term()
