"""A rendezvous port held from the moment it is chosen until the store listens on it.

A port probed free and handed to torchrun is only bound seconds later, once its agent has
imported torch; on a busy machine another process can take it in between, and the job fails to
start (or, worse, its nodes meet someone else's server). Here the process that chooses the port
keeps it bound and listening, and the node's torchrun agent inherits that very socket
(``HOTSWITCH_RDZV_SOCKET=FD:PORT``): ``loopback_agent`` hands it to the rendezvous store as its
listening socket, so the port is never free between the two.
"""

from __future__ import annotations

import socket

from hotswitch.kernel.launch.local.loopback_agent import LOOPBACK, RDZV_SOCKET, handed_socket


def reserve(host: str) -> socket.socket:
    """A socket listening at a port free now, on 127.0.0.1 for a loopback ``host``, else on every
    interface (where torchrun's store listens); a child process may inherit it."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1" if host in LOOPBACK else "", 0))
    listener.listen(512)
    listener.set_inheritable(True)
    return listener


def handed_over(listener: socket.socket) -> dict[str, str]:
    """The environment that tells a node's agent to listen on ``listener`` for its rendezvous."""
    return {RDZV_SOCKET: f"{listener.fileno()}:{listener.getsockname()[1]}"}


def handed_fds(env: dict[str, str]) -> tuple[int, ...]:
    """The descriptors ``env`` hands an agent (for ``Popen``'s ``pass_fds``)."""
    return tuple(handed_socket(env).values())
