"""A job's run folder: what outlives the kernel's memory. Every event the kernel receives is
appended to ``events.jsonl`` as it arrives (``Dashboard.replay(folder)`` redraws the run), the
body is kept beside it, and ``job.json`` says how the job ended.

Run folders live under $HOTSWITCH_RUNS, else ``~/.hotswitch/runs``, readable by the owner only.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from hotswitch.backend.train.events import EVENTS_FILE

ENV_RUNS = "HOTSWITCH_RUNS"


def runs_root() -> Path:
    return Path(os.environ.get(ENV_RUNS) or Path.home() / ".hotswitch" / "runs")


def new_run_dir(name: str, root: str | os.PathLike | None = None) -> Path:
    """A fresh folder ``NAME-YYYYmmdd-HHMMSS`` (numbered if taken) under ``root`` or ``runs_root()``."""
    parent = Path(root).expanduser() if root else runs_root()
    parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    stem = f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    for attempt in range(1000):
        folder = parent / (stem if attempt == 0 else f"{stem}-{attempt}")
        try:
            folder.mkdir(mode=0o700)
            return folder
        except FileExistsError:
            continue
    raise FileExistsError(f"no free run folder named {stem}-N under {parent}")


class RunRecord:
    """Records one job into ``folder``: attach it with ``job.on_event(record.write)`` and
    ``job.add_done_callback(record.finish)``."""

    def __init__(self, folder: Path, body: str):
        self.folder = folder
        (folder / "body.py").write_text(body)
        self._lock = threading.Lock()
        self._file = (folder / EVENTS_FILE).open("a", encoding="utf-8")

    def write(self, event: dict) -> None:
        line = json.dumps(event, default=str) + "\n"
        with self._lock:
            if not self._file.closed:
                self._file.write(line)
                self._file.flush()

    def finish(self, job) -> None:
        """Close the events file and write ``job.json`` (name, status, reason, times)."""
        with self._lock:
            self._file.close()
        summary = {
            "name": job.name,
            "status": job.status,
            "exit_reason": job.exit_reason,
            "started_at": job.started_at,
            "ended_at": job.ended_at,
        }
        (self.folder / "job.json").write_text(json.dumps(summary, indent=1) + "\n")
