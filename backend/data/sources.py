"""Where documents come from: the Python standard library's sources, the user's files,
or synthetic length distributions for simulation."""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import json
import os
import random
import re
import sysconfig
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from hotswitch.backend.data.files import JSONL_SUFFIXES, format_suffix
from hotswitch.backend.data.lengths import SYNTHETIC
from hotswitch.backend.data.tokenizer import BYTES, Tokenizer, parse_tokenizer

BPE_TRAINING_BYTES = 128 << 20  # a BPE learns from the first documents up to this much text


class DocumentSource:
    """An indexable set of documents, each read and tokenised on demand (byte-level unless
    ``use_tokenizer`` says otherwise)."""

    tokenizer: Tokenizer = BYTES

    def __len__(self) -> int:
        raise NotImplementedError

    def text(self, index: int) -> bytes:
        raise NotImplementedError

    def tokens(self, index: int) -> list[int]:
        return self.tokenizer.encode(self.text(index))

    def document(self, index: int) -> tuple[list[int], int]:
        """Document ``index``'s tokens, and how many of them lead it as a prompt that does not
        train (``PromptedDocuments``; none here)."""
        return self.tokens(index), 0

    def describe(self) -> str:
        raise NotImplementedError

    def fingerprint(self) -> str:
        """A digest of these documents as they train: their count and a few of them as tokens
        (the first, the last, two between), so another tokenizer, other files or a changed
        count give another; not where the files lie, so a run moved to another machine keeps it."""
        digest = hashlib.sha256(str(len(self)).encode())
        for index in sorted({0, len(self) // 3, 2 * len(self) // 3, len(self) - 1} - {-1}):
            digest.update(np.asarray(self.tokens(index), dtype=np.int64).tobytes())
        return digest.hexdigest()[:16]

    def tokenised_as(self, other: DocumentSource) -> DocumentSource:
        """These documents tokenised as ``other``'s are: its tokenizer (a BPE trained on its
        documents included), as a validation split must be to mean the same ids."""
        self.tokenizer = other.tokenizer
        return self

    def use_tokenizer(self, spec: str) -> DocumentSource:
        """Tokenise with ``spec``: 'byte'; 'bpe:<size>', a BPE trained on these documents
        (cached); or 'hf:<folder>', a Hugging Face ``tokenizer.json``."""
        from hotswitch.backend.data.bpe import bpe_for

        if spec.startswith("hf:"):
            from hotswitch.backend.data.hf_data import HFTokenizer

            self.tokenizer = HFTokenizer(spec[3:])
            return self
        size = parse_tokenizer(spec)
        if size is None:
            self.tokenizer = BYTES
            return self
        texts, total = [], 0
        for index in range(len(self)):
            if total >= BPE_TRAINING_BYTES:
                break
            texts.append(self.text(index))
            total += len(texts[-1])
        self.tokenizer = bpe_for(texts, size)
        return self


class FileDocuments(DocumentSource):
    """Text files (one document each) and JSONL files (one document per line, its
    ``text`` field), either compressed (``backend.data.files``). A JSONL line is read by its
    byte offset (``line_index``), so a corpus larger than memory costs 8 bytes a document."""

    def __init__(self, paths: Sequence[str | Path], text_key: str = "text"):
        from hotswitch.backend.data.decompressed import plain_copy
        from hotswitch.backend.data.line_index import line_offsets

        self.text_key = text_key
        self._files: list[tuple[Path, Path, np.ndarray | None]] = []  # (given, read, JSONL offsets)
        for path in sorted(Path(p) for p in paths):
            if not path.is_file():
                raise ValueError(f"{path} is not a file; give text or JSONL files")
            plain = plain_copy(path)
            offsets = line_offsets(plain) if format_suffix(path) in JSONL_SUFFIXES else None
            self._files.append((path, plain, offsets))
        self._starts = _starts(1 if offsets is None else len(offsets) for _, _, offsets in self._files)
        if not self._starts[-1]:
            raise ValueError(f"no documents in {[str(p) for p in paths]}; the dataset is empty")

    def __len__(self) -> int:
        return self._starts[-1]

    def text(self, index: int) -> bytes:
        part, within = _locate(self._starts, index)
        path, plain, offsets = self._files[part]
        if offsets is None:
            return plain.read_bytes()
        offset = int(offsets[within])
        with plain.open("rb") as f:
            f.seek(offset)
            line = f.readline()
        try:
            record = json.loads(line)
        except ValueError as error:  # JSONDecodeError, or bytes that are not UTF-8
            why = f"{error.msg} at column {error.colno}" if isinstance(error, json.JSONDecodeError) else str(error)
            raise ValueError(f"{_where(path, plain, offset)} is not JSON ({why}); fix or remove that line") from None
        text = record.get(self.text_key) if isinstance(record, dict) else None
        if not isinstance(text, str):
            raise ValueError(_record_problem(record, self.text_key, _where(path, plain, offset)))
        return text.encode("utf-8")

    def describe(self) -> str:
        return f"{len(self)} documents from {len(self._files)} file(s)"


def _where(given: Path, plain: Path, offset: int) -> str:
    """The line of ``plain`` that starts at byte ``offset``, as a reader counts (from 1), named
    by the file the user gave (``plain`` may be its decompressed copy)."""
    with plain.open("rb") as f:
        line = f.read(offset).count(b"\n") + 1
    return f"{given} line {line}"


def _record_problem(record, key: str, where: str) -> str:
    """Why a JSONL record holds no text under ``key``, naming its line (``where``)."""
    if not isinstance(record, dict):
        return f"{where} is a JSON {_json_kind(record)}, not an object with a {key!r} field"
    if key not in record:
        return f"{where} has no {key!r} field (it has {sorted(record)}); set text_field"
    return f"{where}: its {key!r} is a JSON {_json_kind(record[key])}, not a string"


def _json_kind(value) -> str:
    kinds = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return kinds.get(type(value), "null")


class JoinedDocuments(DocumentSource):
    """Several sources as one, their documents one after another (a user's JSONL files beside
    Parquet ones, say); tokenised as ``use_tokenizer`` says, as any source is."""

    def __init__(self, parts: Sequence[DocumentSource]):
        self.parts = list(parts)
        self.starts = _starts(len(part) for part in self.parts)

    def __len__(self) -> int:
        return self.starts[-1]

    def text(self, index: int) -> bytes:
        part, within = _locate(self.starts, index)
        return self.parts[part].text(within)

    def describe(self) -> str:
        return "; ".join(part.describe() for part in self.parts)


def _starts(counts: Iterable[int]) -> list[int]:
    """Where each of several parts' documents start, counted over all of them; the total last."""
    return [0, *itertools.accumulate(counts)]


def _locate(starts: list[int], index: int) -> tuple[int, int]:
    """(the part, the index within it) of document ``index`` of parts that start at ``starts``."""
    if not 0 <= index < starts[-1]:
        raise IndexError(f"document {index} of {starts[-1]}")
    part = bisect.bisect_right(starts, index) - 1
    return part, index - starts[part]


_TOP_LEVEL = re.compile(rb"^(?:def |class |async def |@)", re.MULTILINE)


class CodeUnits(DocumentSource):
    """Python sources cut into top-level units (a module header, each top-level function or
    class with its decorators): real code whose lengths have GitHub-like long tails."""

    def __init__(self, paths: Sequence[str | Path]):
        self._units: list[tuple[Path, int, int]] = []
        for path in sorted(Path(p) for p in paths):
            stat = path.stat()
            self._units.extend((path, a, b) for a, b in _code_spans(path, stat.st_mtime_ns, stat.st_size))
        if not self._units:
            raise ValueError(f"no code in {len(paths)} file(s); the dataset is empty")

    def __len__(self) -> int:
        return len(self._units)

    def text(self, index: int) -> bytes:
        path, start, end = self._units[index]
        with path.open("rb") as f:
            f.seek(start)
            return f.read(end - start)

    def describe(self) -> str:
        return f"{len(self)} top-level code units from {len({p for p, _, _ in self._units})} files"


@functools.lru_cache(maxsize=4096)
def _code_spans(path: Path, mtime_ns: int, size: int) -> tuple[tuple[int, int], ...]:
    """The (start, end) byte spans of a file's top-level units, read once per version of the
    file (every rank and job of a process shares them)."""
    data = path.read_bytes()
    starts = [0]
    for match in _TOP_LEVEL.finditer(data):
        if match.start() > starts[-1] and not _decorated(data, match.start()):
            starts.append(match.start())
    ends = [*starts[1:], len(data)]
    return tuple((a, b) for a, b in zip(starts, ends) if data[a:b].strip())


def _decorated(data: bytes, start: int) -> bool:
    """A def/class right under a decorator line belongs to the decorator's unit."""
    previous = data.rfind(b"\n", 0, max(start - 1, 0))
    return data[previous + 1 : start].startswith(b"@")


STDLIB_SKIPPED = {"site-packages", "dist-packages", "test", "tests", "idlelib", "turtledemo"}


def stdlib_documents() -> CodeUnits:
    """The standard library's own Python sources (no tests, no site-packages), present
    wherever Python is."""
    return CodeUnits(_stdlib_files())


@functools.cache
def _stdlib_files() -> tuple[Path, ...]:
    """The walk skips the folders it leaves out instead of filtering after them: a Python whose
    site-packages lies inside the standard library's folder took 0.5-2 s per call to list."""
    files: list[Path] = []
    for folder, subfolders, names in os.walk(sysconfig.get_paths()["stdlib"]):
        subfolders[:] = sorted(name for name in subfolders if name not in STDLIB_SKIPPED)
        files.extend(Path(folder, name) for name in names if name.endswith(".py"))
    return tuple(sorted(files))


class SyntheticDocuments(DocumentSource):
    """Documents of random bytes whose lengths follow ``SYNTHETIC[shape]`` (for simulation:
    the lengths matter, the contents do not)."""

    def __init__(self, shape: str, count: int = 100_000, seed: int = 0, vocab: int = 256):
        if shape not in SYNTHETIC:
            raise ValueError(f"unknown length distribution {shape!r}; choose one of {', '.join(SYNTHETIC)}")
        self.shape, self.count, self.seed, self.vocab = shape, count, seed, vocab

    def __len__(self) -> int:
        return self.count

    def length(self, index: int) -> int:
        u = random.Random(self.seed * 7919 + index).random()
        return max(2, int(SYNTHETIC[self.shape].quantile(min(max(u, 1e-12), 1 - 1e-12))))

    def text(self, index: int) -> bytes:
        raise ValueError("synthetic documents are token ids, not text: they take no tokenizer")

    def tokens(self, index: int) -> list[int]:
        rng = random.Random(self.seed * 104729 + index)
        return [rng.randrange(self.vocab) for _ in range(self.length(index))]

    def describe(self) -> str:
        return f"{self.count} synthetic {self.shape}-like documents"
