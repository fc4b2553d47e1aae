"""The rank's side of ``%%train --push``: the notebook values the kernel wrote beside the body.

Only this job's kernel writes into its private job folder, so loading is as trusted as running
the body itself.
"""

from __future__ import annotations

import pickle
from pathlib import Path

PUSHED_FILE = "pushed.pkl"  # beside body.py in the job folder


def read_pushed(body_path: str | Path) -> dict:
    """The values pushed beside ``body_path`` (none: empty)."""
    path = Path(body_path).with_name(PUSHED_FILE)
    if not path.is_file():
        return {}
    with path.open("rb") as f:
        return pickle.load(f)
