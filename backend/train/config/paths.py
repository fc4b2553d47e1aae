"""Where a run's relative paths resolve: the notebook's folder, which every launcher passes the
ranks in $HOTSWITCH_NOTEBOOK_DIR (the ranks themselves run in a job folder that goes away with the
kernel), else the working directory. Standard library only: the kernel imports it to set it."""

from __future__ import annotations

import os
from pathlib import Path

ENV_NOTEBOOK_DIR = "HOTSWITCH_NOTEBOOK_DIR"


def notebook_dir() -> Path:
    """Where relative paths of a run resolve: $HOTSWITCH_NOTEBOOK_DIR, else the working directory."""
    return Path(os.environ.get(ENV_NOTEBOOK_DIR) or os.getcwd())


def resolve(path: str | os.PathLike) -> Path:
    """``path`` made absolute against ``notebook_dir()``."""
    return (notebook_dir() / Path(path).expanduser()).resolve()


def unwritable(path: str | os.PathLike) -> str | None:
    """Why no folder can be made at ``path`` (its nearest existing folder is not one, or
    refuses a new folder: root may not write ``/proc``, permissions alone do not say); None
    where one can. A probe folder is made there and removed."""
    import tempfile

    parent = Path(path).expanduser()
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is not a folder"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".hotswitch-probe-", dir=parent))
    except OSError as error:
        return f"{parent} is not writable ({error.strerror or error})"
    return None
