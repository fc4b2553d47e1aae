"""A job folder's own files (the body, the channel's key, pushed values; no logs), read to be
shipped to a node and written into that node's folder readable by its owner only."""

from __future__ import annotations

import os
from pathlib import Path


def job_files(job_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in job_dir.iterdir() if p.is_file() and not p.name.endswith((".log", ".exit"))}


def write_job_files(folder: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        descriptor = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as f:
            f.write(data)
