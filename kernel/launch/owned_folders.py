"""Temp folders that name the process owning them, and the sweep that removes those whose owner
died without removing them: a kernel's job folders (bodies, channel secrets, logs), a pool
rank's folder for its task, a Ray node's folder for its share of a job.

An owner that ends normally removes its folder (``JobRegistry.close`` at a kernel's shutdown,
restart or exit; a pool task's ``finally``; a Ray node's release). One killed with SIGKILL, by
the out-of-memory killer or by a restart "at once" cannot, and its folder, channel secret
included, would stay in the temp directory for good. So each folder holds ``.owner.json``, and
making a folder removes every other one of its kind whose owner is gone. "Gone" is judged as
the ranks' watchdog judges it (``worker/watchdog.py``): no such process, a zombie, or its pid
now another process's (psutil's creation time differs). A folder is only judged from the host
and pid namespace that made it (two containers sharing a temp directory see different processes
under one pid), and only by its owner's user, with its owner file whole; others stay. A folder
is removed with its owner file last (``remove_owned``), so that a removal cut short by a kill
leaves a folder the next sweep still judges, not one without an owner.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from contextlib import suppress
from pathlib import Path

import psutil

from hotswitch.kernel.worker.watchdog import process_gone

OWNER = ".owner.json"


def owned_folder(prefix: str) -> Path:
    """A fresh temp folder named ``prefix``..., owned by this process, readable by its user only;
    removes the folders of that prefix whose owners are gone."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    partial = folder / f"{OWNER}.partial"
    partial.write_text(json.dumps(_me()))
    partial.replace(folder / OWNER)  # whole or absent: a sweep never reads half of it
    sweep(folder.parent, prefix)
    return folder


def sweep(parent: Path, prefix: str) -> list[Path]:
    """Remove the folders ``prefix``... under ``parent`` whose owners are gone; those removed."""
    me = _me()
    removed = []
    for folder in parent.glob(f"{prefix}*"):
        owner = _owner(folder)
        if owner is not None and _gone(owner, me):
            remove_owned(folder)
            removed.append(folder)
    return removed


def remove_owned(folder: Path) -> None:
    """Remove ``folder``, its owner file last: every other entry first, so that a process killed
    while removing it (a kernel that outlasted its shutdown's wait) leaves the owner named."""
    with suppress(OSError):
        for entry in list(folder.iterdir()):
            if entry.name != OWNER:
                _remove_entry(entry)
    with suppress(OSError):
        (folder / OWNER).unlink()
    shutil.rmtree(folder, ignore_errors=True)  # whatever appeared meanwhile


def _remove_entry(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        with suppress(OSError):
            entry.unlink()


def _me() -> dict:
    me = psutil.Process()
    return {"host": socket.gethostname(), "namespace": _pid_namespace(), "pid": me.pid, "created": me.create_time()}


def _pid_namespace() -> int | None:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def _owner(folder: Path) -> dict | None:
    """Who made ``folder``, if it is ours to judge: a folder of this user with a whole owner file."""
    try:
        if not folder.is_dir() or folder.stat().st_uid != os.getuid():
            return None
        owner = json.loads((folder / OWNER).read_text())
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


def _gone(owner: dict, me: dict) -> bool:
    """Whether the process ``owner`` names has ended, judged only from the host and pid namespace
    of ``me`` (this process); a creation time a second apart is another process's."""
    if owner.get("host") != me["host"] or owner.get("namespace") != me["namespace"]:
        return False
    pid, created = owner.get("pid"), owner.get("created")
    if not isinstance(pid, int) or not isinstance(created, (int, float)) or pid == me["pid"]:
        return False
    try:
        process = psutil.Process(pid)
        return abs(process.create_time() - created) > 1.0 or process_gone(process)
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:  # it exists (another user's): alive as far as we can tell
        return False
