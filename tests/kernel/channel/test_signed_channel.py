"""The signed channel over real ZMQ sockets: valid messages arrive, forged and oversized ones are counted."""

import zmq

from hotswitch.kernel.channel import worker_end
from hotswitch.kernel.channel.kernel_end import KernelChannel
from hotswitch.kernel.channel.signing import MessageSigner, new_key
from hotswitch.kernel.channel.worker_end import WorkerChannel

from ..kernel_session import wait_until

LIMIT = 64 * 1024


def _raw_dealer(address, identity=b"rank-9"):
    context = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, identity)
    sock.setsockopt(zmq.LINGER, 1000)
    sock.connect(address)
    return context, sock


def test_valid_messages_arrive_and_bad_ones_are_dropped_and_counted():
    key = new_key()
    received = []
    channel = KernelChannel(key, lambda sender, body: received.append((sender, body)), max_bytes=LIMIT)
    context, sock = _raw_dealer(channel.address)
    try:
        good = MessageSigner(key, "rank-9")
        first = good.seal({"kind": "event", "event": {"type": "step", "step": 1}})
        sock.send_multipart(first)
        sock.send_multipart(first)  # replayed: same sequence number
        forged = MessageSigner(new_key(), "rank-9").seal({"kind": "event", "event": {"type": "evil"}})
        sock.send_multipart(forged)
        tampered = good.seal({"kind": "event", "event": {"type": "step", "step": 2}})
        sock.send_multipart([tampered[0], tampered[1].replace(b"2", b"3"), tampered[2]])
        sock.send_multipart(first[:2])  # no signature frame
        sock.send_multipart(good.seal({"kind": "log", "line": "x" * LIMIT}))  # oversized
        sock.send_multipart(good.seal({"kind": "event", "event": {"type": "step", "step": 4}}))
        assert wait_until(lambda: channel.stats.accepted + channel.stats.dropped == 7)
        stats = channel.stats
        assert (stats.accepted, stats.replayed, stats.forged, stats.unsigned, stats.oversized) == (2, 1, 2, 1, 1)
        assert [body["event"]["step"] for _, body in received] == [1, 4]
        assert {sender for sender, _ in received} == {"rank-9"}
    finally:
        sock.close()
        context.term()
        channel.close()


def test_control_reaches_rank_zero_and_forged_control_is_ignored(monkeypatch):
    monkeypatch.setattr(worker_end, "FIRST_WORD_S", 0.5)  # a kernel end that never answers
    key = new_key()
    channel = KernelChannel(key, lambda sender, body: None, max_bytes=LIMIT)
    worker = WorkerChannel(channel.address, key, rank=0, max_bytes=LIMIT)
    try:
        channel.send(0, {"kind": "control", "control": {"type": "control", "command": "switch", "strategy": "dp2"}})
        worker.send({"kind": "started"})  # control waits for rank 0's first verified message
        got = []
        assert wait_until(lambda: got.extend(worker.receive_all()) or got)
        assert got == [{"kind": "control", "control": {"type": "control", "command": "switch", "strategy": "dp2"}}]
    finally:
        worker.close()
        channel.close()
    # A kernel end without the key reaches the worker's connection but is not believed.
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    worker = WorkerChannel(f"tcp://127.0.0.1:{port}", key, rank=0, max_bytes=LIMIT)
    try:
        worker.send({"kind": "started"})
        assert router.poll(5000)
        route = router.recv_multipart()[0]
        router.send_multipart([route, *MessageSigner(new_key(), "kernel").seal({"kind": "control", "control": {}})])
        assert wait_until(lambda: worker.receive_all() == [] and worker.stats.forged == 1)
    finally:
        worker.close()
        router.close(linger=0)
        context.term()


def test_worker_refuses_to_send_oversized_messages():
    key = new_key()
    channel = KernelChannel(key, lambda s, b: None, max_bytes=LIMIT)
    worker = WorkerChannel(channel.address, key, rank=1, max_bytes=LIMIT)
    try:
        try:
            worker.send({"kind": "event", "event": {"type": "blob", "data": "x" * LIMIT}})
        except ValueError as error:
            assert "over the channel limit" in str(error)
        else:
            raise AssertionError("an oversized send must raise")
    finally:
        worker.close()
        channel.close()


def test_closing_many_channels_leaks_no_threads():
    import threading

    before = threading.active_count()
    for _ in range(20):
        KernelChannel(new_key(), lambda s, b: None).close()
    assert threading.active_count() == before
