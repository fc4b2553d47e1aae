"""Off loopback the channel is CURVE-encrypted on top of its signatures, and its secrets reach
the ranks as an owner-only file: a peer without the server's public key is never heard, a
peer with it but without the HMAC key is dropped, and nothing is readable on the wire."""

import contextlib
import os
import stat
import time

import pytest
import zmq

from hotswitch.kernel.channel import worker_end
from hotswitch.kernel.channel.kernel_end import KernelChannel
from hotswitch.kernel.channel.secrets import CurveKeys, KernelSecret, WorkerSecret, leaves_loopback
from hotswitch.kernel.channel.signing import MessageSigner, new_key
from hotswitch.kernel.channel.worker_end import WorkerChannel

from ..kernel_session import wait_until


def test_which_hosts_leave_loopback():
    assert not leaves_loopback("127.0.0.1") and not leaves_loopback("::1") and not leaves_loopback("localhost")
    assert leaves_loopback("0.0.0.0") and leaves_loopback("10.1.2.3") and leaves_loopback("node7")


def test_the_worker_secret_is_an_owner_only_file_without_the_servers_secret(tmp_path):
    secret = KernelSecret.new(curve=True)
    path = secret.for_workers().write(tmp_path / "channel.secret")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert secret.server.secret.decode() not in text and secret.key.hex() in text
    read = WorkerSecret.read(path)
    assert read.key == secret.key and read.server_public == secret.server.public and read.client is not None
    os.chmod(path, 0o644)
    with pytest.raises(PermissionError, match="readable by no one else"):
        WorkerSecret.read(path)
    with pytest.raises(FileExistsError):
        secret.for_workers().write(path)  # never overwritten


def test_an_encrypted_channel_hears_only_peers_with_both_keys(monkeypatch):
    monkeypatch.setattr(worker_end, "FIRST_WORD_S", 0.5)  # a kernel end that never answers
    secret = KernelSecret.new(curve=True)
    received = []
    channel = KernelChannel(secret.key, lambda s, b: received.append((s, b)), "127.0.0.1", 64 * 1024, secret.server)
    worker_secret = secret.for_workers()
    worker = WorkerChannel(
        channel.address, secret.key, 0, 64 * 1024, (worker_secret.server_public, worker_secret.client)
    )
    plain = zmq.Context()
    eavesdropper = plain.socket(zmq.DEALER)  # no CURVE: the handshake fails, nothing is delivered
    eavesdropper.setsockopt(zmq.LINGER, 0)
    # Its handshake fails, the pipe is dropped and retried: between tries a DEALER has no peer
    # to queue for, and a send without a timeout would block for good.
    eavesdropper.setsockopt(zmq.SNDTIMEO, 2000)
    eavesdropper.connect(channel.address)
    impostor = WorkerChannel(channel.address, new_key(), 1, 64 * 1024, (worker_secret.server_public, CurveKeys.new()))
    try:
        with contextlib.suppress(zmq.Again):  # queued or refused: either way never delivered
            eavesdropper.send_multipart(MessageSigner(secret.key, "rank-5").seal({"kind": "started"}))
        impostor.send({"kind": "started"})  # encrypted, but signed with another key
        worker.send({"kind": "event", "event": {"type": "step", "step": 1}})
        assert wait_until(lambda: received)
        channel.send(0, {"kind": "control", "control": {"command": "pause"}})
        got = []
        assert wait_until(lambda: got.extend(worker.receive_all()) or got), (worker.stats, channel.stats, received)
        assert got == [{"kind": "control", "control": {"command": "pause"}}]
        assert wait_until(lambda: channel.stats.forged == 1), channel.stats
        time.sleep(0.5)
        assert received == [("rank-0", {"kind": "event", "event": {"type": "step", "step": 1}})]
    finally:
        eavesdropper.close()
        plain.term()
        for end in (worker, impostor, channel):
            end.close()
