"""Tokenisers: byte-level (every byte a token, no training) or a byte-level BPE trained on
the training documents themselves (``"bpe:<vocabulary size>"``). Every one pads with id 0
(padded targets are ignored) and ends each document with its own end-of-document token."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hotswitch.backend.data.hf_tokenizer_files import TokenIds, byte_level_json, write_tokenizer

if TYPE_CHECKING:
    from hotswitch.backend.data.chat_template import ChatTemplate

PAD = 0
IGNORE = -100  # a target the loss skips (padding): PyTorch's cross-entropy default ignore_index


class Tokenizer(Protocol):
    name: str
    vocab_size: int

    @property
    def chat_template(self) -> ChatTemplate | None:
        """How a conversation is written out as text (a Hugging Face tokenizer's); None: it knows none."""
        ...

    def encode(self, text: str | bytes) -> list[int]: ...

    def encode_prompted(self, prompt: str | bytes, completion: str | bytes) -> tuple[list[int], int]:
        """A prompt and its completion as one document's ids (begun as ``encode`` begins a
        document, the prompt's text then the completion's with nothing between, the
        end-of-document id last), and how many lead them as the prompt's."""
        ...

    def decode(self, tokens: list[int]) -> str: ...

    def save_hf(self, directory: Path) -> TokenIds:
        """Write this tokenizer into ``directory`` as Hugging Face tokenizer files (an
        exported checkpoint's); returns its special tokens' ids."""
        ...


class ByteTokenizer:
    name = "byte"
    vocab_size = 257
    eos = 256
    chat_template = None

    def encode(self, text: str | bytes) -> list[int]:
        return [*as_bytes(text), self.eos]

    def encode_prompted(self, prompt: str | bytes, completion: str | bytes) -> tuple[list[int], int]:
        first = as_bytes(prompt)
        return [*first, *as_bytes(completion), self.eos], len(first)

    def decode(self, tokens: list[int]) -> str:
        return bytes(t for t in tokens if t < 256).decode("utf-8", errors="replace")

    def save_hf(self, directory: Path) -> TokenIds:
        # no pad token: padding's id 0 is also the byte 0, and padded targets never train
        return write_tokenizer(directory, byte_level_json("<eos>"), eos="<eos>", pad=None)


def as_bytes(text: str | bytes) -> bytes:
    """``text`` as UTF-8 bytes."""
    return text.encode("utf-8") if isinstance(text, str) else text


def as_text(text: str | bytes) -> str:
    """``text`` as a string, bytes that are not UTF-8 replaced (U+FFFD)."""
    return text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text


BYTES = ByteTokenizer()


def parse_tokenizer(spec: str) -> int | None:
    """The BPE vocabulary size ``spec`` asks for; None for byte-level."""
    if spec == "byte":
        return None
    kind, _, size = spec.partition(":")
    if kind != "bpe" or not size.isdigit() or int(size) < 260:
        raise ValueError(
            f"unknown tokenizer {spec!r}: give 'byte', 'bpe:<vocabulary size of at least 260>' or 'hf:DIR' "
            "(a Hugging Face tokenizer's folder)"
        )
    return int(size)
