"""Signed, sequenced JSON envelopes: the only thing the channel carries.

A message is three ZMQ frames: a JSON header ``{"sender", "seq"}``, a JSON body, and the hex
HMAC-SHA256 of header and body under the job's key. ``MessageVerifier.open`` returns the body
only if the signature matches, the sequence number is newer than the last one accepted from
that sender (so a captured message cannot be replayed), the frames fit the size limit and
both are JSON objects. Nothing is ever unpickled or executed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024


def new_key() -> bytes:
    """A fresh random 32-byte job key."""
    return secrets.token_bytes(32)


def _signature(key: bytes, header: bytes, body: bytes) -> bytes:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    mac.update(header)
    mac.update(body)
    return mac.hexdigest().encode()


class MessageSigner:
    """Signs messages from one sender, numbering them ``first_seq`` + 1, + 2, ..."""

    def __init__(self, key: bytes, sender: str, first_seq: int = 0):
        self._key = key
        self._sender = sender
        self._seq = first_seq

    @property
    def seq(self) -> int:
        """The sequence number of the latest message sealed."""
        return self._seq

    def seal(self, body: Mapping[str, Any]) -> list[bytes]:
        """The three frames of ``body``; raises TypeError if ``body`` is not JSON-able."""
        self._seq += 1
        header = json.dumps({"sender": self._sender, "seq": self._seq}).encode()
        payload = json.dumps(body, allow_nan=True).encode()
        return [header, payload, _signature(self._key, header, payload)]


@dataclass
class ChannelStats:
    """How many messages were accepted, and how many were dropped for each reason."""

    accepted: int = 0
    unsigned: int = 0
    forged: int = 0
    replayed: int = 0
    oversized: int = 0
    malformed: int = 0

    @property
    def dropped(self) -> int:
        return self.unsigned + self.forged + self.replayed + self.oversized + self.malformed


@dataclass
class MessageVerifier:
    """Checks envelopes under one key; counts every drop in ``stats``."""

    key: bytes
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    stats: ChannelStats = field(default_factory=ChannelStats)
    _last_seq: dict = field(default_factory=dict)

    def last_seq(self, sender: str) -> int:
        """The sequence number of the newest message accepted from ``sender`` (0: none yet)."""
        return self._last_seq.get(sender, 0)

    def open(self, frames: list[bytes]) -> tuple[str, dict] | None:
        """``(sender, body)`` of a valid message, or None (and a count in ``stats``) if dropped."""
        if sum(len(f) for f in frames) > self.max_bytes:
            self.stats.oversized += 1
            return None
        if len(frames) != 3:
            self.stats.unsigned += 1
            return None
        header, payload, signature = frames
        if not hmac.compare_digest(signature, _signature(self.key, header, payload)):
            self.stats.forged += 1
            return None
        try:
            head = json.loads(header)
            body = json.loads(payload)
            sender, seq = str(head["sender"]), int(head["seq"])
        except (ValueError, KeyError, TypeError):
            self.stats.malformed += 1
            return None
        if not isinstance(body, dict):
            self.stats.malformed += 1
            return None
        if seq <= self._last_seq.get(sender, 0):
            self.stats.replayed += 1
            return None
        self._last_seq[sender] = seq
        self.stats.accepted += 1
        return sender, body
