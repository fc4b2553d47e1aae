"""Files derived from a user's data file and kept in the cache (``$HOTSWITCH_CACHE/KIND``): a
decompressed copy, an index of line offsets. Each is named by its source's path, size and
modification time, so it is found again while the source is unchanged; one process of the
machine makes it while the ranks beside it wait on a lock, and it appears whole or not at all
(a killed maker leaves a part that the next one, holding the lock, overwrites). Copies of a
source's earlier versions stay (a run may still read one); the folder is safe to delete while no
run reads it."""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from hotswitch.backend.cache import cache_dir


class CacheUnwritable(ValueError):
    """The cache folder cannot be made or written."""


def derived(kind: str, source: Path, suffix: str, make: Callable[[Path], None]) -> Path:
    """The cached file of ``kind`` derived from ``source``, made by ``make(path)`` if missing."""
    stat = source.stat()
    name = f"{source.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}"
    key = hashlib.sha256(name.encode()).hexdigest()[:32]
    folder = cache_dir(kind)
    target = folder / f"{key}{suffix}"
    if target.exists():
        return target
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = (folder / f"{key}.lock").open("w")
    except OSError as error:
        raise CacheUnwritable(
            f"the cache {folder} cannot be written ({error}); set HOTSWITCH_CACHE to a folder you can write"
        ) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first process makes it, the others wait for it
        if not target.exists():
            part = target.with_name(target.name + ".part")
            try:
                make(part)
            except BaseException:
                part.unlink(missing_ok=True)
                raise
            os.replace(part, target)
    return target
