"""A kernel killed with SIGKILL leaves no rank training, whether its parent reaps it (the pid is
gone) or never does (a zombie, on which ``os.kill(pid, 0)`` still succeeds): every rank's
watchdog sees it and exits, and torchrun's agent ends with its ranks. Every wait ends as soon
as its condition holds and fails only once nothing has progressed for a long while."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil

from tests.kernel.kernel_session import cpu_seconds, processes_mentioning, wait_progressing

# The kernel: a Job on two local torchrun ranks whose body runs until it is stopped.
KERNEL = """
import os, pathlib, sys, time
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.local.torchrun import TorchrunLauncher
from hotswitch.kernel.notebook.cells.cell_output import ConsoleOutput
from hotswitch.kernel.notebook.jobs.job import Job

folder = pathlib.Path(sys.argv[1])
body = folder / "body.py"
body.write_text(
    "import os, pathlib, time\\n"
    f"folder = pathlib.Path({str(folder)!r})\\n"
    "(folder / f'rank-{job.rank}').write_text(f'{os.getpid()} {os.getppid()}')\\n"
    "while True:\\n"
    "    time.sleep(0.1)\\n"
)
job = Job("forever", LaunchSpec(folder, body, nproc=2), TorchrunLauncher(), ConsoleOutput(all_to_stderr=True))
(folder / "kernel").write_text(str(os.getpid()))
while True:
    time.sleep(1)
"""

# Its parent starts it and never waits for it, so once killed it stays a zombie.
PARENT = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
while True:
    time.sleep(1)
"""


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _job_processes(folder: Path) -> list[psutil.Process]:
    """The agent and the ranks: the only processes whose command line names the body file."""
    return processes_mentioning(str(folder / "body.py"))


def _ranks_started(folder: Path, starter: int) -> list[int]:
    """Wait until both ranks wrote their files; each rank's pid and its agent's, in rank order."""
    ranks = [folder / "rank-0", folder / "rank-1"]

    def progress():
        try:
            processes = psutil.Process(starter).children(recursive=True)
        except psutil.NoSuchProcess:
            processes = []
        return cpu_seconds(processes), len(processes)

    wait_progressing(lambda: all(r.exists() and r.read_text() for r in ranks), progress, "both ranks starting")
    return [int(p) for r in ranks for p in r.read_text().split()]


def _job_ends(folder: Path, pids: list[int], after: str) -> None:
    """Wait until no rank, then no agent, runs; fail naming who outlived ``after``."""

    def progress():
        left = _job_processes(folder)
        return len(left), cpu_seconds(left)

    ranks, agents = pids[::2], pids[1::2]
    wait_progressing(lambda: not any(_running(p) for p in ranks), progress, f"every rank ending after {after}")
    wait_progressing(lambda: not any(_running(p) for p in agents), progress, f"torchrun ending after {after}")
    assert _job_processes(folder) == [], f"processes of the job outlived {after}"


def test_ranks_stop_when_their_kernel_is_killed_and_left_a_zombie(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(PARENT), KERNEL, str(tmp_path)])
    pids: list[int] = []
    try:
        pids = _ranks_started(tmp_path, parent.pid)
        kernel = int((tmp_path / "kernel").read_text())
        assert {p.pid for p in _job_processes(tmp_path)} == set(pids)
        os.kill(kernel, signal.SIGKILL)
        wait_progressing(
            lambda: psutil.Process(kernel).status() == psutil.STATUS_ZOMBIE, lambda: None, "the kernel dying"
        )
        _job_ends(tmp_path, pids, "its kernel became a zombie")
        assert psutil.Process(kernel).status() == psutil.STATUS_ZOMBIE  # still unreaped: the case under test
    finally:
        for pid in pids:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
        parent.kill()
        parent.wait()


def test_ranks_stop_when_their_kernel_is_killed_and_reaped(tmp_path):
    kernel = subprocess.Popen([sys.executable, "-c", textwrap.dedent(KERNEL), str(tmp_path)])
    pids: list[int] = []
    try:
        pids = _ranks_started(tmp_path, kernel.pid)
        assert {p.pid for p in _job_processes(tmp_path)} == set(pids)
        kernel.send_signal(signal.SIGKILL)
        assert kernel.wait() == -signal.SIGKILL  # reaped: its pid no longer exists
        assert not _running(kernel.pid)
        _job_ends(tmp_path, pids, "its kernel was killed and reaped")
    finally:
        for pid in pids:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
        if kernel.poll() is None:
            kernel.kill()
            kernel.wait()
