"""``%train_attach NAME|DIR``: find a job's run folder and what it takes to follow the job again
from another kernel (after a restart, say): its launcher and handle, its spec, the channel's
address and the kernel's side of its secret (kept owner-only in the run folder of a detached
job), and the events recorded so far.

A detached job's ranks keep training without a kernel (they watch no pid and no heartbeat) and
keep sending to the channel's address; a kernel that binds that address again with the same
key hears them again, and its controls reach them (its messages are numbered on from the
clock, so the ranks never take them for replays)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from hotswitch.backend.train.loop.events import read_events
from hotswitch.kernel.channel.secrets import KernelSecret
from hotswitch.kernel.notebook.jobs.run_record import KERNEL_SECRET_FILE, runs_root

RUN_FOLDER = re.compile(r"(.+)-\d{8}-\d{6}(?:-\d+)?")  # NAME-YYYYmmdd-HHMMSS[-N] (run_record.new_run_dir)


@dataclass(frozen=True)
class Attachment:
    """What a ``Job`` needs to follow a launch it did not submit."""

    handle: str
    secret: KernelSecret
    host: str
    port: int
    started_at: float
    events: list[dict] = field(default_factory=list)


def find_run(text: str, root: Path | None = None) -> Path:
    """The run folder ``text`` names: a folder, or a job name (its newest run under ``root``)."""
    if not text:
        raise ValueError("%train_attach takes a job name or a run folder")
    folder = Path(text).expanduser()
    if (folder / "job.json").is_file():
        return folder
    root = root or runs_root()
    runs = [summary.parent for summary in root.glob("*/job.json") if _job_of(summary.parent) == text]
    if not runs:
        raise ValueError(f"no run folder {text!r}, and no run of a job named {text!r} under {root}")
    return max(runs, key=_started_at)


def _job_of(folder: Path) -> str | None:
    """The job name of run folder ``folder`` (``run`` of ``run-20261129-145700``, not of
    ``run-2-20261129-145712``), or None for a folder not named as a run."""
    named = RUN_FOLDER.fullmatch(folder.name)
    return named[1] if named else None


def _started_at(folder: Path) -> float:
    """When the run in ``folder`` started (job.json's mtime changes as the run ends)."""
    try:
        return float(read_summary(folder)["started_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return (folder / "job.json").stat().st_mtime


def read_summary(folder: Path) -> dict:
    return json.loads((folder / "job.json").read_text())


def attachable(summary: dict) -> bool:
    """Whether the run was detached and had not ended when it was last recorded."""
    return bool(summary.get("detached")) and "ended_at" not in summary


def attachment(summary: dict, folder: Path) -> Attachment:
    host, _, port = summary["channel"].removeprefix("tcp://").rpartition(":")
    return Attachment(
        handle=summary["handle"],
        secret=KernelSecret.read(folder / KERNEL_SECRET_FILE),
        host=host,
        port=int(port),
        started_at=summary["started_at"],
        events=read_events(folder),
    )
