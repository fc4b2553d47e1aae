"""A job's run folder: what outlives the kernel's memory. Every event the kernel receives is
appended to ``events.jsonl`` as it arrives (``Dashboard.replay(folder)`` redraws the run), the
body is kept beside it, each rank tees its output into ``logs/rank-N.log`` (the launch's
``log_dir``), and ``job.json`` holds the launcher, the handle and the spec from the start, and
how the job ended once it has.

Run folders live under $HOTSWITCH_RUNS, else ``~/.hotswitch/runs``, readable by the owner only.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from hotswitch.backend.train.loop.events import EVENTS_FILE

ENV_RUNS = "HOTSWITCH_RUNS"
KERNEL_SECRET_FILE = "kernel.secret"  # a detached job's channel secret, the kernel's side (owner-only)


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
        self._summary: dict = {}
        self._file = (folder / EVENTS_FILE).open("a", encoding="utf-8")

    def write(self, event: dict) -> None:
        line = json.dumps(event, default=str) + "\n"
        with self._lock:
            if not self._file.closed:
                self._file.write(line)
                self._file.flush()

    def started(self, job) -> None:
        """Write ``job.json`` as the job starts: its name, launcher, handle and spec (without
        its environment, which may hold values the user passed with --env)."""
        self._summary = {
            "name": job.name,
            "launcher": job.launcher.name,
            "handle": job.handle,
            "detached": job.detached,
            "channel": job.channel_address,
            "launcher_settings": job.launcher.settings(),
            "spec": job.spec.record(),
            "status": job.status,
            "started_at": job.started_at,
            "timeout": job.timeout,  # kept by whichever kernel follows the job (%train_attach)
        }
        self._write_summary()
        secret = self.folder / KERNEL_SECRET_FILE
        if job.detached and not secret.exists():  # for %train_attach in another kernel
            job.kernel_secret.write(secret)

    def finish(self, job) -> None:
        """Close the events file and complete ``job.json`` (status, reason, end time)."""
        with self._lock:
            self._file.close()
        self._summary = {
            **self._summary,
            "name": job.name,
            "status": job.status,
            "exit_reason": job.exit_reason,
            "started_at": job.started_at,
            "ended_at": job.ended_at,
        }
        self._write_summary()

    def _write_summary(self) -> None:
        (self.folder / "job.json").write_text(json.dumps(self._summary, indent=1) + "\n")
