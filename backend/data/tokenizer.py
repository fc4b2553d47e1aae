"""Byte-level tokenisation: every byte is a token, plus an end-of-document token."""

from __future__ import annotations

EOS = 256
PAD = 0
BYTE_VOCAB = 257


def encode(text: str | bytes) -> list[int]:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return [*data, EOS]


def decode(tokens: list[int]) -> str:
    return bytes(t for t in tokens if t < 256).decode("utf-8", errors="replace")
