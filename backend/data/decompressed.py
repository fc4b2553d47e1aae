"""Compressed data files (gzip, bzip2, xz) read like plain ones: each is decompressed once into
the cache (``$HOTSWITCH_CACHE/decompressed``), by one process of the machine while the ranks
beside it wait, and found there again while the file is unchanged (its path, size and
modification time name the copy). A JSONL line is then read by its byte offset, as in any
JSONL file; a compressed stream could only be read from its start."""

from __future__ import annotations

import fcntl
import hashlib
import lzma
import os
import shutil
import sys
from pathlib import Path

from hotswitch.backend.cache import cache_dir
from hotswitch.backend.data.files import COMPRESSIONS, format_suffix

CHUNK = 1 << 20


def plain_copy(path: Path) -> Path:
    """``path`` itself, or for a compressed file its decompressed copy, made if missing."""
    opener = COMPRESSIONS.get(path.suffix)
    if opener is None:
        return path
    stat = path.stat()
    name = f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}"
    key = hashlib.sha256(name.encode()).hexdigest()[:32]
    folder = cache_dir("decompressed")
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / f"{key}{format_suffix(path)}"
    if copy.exists():
        return copy
    with (folder / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first process decompresses, the others wait for it
        if not copy.exists():
            _decompress(path, opener, copy)
    return copy


def _decompress(path: Path, opener, copy: Path) -> None:
    """Write ``path`` decompressed into ``copy``, whole or not at all (a killed writer leaves a
    part the next one, holding the lock, overwrites)."""
    print(f"[hotswitch] decompressing {path} once into {copy.parent}", file=sys.stderr, flush=True)
    part = copy.with_name(copy.name + ".part")
    try:
        with opener(path, "rb") as source, part.open("wb") as target:
            shutil.copyfileobj(source, target, CHUNK)
    except (OSError, EOFError, lzma.LZMAError) as error:  # BadGzipFile is an OSError
        part.unlink(missing_ok=True)
        why = f"{path} cannot be decompressed into {copy.parent} ({error})"
        raise ValueError(f"{why}; check that the file is whole and the cache has room") from None
    os.replace(part, copy)
