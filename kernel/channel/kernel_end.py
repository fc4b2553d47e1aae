"""The kernel's end of a job's channel: a ROUTER socket read on a background thread.

Workers connect DEALER sockets. Every frame set is checked by a ``MessageVerifier``; valid
bodies go to ``on_message(sender, body)`` on the channel's own thread, so the notebook's
execution never waits on training. Control messages for a rank are queued from any thread and
sent by the channel thread (ZMQ sockets are not thread-safe), which also seals them as they go
out, so every rank sees the kernel's sequence numbers rise.

What the kernel has folded in, it confirms: an ``ack`` with the newest sequence number accepted
from that rank, every ``ACK_EVERY`` messages and ``ACK_AFTER_S`` after the last one at most.
A rank holds back once a window of its messages is unconfirmed (``worker_end``), so a rank
that floods the channel is slowed to the kernel's pace instead of losing what it sent.

Where control goes: to the connection whose latest *verified* message was signed as that
rank, never to a ZMQ routing identity a peer claims. A routing identity is chosen by whoever
connects, so a local process that connected first as ``rank-0`` would otherwise receive the
signed control frames, and (ZMQ refuses a second peer with a taken identity) the real rank 0
could not be heard at all. Workers therefore set no identity (the ROUTER gives each connection
its own), and the kernel learns rank N's route from the sender in the signed header of a
message that verified under the job's key with a new sequence number: a peer without the key
can neither claim a rank nor, by connecting, shut a rank out. A rank that reconnects (a new
route) is followed as soon as its next message verifies. Control for a rank that has not yet
sent a verified message (every worker sends "started" first) waits, in order, until it has.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

import zmq

from hotswitch.kernel.channel.messages import KernelMessage
from hotswitch.kernel.channel.secrets import CurveKeys
from hotswitch.kernel.channel.signing import DEFAULT_MAX_MESSAGE_BYTES, ChannelStats, MessageSigner, MessageVerifier

POLL_MS = 20
RECEIVE_BATCH = 1000
# ZMQ disconnects a peer sending more than this, before Python sees it: a memory guard only.
# Messages between max_bytes and this are received, dropped and counted as oversized.
TRANSPORT_LIMIT_FACTOR = 4
ACK_EVERY = 256
ACK_AFTER_S = 0.05


class KernelChannel:
    """Binds on ``host`` (loopback by default) at ``port`` or a free one; ``address`` is what
    workers connect to. With ``curve`` (the server's key pair) the socket is a CURVE server:
    traffic is encrypted."""

    def __init__(
        self,
        key: bytes,
        on_message: Callable[[str, dict], None],
        host: str = "127.0.0.1",
        max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        curve: CurveKeys | None = None,
        port: int | None = None,
    ):
        self._verifier = MessageVerifier(key, max_bytes)
        # numbered from the clock: a kernel that attaches to running ranks numbers on past the last
        self._signer = MessageSigner(key, "kernel", first_seq=time.time_ns())
        self._on_message = on_message
        self._outbox: collections.deque[tuple[str, KernelMessage]] = collections.deque()  # sealed as sent
        self._acked: dict[str, tuple[int, float]] = {}  # sender -> (seq confirmed, when)
        self._routes: dict[str, bytes] = {}  # sender -> routing id of its latest verified message
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self._socket.setsockopt(zmq.MAXMSGSIZE, max_bytes * TRANSPORT_LIMIT_FACTOR)
        if curve is not None:  # encrypted: only peers that know the server's public key connect
            self._socket.curve_server = True
            self._socket.curve_publickey, self._socket.curve_secretkey = curve.public, curve.secret
        if port is None:
            try:
                port = self._socket.bind_to_random_port(f"tcp://{host}")
            except zmq.ZMQError as error:
                self._socket.close(linger=0)
                self._context.term()
                raise ValueError(
                    f"--channel-host {host}: cannot listen there ({error.strerror}); give an address of this "
                    "machine (127.0.0.1 for ranks here, or this machine's address on the network its nodes share)"
                ) from None
        else:  # the address a detached job's ranks know
            try:
                self._socket.bind(f"tcp://{host}:{port}")
            except zmq.ZMQError as error:
                self._socket.close(linger=0)
                self._context.term()
                raise ValueError(
                    f"cannot listen on {host}:{port} again ({error}); is another kernel attached?"
                ) from None
        self.address = f"tcp://{host}:{port}"
        self._last_arrival = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"hotswitch-channel-{port}", daemon=True)
        self._thread.start()

    @property
    def stats(self) -> ChannelStats:
        """Accepted and dropped message counts (updated live)."""
        return self._verifier.stats

    def send(self, rank: int, body: KernelMessage) -> None:
        """Queue a signed message for ``rank``; delivered once a message signed by that rank has
        verified (see the module docstring), in the order queued."""
        self._outbox.append((f"rank-{rank}", body))

    def quiet_for(self) -> float:
        """Seconds since the last message (valid or not) arrived."""
        return time.monotonic() - self._last_arrival

    def close(self) -> None:
        """Stop the thread and release the socket and its port; safe to call twice."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if not self._socket.closed:
            self._socket.close(linger=0)
            self._context.term()

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        while not self._stop.is_set():
            if poller.poll(POLL_MS):
                self._receive_all()
            self._flush_outbox()
            self._confirm()

    def _receive_all(self) -> None:
        for _ in range(RECEIVE_BATCH):  # then the outbox: heartbeats go out under a flood too
            try:
                frames = self._socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._last_arrival = time.monotonic()
            opened = self._verifier.open(frames[1:])
            if opened is not None:
                self._routes[opened[0]] = frames[0]  # only a key holder's new message moves a route
                self._on_message(*opened)

    def _flush_outbox(self) -> None:
        waiting: list[tuple[str, KernelMessage]] = []
        held: set[str] = set()  # a rank whose earlier message waits gets nothing before it
        while self._outbox:
            rank, body = self._outbox.popleft()
            if rank in held or not self._deliver(rank, body):
                held.add(rank)
                waiting.append((rank, body))
        self._outbox.extendleft(reversed(waiting))  # ahead of any queued meanwhile: order kept

    def _deliver(self, rank: str, body: KernelMessage) -> bool:
        """Seal ``body`` and send it to ``rank``'s route now; False if it has none or it is gone
        (then it waits for the rank's next message)."""
        route = self._routes.get(rank)
        if route is None:
            return False
        try:
            self._socket.send_multipart([route, *self._signer.seal(body)], zmq.NOBLOCK)
            return True
        except zmq.ZMQError:
            return False

    def _confirm(self) -> None:
        """Tell each rank what has been folded in, when enough is new or enough time has passed."""
        now = time.monotonic()
        for sender in self._routes:
            newest = self._verifier.last_seq(sender)
            confirmed, at = self._acked.get(sender, (0, 0.0))
            due = newest > confirmed and (newest - confirmed >= ACK_EVERY or now - at >= ACK_AFTER_S)
            if due and self._deliver(sender, {"kind": "ack", "seq": newest}):
                self._acked[sender] = (newest, now)
