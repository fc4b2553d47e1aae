"""Where hotswitch keeps what it measured or trained once per machine: ``$HOTSWITCH_CACHE``
or ``~/.cache/hotswitch``, one folder per kind."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(kind: str) -> Path:
    return Path(os.environ.get("HOTSWITCH_CACHE", Path.home() / ".cache" / "hotswitch")) / kind
