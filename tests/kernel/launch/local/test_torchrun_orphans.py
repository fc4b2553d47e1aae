"""A launch whose agent dies while its processes live on still ends: the orphans get
``ORPHAN_GRACE_S`` to end themselves (ranks do, through their watchdog), then SIGKILL, and
``poll`` reports the agent's own exit. Here the "agent" is a shell whose children never look."""

import signal
import subprocess

import psutil

from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.local.torchrun import TorchrunLaunch
from tests.kernel.kernel_session import cpu_seconds, wait_progressing

AGENT = ["sh", "-c", "sleep 600 & sleep 600 & wait"]


def _running(processes: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def test_processes_outliving_their_killed_agent_are_killed_and_the_launch_ends(tmp_path):
    agent = subprocess.Popen(AGENT, start_new_session=True)
    launch = TorchrunLaunch(LaunchSpec(tmp_path, tmp_path / "body.py"), agent, tmp_path / "agent.log")
    children: list[psutil.Process] = []
    try:
        shell = psutil.Process(agent.pid)
        wait_progressing(
            lambda: launch.poll() is None and len(launch.alive_pids()) == 3,
            lambda: cpu_seconds([shell, *shell.children()]),
            "the shell starting its two sleepers",
        )
        children = shell.children()
        agent.send_signal(signal.SIGKILL)
        assert launch.poll() is None, "the launch ended while its sleepers still ran"
        wait_progressing(lambda: launch.poll() is not None, lambda: len(_running(children)), "the launch ending")
        assert launch.poll() == -signal.SIGKILL
        assert _running(children) == [], "an orphan outlived the launch"
        assert launch.alive_pids() == []
    finally:
        for p in _running(children):
            p.kill()
        if agent.poll() is None:
            agent.kill()
            agent.wait()
