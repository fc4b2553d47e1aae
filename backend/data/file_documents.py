"""The user's own files as documents: a text file is one, a JSONL file holds one per line
(a field of each record), either compressed (``backend.data.files``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from hotswitch.backend.data.chat_template import check_messages
from hotswitch.backend.data.files import JSONL_SUFFIXES, format_suffix
from hotswitch.backend.data.sources import DocumentSource, locate, part_starts


class FileDocuments(DocumentSource):
    """Text files (one document each) and JSONL files (one document per line, its
    ``text`` field), either compressed (``backend.data.files``). A JSONL line is read by its
    byte offset (``line_index``), so a corpus larger than memory costs 8 bytes a document."""

    def __init__(self, paths: Sequence[str | Path], text_key: str = "text", setting: str = "text_field"):
        from hotswitch.backend.data.decompressed import plain_copy
        from hotswitch.backend.data.json_array import holds_array, records_copy
        from hotswitch.backend.data.line_index import line_offsets

        self.text_key = text_key  # the setting named in an error: text_field, prompt_field...
        self.setting = setting
        self._files: list[tuple[Path, Path, np.ndarray | None]] = []  # (given, read, JSONL offsets)
        self._arrays: set[int] = set()  # the files that hold a JSON array, read from their JSONL copies
        for path in sorted(Path(p) for p in paths):
            if not path.is_file():
                raise ValueError(f"{path} is not a file; give text or JSONL files")
            array = holds_array(path)
            if array:
                self._arrays.add(len(self._files))
            plain = records_copy(path) if array else plain_copy(path)
            offsets = line_offsets(plain) if format_suffix(path) in JSONL_SUFFIXES else None
            self._files.append((path, plain, offsets))
        self._starts = part_starts(1 if offsets is None else len(offsets) for _, _, offsets in self._files)
        if not self._starts[-1]:
            raise ValueError(f"no documents in {[str(p) for p in paths]}; the dataset is empty")

    def __len__(self) -> int:
        return self._starts[-1]

    def text(self, index: int) -> bytes:
        part, within = locate(self._starts, index)
        _, plain, offsets = self._files[part]
        if offsets is None:
            return plain.read_bytes()
        record, where = self._record(part, within)
        text = record.get(self.text_key) if isinstance(record, dict) else None
        if text is None and isinstance(record, dict) and self.text_key in record:
            return b""  # a null, as a dataset's null row: an empty document
        if not isinstance(text, str):
            raise ValueError(_record_problem(record, self.text_key, where(), self.setting))
        return text.encode("utf-8")

    def conversation(self, index: int) -> list[dict]:
        """Record ``index``'s messages under ``text_key`` (``ChatDocuments``)."""
        part, within = locate(self._starts, index)
        if self._files[part][2] is None:
            raise ValueError(f"{self._files[part][0]} is a text file, one document with no fields; give JSONL records")
        record, where = self._record(part, within)
        if not isinstance(record, dict) or self.text_key not in record:
            raise ValueError(_record_problem(record, self.text_key, where(), self.setting))
        return check_messages(record[self.text_key], where())

    def _record(self, part: int, within: int) -> tuple[object, Callable[[], str]]:
        """The JSON record on line ``within`` of JSONL file ``part``, and where it lies (said
        only for an error: counting lines reads the file up to it)."""
        path, plain, offsets = self._files[part]
        offset = int(offsets[within])  # type: ignore[index]  # a JSONL file's
        with plain.open("rb") as f:
            f.seek(offset)
            line = f.readline()
        unit = "record" if part in self._arrays else "line"
        try:
            return json.loads(line), lambda: _where(path, plain, offset, unit)
        except ValueError as error:  # JSONDecodeError, or bytes that are not UTF-8
            why = f"{error.msg} at column {error.colno}" if isinstance(error, json.JSONDecodeError) else str(error)
            where = _where(path, plain, offset, unit)
            raise ValueError(f"{where} is not JSON ({why}); fix or remove that {unit}") from None

    def describe(self) -> str:
        return f"{len(self)} documents from {len(self._files)} file(s)"


def _where(given: Path, plain: Path, offset: int, unit: str = "line") -> str:
    """The line of ``plain`` that starts at byte ``offset``, as a reader counts (from 1), named
    by the file the user gave (``plain`` may be its decompressed copy, or the JSONL copy of its
    array: then the line is the array's ``unit`` "record")."""
    with plain.open("rb") as f:
        line = f.read(offset).count(b"\n") + 1
    return f"{given} {unit} {line}"


def _record_problem(record, key: str, where: str, setting: str) -> str:
    """Why a JSONL record holds no text under ``key`` (the ``setting`` setting's field), naming its
    line (``where``)."""
    if not isinstance(record, dict):
        return f"{where} is a JSON {_json_kind(record)}, not an object with a {key!r} field"
    if key not in record:
        return f"{where} has no {key!r} field (it has {sorted(record)}); set {setting}"
    if isinstance(record[key], list):
        return f"{where}: its {key!r} is a JSON array, not a string; a conversation's messages? set chat_field"
    return f"{where}: its {key!r} is a JSON {_json_kind(record[key])}, not a string"


def _json_kind(value) -> str:
    kinds = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return kinds.get(type(value), "null")
