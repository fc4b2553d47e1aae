"""torchrun with its stores kept on loopback, its rendezvous on a socket it may inherit:
``python -m hotswitch.kernel.launch.local.loopback_agent -m torch.distributed.run ARGS``.

torchrun's TCPStore servers (the c10d rendezvous store and the store its workers meet in) bind
every interface, whatever host the endpoint names, so a local job would be reachable from the
network. Here every store server whose host is a loopback name listens on a socket bound to
127.0.0.1 (handed to TCPStore as ``master_listen_fd``), and the rendezvous store of a node that
was handed a listening socket (``reserved_port``) listens on that one; then torchrun's own
``main`` runs, its ranks forked from this process (``forked_ranks``) rather than started afresh.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from hotswitch.kernel.launch.local import forked_ranks

LOOPBACK = ("127.0.0.1", "localhost")
ENV_AGENT_EXIT = "HOTSWITCH_AGENT_EXIT"  # where the agent writes its exit status
# "FD:PORT": a socket listening at PORT that this agent inherits for its rendezvous store
# (``reserved_port``: the port was held from the moment it was chosen)
RDZV_SOCKET = "HOTSWITCH_RDZV_SOCKET"


def loopback_listener(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` (0: any free port)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(512)
    return listener


def keep_stores_on_loopback() -> None:
    """Patch the two places torchrun creates TCPStore servers."""
    import torch.distributed as dist
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend, dynamic_rendezvous

    listeners: list[socket.socket] = []  # kept open for the agent's lifetime
    handed = handed_socket(os.environ)
    os.environ.pop(RDZV_SOCKET, None)  # the ranks it starts inherit no such socket to use

    def tcp_store(host_name, port, *args, is_master=False, **kwargs):
        if is_master and port in handed and "master_listen_fd" not in kwargs:
            kwargs["master_listen_fd"] = handed.pop(port)  # once: the rendezvous store's
        elif is_master and host_name in LOOPBACK and "master_listen_fd" not in kwargs:
            listener = loopback_listener(port)
            listeners.append(listener)
            port = listener.getsockname()[1]
            kwargs["master_listen_fd"] = listener.fileno()
        # torch's caller passes the store's other arguments as it names them: forwarded as given
        return dist.TCPStore(host_name, port, *args, is_master=is_master, **kwargs)  # type: ignore[misc]

    # torch names a class here and calls it; the function builds the same store, bound to our socket
    c10d_rendezvous_backend.TCPStore = tcp_store  # type: ignore[misc, assignment]

    def create_server(self, master_addr, master_port):
        return tcp_store(master_addr, master_port, is_master=True, multi_tenant=True)

    # torch's rendezvous has no hook for its store server: the method is replaced, on purpose
    dynamic_rendezvous.DynamicRendezvousHandler._create_tcp_store_server = create_server  # type: ignore[method-assign]


def handed_socket(env) -> dict[int, int]:
    """{port: descriptor} of the listening socket ``env`` hands an agent (``RDZV_SOCKET``), or {}."""
    fd, _, port = env.get(RDZV_SOCKET, "").partition(":")
    return {int(port): int(fd)} if port else {}


TORCHRUN = ["-m", "torch.distributed.run"]


def main() -> None:
    from torch.distributed.run import main as torchrun_main

    if sys.argv[1:3] != TORCHRUN:
        raise SystemExit(f"usage: python -m {__spec__.name} -m torch.distributed.run TORCHRUN_ARGS")
    keep_stores_on_loopback()
    forked_ranks.install()
    status = 1
    try:
        torchrun_main(sys.argv[3:])
        status = 0
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else 1
        raise
    finally:  # a kernel that attaches later cannot wait() for this process: it reads this
        if os.environ.get(ENV_AGENT_EXIT):
            Path(os.environ[ENV_AGENT_EXIT]).write_text(str(status))


if __name__ == "__main__":
    main()
