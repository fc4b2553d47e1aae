"""Compressed data files (gzip, bzip2, xz) read like plain ones: each is decompressed once per
machine into the cache (``$HOTSWITCH_CACHE/decompressed``, ``backend.data.derived``). A JSONL
line is then read by its byte offset, as in any JSONL file; a compressed stream could only be
read from its start."""

from __future__ import annotations

import lzma
import shutil
import sys
from pathlib import Path

from hotswitch.backend.data.derived import derived
from hotswitch.backend.data.files import COMPRESSIONS, format_suffix

CHUNK = 1 << 20


def plain_copy(path: Path) -> Path:
    """``path`` itself, or for a compressed file its decompressed copy, made if missing."""
    opener = COMPRESSIONS.get(path.suffix)
    if opener is None:
        return path

    def decompress(part: Path) -> None:
        print(f"[hotswitch] decompressing {path} once into {part.parent}", file=sys.stderr, flush=True)
        try:
            with opener(path, "rb") as source, part.open("wb") as target:
                shutil.copyfileobj(source, target, CHUNK)
        except (OSError, EOFError, lzma.LZMAError) as error:  # BadGzipFile is an OSError
            why = f"{path} cannot be decompressed into {part.parent} ({error})"
            raise ValueError(f"{why}; check that the file is whole and the cache has room") from None

    return derived("decompressed", path, format_suffix(path), decompress)
