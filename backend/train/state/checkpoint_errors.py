"""What went wrong in a checkpoint write or read, said so a person can act on it.

``torch.distributed.checkpoint`` gathers every rank's failure into one ``CheckpointException``
whose message is only ``CheckpointException ranks:dict_keys([0, 1])``; a truncated shard reads
as a bare ``EOFError``. ``explain`` turns that into one line per distinct cause, naming the
ranks, the file and the errno, and for a read, every shard file shorter than the checkpoint's
own metadata says it must be ("expected N bytes, found M").
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.distributed.checkpoint.api import CheckpointException


def _cause(error: BaseException) -> str:
    if isinstance(error, OSError) and error.errno is not None:
        name = errno.errorcode.get(error.errno, str(error.errno))
        where = f": {error.filename}" if error.filename else ""
        return f"{error.strerror} ({name}){where}"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def rank_causes(error: CheckpointException) -> str:
    """Each distinct cause in ``error`` once, with the ranks it happened on."""
    by_cause: dict[str, list[int]] = {}
    for rank, (exc, _trace) in sorted(error.failures.items()):
        by_cause.setdefault(_cause(exc), []).append(rank)
    return "; ".join(f"{_ranks(ranks)}: {cause}" for cause, ranks in by_cause.items())


def short_shards(path: str | Path) -> list[str]:
    """Every shard file of the checkpoint at ``path`` that is missing or shorter than its
    metadata requires; empty when the metadata cannot be read or every shard is whole."""
    from torch.distributed.checkpoint import FileSystemReader

    try:
        metadata = FileSystemReader(str(path)).read_metadata()
    except Exception:  # the metadata itself is the problem: the rank causes say so
        return []
    needed: dict[str, int] = {}
    for info in metadata.storage_data.values():
        needed[info.relative_path] = max(needed.get(info.relative_path, 0), info.offset + info.length)
    short = []
    for name, size in sorted(needed.items()):
        file = Path(path) / name
        found = file.stat().st_size if file.is_file() else None
        if found is None:
            short.append(f"{file} is missing (expected {size} bytes)")
        elif found < size:
            short.append(f"{file}: expected {size} bytes, found {found} (truncated)")
    return short


def explain(error: CheckpointException, action: str, path: str | Path) -> str:
    """One message for a failed ``action`` ("writing" or "reading") of the checkpoint at ``path``."""
    short = short_shards(path) if action == "reading" else []
    if short:
        return f"{action} checkpoint {path} failed: it is damaged: {'; '.join(short)}; give another checkpoint"
    return f"{action} checkpoint {path} failed: {rank_causes(error)}"
