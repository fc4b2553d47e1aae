"""A kernel killed with SIGKILL leaves no rank training, whether its parent reaps it (the pid is
gone) or never does (a zombie, on which ``os.kill(pid, 0)`` still succeeds): every rank's
watchdog sees it and exits, and torchrun's agent ends with its ranks."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil

LIMIT_S = 180  # generous: the machine's cores are shared

# The kernel: a Job on two local torchrun ranks whose body runs until it is stopped.
KERNEL = """
import os, pathlib, sys, time
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.torchrun import TorchrunLauncher
from hotswitch.kernel.notebook.cell_output import ConsoleOutput
from hotswitch.kernel.notebook.job import Job

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


def _until(condition, timeout=LIMIT_S):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)
    return condition()


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_ranks_stop_when_their_kernel_is_killed_and_left_a_zombie(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(PARENT), KERNEL, str(tmp_path)])
    pids: list[int] = []
    try:
        ranks = [tmp_path / "rank-0", tmp_path / "rank-1"]
        assert _until(lambda: all(r.exists() and r.read_text() for r in ranks)), "the ranks never started"
        kernel = int((tmp_path / "kernel").read_text())
        pids = [int(p) for r in ranks for p in r.read_text().split()]  # each rank and its agent
        os.kill(kernel, signal.SIGKILL)
        assert _until(lambda: psutil.Process(kernel).status() == psutil.STATUS_ZOMBIE)
        assert _until(lambda: not any(_running(pid) for pid in pids[::2])), "a rank outlived its zombie kernel"
        assert _until(lambda: not any(_running(pid) for pid in pids[1::2])), "torchrun outlived its ranks"
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
        ranks = [tmp_path / "rank-0", tmp_path / "rank-1"]
        assert _until(lambda: all(r.exists() and r.read_text() for r in ranks)), "the ranks never started"
        pids = [int(p) for r in ranks for p in r.read_text().split()]
        kernel.send_signal(signal.SIGKILL)
        kernel.wait()  # reaped: its pid no longer exists
        assert not psutil.pid_exists(kernel.pid) or not _running(kernel.pid)
        assert _until(lambda: not any(_running(pid) for pid in pids[::2])), "a rank outlived its kernel"
        assert _until(lambda: not any(_running(pid) for pid in pids[1::2])), "torchrun outlived its ranks"
    finally:
        for pid in pids:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
        if kernel.poll() is None:
            kernel.kill()
            kernel.wait()
