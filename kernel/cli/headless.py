"""One job run from the command line: a body on local torchrun ranks, followed to its end."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from hotswitch.kernel.launch.launcher import Launcher, LaunchSpec
from hotswitch.kernel.launch.local.torchrun import TorchrunLauncher
from hotswitch.kernel.notebook.cells.cell_output import ConsoleOutput
from hotswitch.kernel.notebook.jobs.job import Job
from hotswitch.kernel.notebook.jobs.run_record import RunRecord, new_run_dir

POLL_S = 0.2


def check_launch(nproc: int, timeout: float | None) -> None:
    """The command line's launch options, checked before anything starts."""
    if nproc < 1:
        raise ValueError(f"--nproc {nproc} starts no rank; give at least 1 (default 4)")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"--timeout {timeout:g} is not a duration; give seconds above 0, or leave it out")


def follow(
    name: str,
    body: str,
    nproc: int,
    on_events: Callable[[list[dict]], None],
    timeout: float | None,
    launcher: Launcher | None = None,
    nodes: int = 1,
    host: str = "127.0.0.1",
) -> Job:
    """Run ``body`` on ``nproc`` ranks on each of ``nodes`` nodes (through ``launcher``, local
    torchrun by default); hand every batch of new events to ``on_events`` as they arrive;
    return the ended job. The ranks reach the channel on ``host``. Ctrl-C stops every rank
    before it propagates; rank output goes to stderr, so stdout stays free for the command's
    own result."""
    job_dir = Path(tempfile.mkdtemp(prefix=f"hotswitch-{name}-"))
    body_path = job_dir / "body.py"
    body_path.write_text(body)
    job = None
    try:
        output = ConsoleOutput(all_to_stderr=True)
        run_dir = new_run_dir(name)
        spec = LaunchSpec(job_dir, body_path, nproc=nproc, nodes=nodes, log_dir=run_dir / "logs")
        launcher = launcher or TorchrunLauncher()
        launcher.check(spec)
        job = Job(name, spec, launcher, output, timeout, host=host)
        record = RunRecord(run_dir, body)
        record.started(job)
        job.on_event(record.write)
        job.add_done_callback(record.finish)
        print(f"hotswitch {name}: events recorded in {record.folder}", file=sys.stderr)
        seen = 0
        while not job.done:
            seen = _hand_over(job, seen, on_events)
            time.sleep(POLL_S)
        _hand_over(job, seen, on_events)
        return job
    finally:
        if job is not None and not job.done:
            job.stop()
        shutil.rmtree(job_dir, ignore_errors=True)


def _hand_over(job: Job, seen: int, on_events: Callable[[list[dict]], None]) -> int:
    new = list(job.events[seen:])
    if new:
        on_events(new)
    return seen + len(new)
