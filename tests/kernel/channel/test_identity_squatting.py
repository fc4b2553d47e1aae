"""A local process that connects first with the routing identity ``rank-0`` and does not know
the key neither receives control frames nor keeps the real rank 0 from being heard."""

import zmq

from hotswitch.kernel.channel.kernel_end import KernelChannel
from hotswitch.kernel.channel.signing import MessageSigner, new_key
from hotswitch.kernel.channel.worker_end import WorkerChannel

from ..kernel_session import wait_until

LIMIT = 64 * 1024
CONTROL = {"kind": "control", "control": {"type": "control", "command": "pause"}}


def _impostor(context, address):
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, b"rank-0")
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    return sock


def test_an_impostor_holding_rank_0s_identity_gets_no_control_and_blocks_no_events():
    key, received = new_key(), []
    channel = KernelChannel(key, lambda sender, body: received.append((sender, body)), max_bytes=LIMIT)
    context = zmq.Context()
    impostor = _impostor(context, channel.address)
    worker = None
    try:
        # The impostor is connected and heard (its unsigned and forged messages are counted)
        # before the real rank 0 exists; control queued now must not go to it.
        impostor.send_multipart([b"{}", b"{}"])
        impostor.send_multipart(MessageSigner(new_key(), "rank-0").seal({"kind": "started"}))
        assert wait_until(lambda: channel.stats.dropped == 2)
        channel.send(0, CONTROL)
        worker = WorkerChannel(channel.address, key, rank=0, max_bytes=LIMIT)
        worker.send({"kind": "started"})
        worker.send({"kind": "event", "event": {"type": "step", "step": 1}})
        got = []
        assert wait_until(lambda: got.extend(worker.receive_all()) or got)
        assert got == [CONTROL]
        assert wait_until(lambda: len(received) == 2)
        step = {"kind": "event", "event": {"type": "step", "step": 1}}
        assert received == [("rank-0", {"kind": "started"}), ("rank-0", step)]
        channel.send(0, CONTROL)
        assert wait_until(lambda: got.extend(worker.receive_all()) or len(got) == 2)
        assert impostor.poll(200) == 0  # by now both controls went out, none of them to the impostor
        assert (channel.stats.accepted, channel.stats.unsigned, channel.stats.forged) == (2, 1, 1)
    finally:
        if worker is not None:
            worker.close()
        impostor.close()
        context.term()
        channel.close()


def test_a_replayed_rank_0_message_does_not_move_the_route():
    key = new_key()
    channel = KernelChannel(key, lambda sender, body: None, max_bytes=LIMIT)
    context = zmq.Context()
    worker = WorkerChannel(channel.address, key, rank=0, max_bytes=LIMIT)
    impostor = _impostor(context, channel.address)
    try:
        captured = MessageSigner(key, "rank-0").seal({"kind": "started"})  # as if sniffed: sequence 1
        worker.send({"kind": "started"})
        worker.send({"kind": "event", "event": {"type": "step"}})
        assert wait_until(lambda: channel.stats.accepted == 2)
        impostor.send_multipart(captured)
        assert wait_until(lambda: channel.stats.replayed == 1)
        channel.send(0, CONTROL)
        got = []
        assert wait_until(lambda: got.extend(worker.receive_all()) or got)
        assert got == [CONTROL]
        assert impostor.poll(200) == 0
    finally:
        worker.close()
        impostor.close()
        context.term()
        channel.close()
