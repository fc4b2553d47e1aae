"""The kill scenarios not covered elsewhere, each against a real kernel and real torchrun ranks:
the kernel restarted while a job trains (gracefully, and at once), and the torchrun agent killed
with SIGKILL. Each leaves 0 processes of the job, and the kernel runs a new job afterwards.
(Interrupt, shutdown and a rank's SIGKILL: test_train_magic.py; the kernel's SIGKILL, reaped or
left a zombie: tests/kernel/worker/test_zombie_kernel.py.)"""

import os
import signal
import subprocess
import sys

import psutil
import pytest

from tests.kernel.kernel_session import KernelSession, wait_until

pytestmark = pytest.mark.slow

# Generous: the machine's cores are shared. Each wait ends as soon as its condition holds.
LIMIT_S = 240

FOREVER = """
import os, time
job.emit({"type": "pids", "pid": os.getpid(), "agent": os.getppid()})
while True:
    time.sleep(0.1)
"""
QUICK = "%%train -n 2 --wait --name after\njob.emit({'type': 'step', 'step': 0, 'loss': 0.0})\n"


@pytest.fixture(scope="module")
def kernels_dir(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("jupyter-prefix")
    cli = [sys.executable, "-m", "hotswitch.kernel.cli", "kernel", "install", "--prefix", str(prefix)]
    subprocess.run(cli, check=True, capture_output=True)
    return prefix / "share" / "jupyter" / "kernels"


def _alive(pids) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _training(session: KernelSession, name: str) -> list[dict]:
    """Start a job that runs until stopped; its ranks' pids once both reported."""
    msg_id, reply = session.execute(f"%%train -n 2 --name {name}\n{FOREVER}")
    assert reply["status"] == "ok", session.text(msg_id)
    assert wait_until(lambda: len(session.value(f"jobs[{name!r}].events_of('pids')")) == 2, LIMIT_S, 0.5)
    return session.value(f"jobs[{name!r}].events_of('pids')")


def _runs_a_new_job(session: KernelSession) -> None:
    msg_id, reply = session.execute(QUICK, timeout=LIMIT_S)
    assert reply["status"] == "ok", session.text(msg_id)
    assert session.value("jobs['after'].status") == "succeeded"


@pytest.mark.parametrize("now", [False, True], ids=["graceful", "at-once"])
def test_restarting_the_kernel_while_a_job_trains_leaves_no_process(kernels_dir, now):
    session = KernelSession("hotswitch", kernels_dir)
    try:
        ranks = _training(session, "long")
        pids = {p.pid for p in session.descendants()}
        assert {r["pid"] for r in ranks} | {ranks[0]["agent"]} <= pids
        session.manager.restart_kernel(now=now)
        session.client.wait_for_ready(timeout=LIMIT_S)
        session.pid = session.manager.provisioner.process.pid
        assert wait_until(lambda: not _alive(pids), LIMIT_S, 0.5), f"left running: {_alive(pids)}"
        _runs_a_new_job(session)
        assert wait_until(lambda: not session.descendants(), LIMIT_S, 0.5)
    finally:
        session.shutdown()


def test_a_killed_torchrun_agent_fails_the_job_and_leaves_no_process(kernels_dir):
    session = KernelSession("hotswitch", kernels_dir)
    try:
        ranks = _training(session, "orphans")
        agent = ranks[0]["agent"]
        assert {r["agent"] for r in ranks} == {agent}
        os.kill(agent, signal.SIGKILL)
        assert wait_until(lambda: session.value("jobs['orphans'].done"), LIMIT_S, 0.5)
        assert session.value("jobs['orphans'].status") == "failed"
        reason = session.value("jobs['orphans'].exit_reason")
        assert "SIGKILL" in reason or "signal 9" in reason, reason
        assert wait_until(lambda: not _alive([r["pid"] for r in ranks]), LIMIT_S, 0.5), "a rank outlived its agent"
        _runs_a_new_job(session)
        assert wait_until(lambda: not session.descendants(), LIMIT_S, 0.5)
    finally:
        session.shutdown()
