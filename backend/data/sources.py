"""Where documents come from: the Python standard library's sources, the user's files,
or synthetic length distributions for simulation."""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import os
import random
import re
import sysconfig
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from hotswitch.backend.data.lengths import SYNTHETIC
from hotswitch.backend.data.tokenizer import BYTES, Tokenizer, parse_tokenizer

BPE_TRAINING_BYTES = 128 << 20  # a BPE learns from the first documents up to this much text
# a document's context: the [start, end) ranges of its tokens that condition what follows but are
# not learnt (a prompt's, a conversation's turns but the assistant's), in order, apart
Context = tuple[tuple[int, int], ...]


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

    def document(self, index: int) -> tuple[list[int], Context]:
        """Document ``index``'s tokens, and which of them are context that does not train
        (``PromptedDocuments``, ``ChatDocuments``; none here)."""
        return self.tokens(index), ()

    def conversation(self, index: int) -> list[dict]:
        """Record ``index``'s messages (``ChatDocuments``), where these documents are records."""
        raise ValueError(f"{self.describe()} hold no conversations; give JSONL, Parquet or Arrow records")

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
        texts = []
        total = 0
        for index in range(len(self)):
            if total >= BPE_TRAINING_BYTES:
                break
            texts.append(self.text(index))
            total += len(texts[-1])
        self.tokenizer = bpe_for(texts, size)
        return self


class JoinedDocuments(DocumentSource):
    """Several sources as one, their documents one after another (a user's JSONL files beside
    Parquet ones, say); tokenised as ``use_tokenizer`` says, as any source is."""

    def __init__(self, parts: Sequence[DocumentSource]):
        self.parts = list(parts)
        self.starts = part_starts(len(part) for part in self.parts)

    def __len__(self) -> int:
        return self.starts[-1]

    def text(self, index: int) -> bytes:
        part, within = locate(self.starts, index)
        return self.parts[part].text(within)

    def conversation(self, index: int) -> list[dict]:
        part, within = locate(self.starts, index)
        return self.parts[part].conversation(within)

    def describe(self) -> str:
        return "; ".join(part.describe() for part in self.parts)


def part_starts(counts: Iterable[int]) -> list[int]:
    """Where each of several parts' documents start, counted over all of them; the total last."""
    return [0, *itertools.accumulate(counts)]


def locate(starts: list[int], index: int) -> tuple[int, int]:
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
        self.shape = shape
        self.count = count
        self.seed = seed
        self.vocab = vocab

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
