"""A Slurm job's nodes meet where its first node says: that node holds a port on the head from
the moment it chooses it (its torchrun inherits the socket), and writes HOST:PORT into the job's
shared folder, whole, where the other nodes wait for it."""

import socket
import threading

import pytest

from hotswitch.kernel.launch.slurm import node


def test_the_other_nodes_wait_for_the_port_the_first_holds(tmp_path):
    found = {}
    waiting = threading.Thread(target=lambda: found.update(one=node.rendezvous(tmp_path, {"SLURM_NODEID": "1"})))
    waiting.start()  # a node whose task starts before the first's
    first = {"SLURM_NODEID": "0", "HOTSWITCH_RDZV_HOST": "localhost"}
    endpoint, held = node.rendezvous(tmp_path, first)
    waiting.join(timeout=60)
    try:
        assert found["one"] == (endpoint, None) and endpoint == f"localhost:{held.getsockname()[1]}"
        with pytest.raises(OSError), socket.socket() as other:
            other.bind(("127.0.0.1", held.getsockname()[1]))  # held, until its torchrun listens on it
        assert held.get_inheritable()  # exec keeps it
        assert [p.name for p in tmp_path.iterdir()] == [node.ENDPOINT_FILE]  # no part left behind
    finally:
        held.close()


def test_a_node_whose_first_never_comes_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(node, "ENDPOINT_WAIT_S", 0.5)
    with pytest.raises(SystemExit, match="the job's first node wrote no rendezvous endpoint into"):
        node.rendezvous(tmp_path, {"SLURM_NODEID": "2"})
