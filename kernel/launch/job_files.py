"""A job folder's own files (the body, the channel's key, pushed values; no logs), read to be
shipped to a node and written into that node's folder readable by its owner only; and the launch
file, the spec and its ranks' environment for the process that starts a node's ranks (Slurm's
``slurm.node``, the Kubeflow local backend's agent)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hotswitch.kernel.launch.launcher import LaunchSpec

LAUNCH_FILE = "launch.json"


def job_files(job_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in job_dir.iterdir() if p.is_file() and not p.name.endswith((".log", ".exit"))}


def write_job_files(folder: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        descriptor = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as f:
            f.write(data)


def write_launch(folder: Path, spec: LaunchSpec) -> None:
    """``spec`` and its environment (which may hold what --env passed) into ``folder``, owner-only."""
    write_job_files(folder, {LAUNCH_FILE: json.dumps({"spec": spec.record(), "env": spec.env}).encode()})


def read_launch(folder: Path) -> tuple[dict, dict]:
    """What ``write_launch`` wrote: the spec's record and its environment."""
    launch = json.loads((folder / LAUNCH_FILE).read_text())
    return launch["spec"], launch["env"]
