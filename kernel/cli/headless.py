"""One job run from the command line: a body on local torchrun ranks, followed to its end."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from hotswitch.kernel.cli.progress import JobLines
from hotswitch.kernel.launch.launcher import Launcher, LaunchSpec
from hotswitch.kernel.launch.local.torchrun import TorchrunLauncher
from hotswitch.kernel.launch.owned_folders import owned_folder, remove_owned
from hotswitch.kernel.notebook.jobs.job import Job
from hotswitch.kernel.notebook.jobs.run_record import RunRecord, new_run_dir

POLL_S = 0.2


class Followed(NamedTuple):
    """A job followed to its end, and the exit status of the signal that stopped it (130 for
    Ctrl-C, 143 for SIGTERM; None if it ended by itself)."""

    job: Job
    signalled: int | None


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
) -> Followed:
    """Run ``body`` on ``nproc`` ranks on each of ``nodes`` nodes (through ``launcher``, local
    torchrun by default); hand every batch of new events to ``on_events`` as they arrive;
    return the ended job. The ranks reach the channel on ``host``. Ctrl-C or SIGTERM stops the
    job as ``Job.stop`` does (rank 0 ends its step and writes what it was to: the final
    checkpoint, the export), its last events are handed over too, and the signal's exit status
    is returned with it; a second one ends every rank at once and propagates. The job's folder
    is removed either way (one left by a SIGKILL is swept by the next command's); rank output
    goes to stderr, so stdout stays free for the command's own result."""
    job_dir = owned_folder(f"hotswitch-{name}-")
    job = None
    try:
        job = _start(name, body, job_dir, nproc, timeout, launcher or TorchrunLauncher(), nodes, host)
        with _terminate_as_exit():
            seen = 0
            signalled = None
            try:
                while not job.done:
                    seen = _hand_over(job, seen, on_events)
                    time.sleep(POLL_S)
            except (KeyboardInterrupt, SystemExit) as stop:
                signalled = 130 if isinstance(stop, KeyboardInterrupt) else int(stop.code or 1)
                job.stop()
            _hand_over(job, seen, on_events)
        return Followed(job, signalled)
    finally:
        if job is not None and not job.done:
            job.stop()
        remove_owned(job_dir)


def _start(
    name: str, body: str, job_dir: Path, nproc: int, timeout: float | None, launcher: Launcher, nodes: int, host: str
) -> Job:
    """The job of ``body`` launched from ``job_dir``, its events recorded in a new run folder."""
    body_path = job_dir / "body.py"
    body_path.write_text(body)
    run_dir = new_run_dir(name)
    spec = LaunchSpec(job_dir, body_path, nproc=nproc, nodes=nodes, log_dir=run_dir / "logs")
    launcher.check(spec)
    job = Job(name, spec, launcher, JobLines(), timeout, host=host)
    record = RunRecord(run_dir, body)
    record.started(job)
    job.on_event(record.write)
    job.add_done_callback(record.finish)
    print(f"hotswitch {name}: events recorded in {record.folder}", file=sys.stderr)
    return job


@contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM (``kill``, a scheduler ending the command) raises SystemExit here as Ctrl-C
    raises KeyboardInterrupt, so that the job is stopped and its folder removed on the way out;
    the handler before is put back after. Signals reach the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _exit_on_terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _exit_on_terminate(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _hand_over(job: Job, seen: int, on_events: Callable[[list[dict]], None]) -> int:
    new = list(job.events[seen:])
    if new:
        on_events(new)
    return seen + len(new)
