"""A JSON file holding one array of records (as Alpaca's ``alpaca_data.json`` ships, and as
Hugging Face ``datasets`` reads): converted once per machine into JSONL in the cache
(``$HOTSWITCH_CACHE/records``, ``backend.data.derived``), one record a line, then read as any
JSONL file is, a record by its byte offset.

The conversion holds the file's text in memory, never its records: each is decoded, written
out and dropped in turn (a million records took as many Python objects when read whole)."""

from __future__ import annotations

import json
import lzma
import sys
from pathlib import Path

from hotswitch.backend.data.decompressed import plain_copy
from hotswitch.backend.data.derived import derived
from hotswitch.backend.data.files import JSONL_SUFFIXES, format_suffix, open_plain

SNIFF_BYTES = 4096


def holds_array(path: Path) -> bool:
    """Whether ``path`` (a JSON or JSONL file, compressed or not) begins a JSON array."""
    if format_suffix(path) not in JSONL_SUFFIXES:
        return False
    try:
        with open_plain(path) as f:
            return f.read(SNIFF_BYTES).lstrip().startswith(b"[")
    except (OSError, EOFError, lzma.LZMAError):  # damaged: reading it says so (``plain_copy``)
        return False


def records_copy(path: Path) -> Path:
    """``path``'s JSONL copy (one record a line), made if missing."""

    def convert(part: Path) -> None:
        print(f"[hotswitch] writing {path}'s JSON array once as JSONL into {part.parent}", file=sys.stderr, flush=True)
        text = plain_copy(path).read_text(encoding="utf-8", errors="surrogateescape")
        with part.open("w", encoding="utf-8", errors="surrogateescape") as out:
            for record in array_records(text, str(path)):
                out.write(json.dumps(record, ensure_ascii=False) + "\n")

    return derived("records", path, ".jsonl", convert)


def array_records(text: str, name: str):
    """The records of the JSON array ``text`` (the file ``name``), decoded one at a time."""
    decoder = json.JSONDecoder()
    at = _skip(text, text.index("[") + 1)
    try:
        while text[at : at + 1] != "]":
            record, at = decoder.raw_decode(text, at)
            yield record
            at = _skip(text, at)
            if text[at : at + 1] == ",":
                at = _skip(text, at + 1)
            elif text[at : at + 1] != "]":
                raise json.JSONDecodeError("expected ',' or ']' after a record", text, at)
        if text[at + 1 :].strip():
            raise json.JSONDecodeError("more after the array's end", text, at + 1)
    except json.JSONDecodeError as error:
        why = f"{error.msg} at line {error.lineno} column {error.colno}"
        raise ValueError(f"{name} is not one whole JSON array ({why}); fix the file") from None


def _skip(text: str, at: int) -> int:
    """The first position from ``at`` that is not JSON whitespace."""
    while at < len(text) and text[at] in " \t\n\r":
        at += 1
    return at
