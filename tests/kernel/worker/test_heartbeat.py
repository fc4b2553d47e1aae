"""Liveness without pids: ranks stop once their kernel has sent no heartbeat for the timeout
(here a kernel frozen with SIGSTOP: its pid lives on, so only the heartbeat can tell), and the
kernel marks a job lost once a rank has been silent that long, tearing every rank down."""

import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.local.torchrun import TorchrunLauncher
from hotswitch.kernel.notebook.cells.cell_output import ConsoleOutput
from hotswitch.kernel.notebook.jobs.job import Job
from hotswitch.kernel.worker.heartbeat import ENV_HEARTBEAT_TIMEOUT
from tests.kernel.kernel_session import CAP_S, cpu_seconds, processes_mentioning, wait_progressing

pytestmark = pytest.mark.slow

TIMEOUT_S = "4"

KERNEL = """
import pathlib, sys, time
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.local.torchrun import TorchrunLauncher
from hotswitch.kernel.notebook.cells.cell_output import ConsoleOutput
from hotswitch.kernel.notebook.jobs.job import Job

folder = pathlib.Path(sys.argv[1])
body = folder / "body.py"
body.write_text("import time\\njob.emit({'type': 'step', 'step': 0})\\nwhile True:\\n    time.sleep(0.1)\\n")
job = Job("frozen", LaunchSpec(folder, body, nproc=2), TorchrunLauncher(), ConsoleOutput(all_to_stderr=True))
job.wait_until(lambda: len(job.events_of("step")) == 2)
(folder / "ready").write_text("")
while True:
    time.sleep(1)
"""

SILENT_RANK = """
import os, signal, time
job.emit({"type": "step", "step": 0, "loss": 0.0})
time.sleep(0.5)
if job.rank == 1:
    os.kill(os.getpid(), signal.SIGSTOP)  # alive, but says nothing more
while True:
    time.sleep(0.1)
"""


def _job_processes(folder, kernel: int | None = None) -> list[psutil.Process]:
    """The agent and the ranks: their command lines name the body (the kernel's names the folder)."""
    return [p for p in processes_mentioning(str(folder / "body.py")) if p.pid != kernel]


def _progress(folder, kernel: int | None = None):
    left = _job_processes(folder, kernel)
    return len(left), cpu_seconds(left)


def test_ranks_stop_when_their_kernel_goes_silent(tmp_path):
    env = {**os.environ, ENV_HEARTBEAT_TIMEOUT: TIMEOUT_S}
    kernel = subprocess.Popen([sys.executable, "-c", textwrap.dedent(KERNEL), str(tmp_path)], env=env)
    try:
        progress = lambda: _progress(tmp_path, kernel.pid)  # noqa: E731
        wait_progressing(lambda: (tmp_path / "ready").exists(), progress, "both ranks starting")
        assert len(_job_processes(tmp_path, kernel.pid)) == 3  # torchrun's agent and two ranks
        kernel.send_signal(signal.SIGSTOP)  # frozen: its pid lives on, its heartbeats stop
        stopped = lambda: psutil.Process(kernel.pid).status() == psutil.STATUS_STOPPED  # noqa: E731
        wait_progressing(stopped, lambda: None, "the kernel stopping")
        wait_progressing(lambda: not _job_processes(tmp_path, kernel.pid), progress, "every rank and agent ending")
        assert stopped()  # it never woke up to stop them
    finally:
        kernel.send_signal(signal.SIGCONT)
        kernel.kill()
        kernel.wait()


def test_a_silent_rank_marks_the_job_lost_and_every_rank_is_torn_down(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_HEARTBEAT_TIMEOUT, TIMEOUT_S)
    (tmp_path / "body.py").write_text(SILENT_RANK)
    job = Job("silent", LaunchSpec(tmp_path, tmp_path / "body.py", nproc=2), TorchrunLauncher(), ConsoleOutput())
    try:
        assert job.wait(CAP_S) == "lost"
        assert "no heartbeat from rank 1" in job.exit_reason and "rank 0" not in job.exit_reason
        assert _job_processes(tmp_path) == [] and job.pids() == []
    finally:
        job.stop(grace=1.0)
