"""A launch's run folder from the kernel's side: recording a job into it (``record_run``) and
following a detached launch it records again from another kernel (``reattach``). ``%%train``
and ``%train_pool`` share these, for jobs and for pools."""

from __future__ import annotations

from pathlib import Path

from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.named import make_launcher
from hotswitch.kernel.notebook.jobs.attach import attachment
from hotswitch.kernel.notebook.jobs.job import Job
from hotswitch.kernel.notebook.jobs.run_record import RunRecord


def record_run(job: Job, folder: Path, body: str, replay: bool = True) -> None:
    """Record ``job`` into its run folder: events as they arrive (those already received too,
    with ``replay``), ``job.json`` at its start and at its end."""
    record = RunRecord(folder, body)
    record.started(job)
    job.on_event(record.write, replay)
    job.add_done_callback(record.finish)


def private_dir(folder: Path) -> Path:
    folder.mkdir(mode=0o700)
    return folder


def reattach(summary: dict, folder: Path, output) -> Job:
    """A ``Job`` following the detached launch recorded in ``folder`` again (``LaunchGone`` if
    nothing of it runs any more)."""
    launcher = make_launcher(summary["launcher"], **summary.get("launcher_settings", {}))
    spec = LaunchSpec.from_record(summary["spec"])
    launcher.adopt(summary["handle"], spec)
    timeout = summary.get("timeout")  # from its start: one past it while no kernel followed ends now
    return Job(summary["name"], spec, launcher, output, timeout=timeout, attached=attachment(summary, folder))
