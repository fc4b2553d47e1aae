"""``%%train --push a,b``: notebook values handed to the body on every rank.

The kernel pickles the named values of the user's namespace into the job's own folder (readable
by the owner only, beside the body it writes); each rank loads them into the body's namespace
before running it (``kernel.worker.pushed``).
"""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

from IPython.core.error import UsageError

from hotswitch.kernel.worker.pushed import PUSHED_FILE

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED = ("job", "torch", "hotswitch")  # names the body's namespace already binds


def push_names(text: str) -> list[str]:
    """The variable names of ``--push a,b``, checked."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError("--push takes variable names separated by commas, like --push lr,data_files")
    for name in names:
        if not _NAME.match(name):
            raise UsageError(f"--push: {name!r} is not a variable name")
        if name in RESERVED:
            raise UsageError(f"--push: {name!r} is bound in the body already ({', '.join(RESERVED)}); rename it")
    return names


def pushed_values(namespace: dict, names: list[str]) -> bytes:
    """``names`` from ``namespace``, pickled; raises UsageError naming a variable that is not
    defined or cannot be pickled (before anything is written or launched)."""
    missing = [n for n in names if n not in namespace]
    if missing:
        raise UsageError(f"--push: {', '.join(map(repr, missing))} not defined in the notebook; run its cell first")
    for name in names:
        value = namespace[name]
        try:
            pickle.dumps(value)
        except Exception as error:
            raise UsageError(
                f"--push: {name!r} ({type(value).__name__}) cannot be sent to the ranks: {error}; "
                "push plain data (numbers, strings, lists, dicts, tensors) and build the rest in the body"
            ) from None
    return pickle.dumps({n: namespace[n] for n in names})


def write_pushed(data: bytes, job_dir: Path) -> Path:
    """The pickled values into ``job_dir``, readable by the owner only."""
    path = job_dir / PUSHED_FILE
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as f:
        f.write(data)
    return path
