"""A job channel's secrets, and how they reach the ranks: as a file only its owner can read,
never in the environment or on a command line (both are visible to other local users through
``/proc`` and ``ps``).

Every channel signs its messages with an HMAC key. A channel that leaves loopback is also
encrypted with ZMQ CURVE: the kernel's socket is a CURVE server with its own key pair, and the
ranks connect as CURVE clients with a key pair of their own, knowing the server's public key.
Imports only zmq and the standard library (workers load it).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path

import zmq

from hotswitch.kernel.channel.signing import new_key

SECRET_FILE = "channel.secret"


def leaves_loopback(host: str) -> bool:
    """Whether a channel bound on ``host`` is reachable from other machines."""
    if host == "localhost":
        return False
    try:
        return not ip_address(host).is_loopback
    except ValueError:
        return True  # a host name: assume the network


def write_private(path: Path, data: dict) -> Path:
    """Create ``path`` holding ``data`` as JSON, readable and writable by its owner only
    (refusing to overwrite)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as f:
        json.dump(data, f)
    return path


def read_private(path: str | os.PathLike) -> dict:
    """The JSON in ``path``, refusing a file that others could read or that is not ours."""
    info = os.stat(path)
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise PermissionError(f"{path}: a channel secret must be owned by this user and readable by no one else")
    return json.loads(Path(path).read_text())


@dataclass(frozen=True)
class CurveKeys:
    public: bytes
    secret: bytes

    @classmethod
    def new(cls) -> CurveKeys:
        public, secret = zmq.curve_keypair()
        return cls(public, secret)


@dataclass(frozen=True)
class WorkerSecret:
    """What a rank needs: the HMAC key and, with CURVE, the kernel's public key and its own pair."""

    key: bytes
    server_public: bytes | None = None
    client: CurveKeys | None = None

    def write(self, path: Path) -> Path:
        """Create ``path`` readable and writable by its owner only (refusing to overwrite)."""
        data = {
            "key": self.key.hex(),
            "server_public": self.server_public.decode() if self.server_public else None,
            "client_public": self.client.public.decode() if self.client else None,
            "client_secret": self.client.secret.decode() if self.client else None,
        }
        return write_private(path, data)

    def curve(self) -> tuple[bytes, CurveKeys] | None:
        """The kernel's public key and this rank's key pair, with CURVE; None without."""
        if self.client is None:
            return None
        if self.server_public is None:
            raise ValueError("the worker secret has a CURVE key pair but no server_public key; relaunch the job")
        return self.server_public, self.client

    @classmethod
    def read(cls, path: str | os.PathLike) -> WorkerSecret:
        """The secret in ``path``; refuses a file that others could read or that is not ours."""
        data = read_private(path)
        client = None
        if data["client_public"]:
            client = CurveKeys(data["client_public"].encode(), data["client_secret"].encode())
        server = data["server_public"].encode() if data["server_public"] else None
        return cls(bytes.fromhex(data["key"]), server, client)


@dataclass(frozen=True)
class KernelSecret:
    """The kernel's side: the HMAC key and, with CURVE, the server's key pair."""

    key: bytes
    server: CurveKeys | None = None

    @classmethod
    def new(cls, curve: bool) -> KernelSecret:
        return cls(new_key(), CurveKeys.new() if curve else None)

    def write(self, path: Path) -> Path:
        """Keep the kernel's side in ``path``, readable and writable by its owner only."""
        data = {
            "key": self.key.hex(),
            "public": self.server.public.decode() if self.server else None,
            "secret": self.server.secret.decode() if self.server else None,
        }
        return write_private(path, data)

    @classmethod
    def read(cls, path: str | os.PathLike) -> KernelSecret:
        """The kernel's side kept in ``path``; refuses a file others could read or not ours."""
        data = read_private(path)
        server = CurveKeys(data["public"].encode(), data["secret"].encode()) if data["public"] else None
        return cls(bytes.fromhex(data["key"]), server)

    def for_workers(self) -> WorkerSecret:
        """What the ranks get: never the server's secret key."""
        if self.server is None:
            return WorkerSecret(self.key)
        return WorkerSecret(self.key, self.server.public, CurveKeys.new())
