"""``--launcher slurm``: a job as one Slurm batch job, every node of it driven from the kernel.

The batch script (``slurm.batch_job``; written into the run folder, which compute nodes see on
a shared filesystem) runs one task per node with ``srun --kill-on-bad-exit``: each task is
``python -m hotswitch.kernel.launch.slurm.node FOLDER``, torchrun for that node, meeting in a
c10d rendezvous on the job's first node. A failing node ends the others (srun), a failing rank
ends its node (torchrun). ``scancel`` reaches every process of every node (Slurm tracks them).

Liveness without pids: the ranks' kernel is on another machine, so they watch it by heartbeat
(``worker.heartbeat``) and exit once it has been silent for the timeout.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

from hotswitch.kernel.launch.job_files import job_files, write_job_files, write_launch
from hotswitch.kernel.launch.launcher import Launcher, LaunchGone, LaunchSpec, rank_log
from hotswitch.kernel.launch.slurm.batch_job import batch_script, extra_sbatch_args, sbatch_argv

COMMAND_TIMEOUT_S = 20.0
# Job states that are not over yet (squeue's and scontrol's names).
RUNNING = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "STAGE_OUT"}
# Exit statuses for the states that end a job without its own exit code.
ENDED_BY = {"CANCELLED": -15, "TIMEOUT": -15, "NODE_FAIL": 1, "OUT_OF_MEMORY": -9, "PREEMPTED": -15, "BOOT_FAIL": 1}


def slurm(*argv: str, timeout: float = COMMAND_TIMEOUT_S) -> str:
    """Run a Slurm client command; its output, or ValueError with Slurm's own message."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise ValueError(
            f"--launcher slurm needs Slurm's client commands on this machine ({argv[0]} is not on PATH); "
            "run the kernel on a login node, or install slurm-client"
        ) from None
    except subprocess.TimeoutExpired:
        raise ValueError(f"`{' '.join(argv)}` did not answer within {timeout:g} s: is the controller up?") from None
    if done.returncode:
        raise ValueError(f"`{' '.join(argv)}` failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def job_fields(job_id: str) -> dict[str, str]:
    """``scontrol show job``'s fields for ``job_id`` (empty once Slurm has forgotten it)."""
    try:
        text = slurm("scontrol", "show", "job", "-o", job_id)
    except ValueError as error:
        if "Invalid job id" in str(error):
            return {}
        raise
    return dict(part.split("=", 1) for part in shlex.split(text) if "=" in part)


def exit_status(fields: dict[str, str]) -> int | None:
    """None while the job runs; then its exit status (negative: the signal that ended it)."""
    state = fields.get("JobState", "UNKNOWN")
    if state in RUNNING:
        return None
    code, _, signal = fields.get("ExitCode", "0:0").partition(":")
    if int(signal or 0):
        return -int(signal)
    if int(code):
        return int(code)
    return ENDED_BY.get(state, 0 if state == "COMPLETED" else 1)


class SlurmLauncher(Launcher):
    """Submits to the Slurm controller this machine's client commands talk to."""

    name = "slurm"
    status_every_s = 2.0  # each status is a `scontrol show job`

    def __init__(
        self,
        partition: str | None = None,
        time: str | None = None,
        gpus_per_node: int | None = None,
        account: str | None = None,
        qos: str | None = None,
        slurm_args: str | None = None,
    ):
        """Each argument is the launch option of its name (``kernel/launch/options.py``)."""
        self.options = {"partition": partition, "time": time, "gpus_per_node": gpus_per_node}
        self.options |= {"account": account, "qos": qos, "slurm_args": slurm_args}
        self.extra_args = extra_sbatch_args(slurm_args)  # refused before the controller is asked
        try:  # an unreachable controller fails here, within seconds
            slurm("scontrol", "ping")
        except ValueError as error:
            raise ValueError(
                f"the Slurm controller does not answer ({error}); check `scontrol ping` and $SLURM_CONF"
            ) from None
        self.jobs: dict[str, tuple[Path, Path]] = {}  # handle -> (its folder, its ranks' log folder)
        self.last_status: dict[str, int | None] = {}

    def submit(self, spec: LaunchSpec) -> str:
        folder = Path(spec.log_dir or spec.job_dir / "logs").parent / "slurm"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_job_files(folder, job_files(spec.job_dir))
        log_dir = spec.log_dir or folder / "logs"
        write_launch(folder, replace(spec, log_dir=log_dir))
        (folder / "job.sbatch").write_text(batch_script(folder, spec, self.options))
        job_id = slurm(*sbatch_argv(folder / "job.sbatch", self.extra_args)).strip().split(";")[0]
        handle = f"slurm:{job_id}"
        self.jobs[handle] = (folder, log_dir)
        return handle

    def settings(self) -> dict:
        return dict(self.options)

    def adopt(self, handle: str, spec: LaunchSpec) -> None:
        log_dir = spec.log_dir or spec.job_dir / "logs"
        self.jobs[handle] = (log_dir.parent / "slurm", log_dir)
        if exit_status(job_fields(self._job_id(handle)) or {"JobState": "COMPLETED"}) is not None:
            raise LaunchGone(f"Slurm job {handle.removeprefix('slurm:')} has ended")

    def _job_id(self, handle: str) -> str:
        if handle not in self.jobs:
            raise ValueError(f"no Slurm job {handle!r} was submitted by this launcher")
        return handle.removeprefix("slurm:")

    def status(self, handle: str) -> int | None:
        fields = job_fields(self._job_id(handle))
        if fields:
            self.last_status[handle] = exit_status(fields)
        return self.last_status.get(handle, 1)  # forgotten before it was seen: it ended, somehow

    def cancel(self, handle: str, force: bool = False) -> None:
        """``scancel`` (with ``force``, SIGKILL to every process of the job); a job that ended or
        is completing meanwhile (Slurm then refuses: "Invalid job id") is left to end."""
        job_id = self._job_id(handle)
        try:
            slurm("scancel", "--full", "--signal=KILL", job_id) if force else slurm("scancel", job_id)
        except ValueError:
            fields = job_fields(job_id) or {"JobState": "COMPLETED"}
            if fields.get("JobState") != "COMPLETING" and exit_status(fields) is None:
                raise

    def logs(self, handle: str, rank: int | None = None) -> str:
        job_id = self._job_id(handle)
        folder, log_dir = self.jobs[handle]
        path = folder / f"slurm-{job_id}.out" if rank is None else rank_log(log_dir, rank)
        try:
            return path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
