"""The kill scenarios not covered elsewhere, each against a real kernel and real torchrun ranks:
the kernel restarted while a job trains (gracefully, and at once), the same while a job trains on a
warm pool (``%train_pool``), and the torchrun agent killed
with SIGKILL. Each leaves 0 processes of the job, and the kernel runs a new job afterwards; a
restart leaves no job folder of the old kernel (one killed at once is swept by the new one).
(Interrupt, shutdown and a rank's SIGKILL: cells/test_train_magic.py; the kernel's SIGKILL, reaped or
left a zombie: tests/kernel/worker/test_zombie_kernel.py.)

Every wait ends as soon as its condition holds and fails only once nothing has progressed for
a long while (``wait_progressing``): a busy machine slows these tests, it never fails them."""

import os
import signal
from pathlib import Path

import pytest

from tests.kernel.kernel_session import (
    CAP_S,
    KernelSession,
    cpu_seconds,
    hotswitch_kernels_dir,
    processes_mentioning,
    wait_none_mentioning,
    wait_progressing,
)

pytestmark = pytest.mark.slow

# Trains until stopped; each rank reports its pid and its parent's (the torchrun agent).
FOREVER = """
import os, time
job.emit({"type": "pids", "pid": os.getpid(), "agent": os.getppid()})
step = 0
while True:
    job.emit({"type": "step", "step": step, "loss": 0.0})
    step += 1
    time.sleep(0.2)
"""
QUICK = "%%train -n 2 --wait --name after\njob.emit({'type': 'step', 'step': 0, 'loss': 0.0})\n"


@pytest.fixture(scope="module")
def kernels_dir(tmp_path_factory):
    return hotswitch_kernels_dir(tmp_path_factory)


def _launch_progress(session: KernelSession) -> tuple:
    """What moves while a job starts: the CPU its processes spend, their count (not the kernel's
    own CPU, which every poll of ``session.value`` spends)."""
    descendants = session.descendants()
    return cpu_seconds(descendants), len(descendants)


def _training(session: KernelSession, name: str) -> tuple[str, str, list[dict]]:
    """Start a job that runs until stopped; once both ranks reported their pids: the cell's
    message id, the job's folder, and those pids."""
    msg_id, reply = session.execute(f"%%train -n 2 --name {name}\n{FOREVER}")
    assert reply["status"] == "ok", session.text(msg_id)
    wait_progressing(
        lambda: len(session.value(f"jobs[{name!r}].events_of('pids')")) == 2,
        lambda: _launch_progress(session),
        f"both ranks of {name!r} reporting their pids",
    )
    job_dir = session.value(f"str(jobs[{name!r}].job_dir)")
    return msg_id, job_dir, session.value(f"jobs[{name!r}].events_of('pids')")


def _processes_end(job_dir: str, what: str) -> None:
    """Wait until no process of the job in ``job_dir`` runs (each rank's and the agent's command
    line names its body file there)."""
    wait_none_mentioning(job_dir, what)


def _runs_a_new_job(session: KernelSession) -> None:
    msg_id, reply = session.execute(QUICK, timeout=CAP_S)
    assert reply["status"] == "ok", session.text(msg_id)
    assert session.value("jobs['after'].status") == "succeeded", session.text(msg_id)
    assert processes_mentioning(session.value("str(jobs['after'].job_dir)")) == []


@pytest.mark.parametrize("now", [False, True], ids=["graceful", "at-once"])
def test_restarting_the_kernel_while_a_job_trains_leaves_no_process(kernels_dir, now):
    session = KernelSession("hotswitch", kernels_dir)
    try:
        _, job_dir, ranks = _training(session, "long")
        found = {p.pid for p in processes_mentioning(job_dir)}
        assert found == {r["pid"] for r in ranks} | {ranks[0]["agent"]}, (found, ranks)
        old_kernel = session.pid
        session.manager.restart_kernel(now=now)
        session.client.wait_for_ready(timeout=CAP_S)
        session.pid = session.manager.provisioner.process.pid
        assert session.pid != old_kernel
        _processes_end(job_dir, f"every process of the job ending after the kernel's restart (now={now})")
        _runs_a_new_job(session)
        assert not Path(job_dir).exists(), "the old kernel's job folder outlived it"  # at once: swept
    finally:
        session.shutdown()


@pytest.mark.parametrize("now", [False, True], ids=["graceful", "at-once"])
def test_restarting_the_kernel_while_a_warm_pool_trains_leaves_no_process(kernels_dir, now):
    session = KernelSession("hotswitch", kernels_dir)
    try:
        msg_id, reply = session.execute("%train_pool start warm -n 2", timeout=CAP_S)
        assert reply["status"] == "ok", session.text(msg_id)
        job_dir = session.value("str(pools['warm'].job.job_dir)")
        msg_id, reply = session.execute(f"%%train --pool warm --name long\n{FOREVER}")
        assert reply["status"] == "ok", session.text(msg_id)
        wait_progressing(
            lambda: len(session.value("jobs['long'].events_of('pids')")) == 2,
            lambda: _launch_progress(session),
            "both ranks of the pool's job reporting their pids",
        )
        assert len(processes_mentioning(job_dir)) == 3  # the pool's torchrun agent and its two ranks
        session.manager.restart_kernel(now=now)
        session.client.wait_for_ready(timeout=CAP_S)
        session.pid = session.manager.provisioner.process.pid
        _processes_end(job_dir, f"every process of the pool ending after the kernel's restart (now={now})")
        _runs_a_new_job(session)
        assert not Path(job_dir).exists(), "the old kernel's pool folder outlived it"
    finally:
        session.shutdown()


def test_a_killed_torchrun_agent_fails_the_job_and_leaves_no_process(kernels_dir):
    session = KernelSession("hotswitch", kernels_dir)
    try:
        cell, job_dir, ranks = _training(session, "orphans")
        agent = ranks[0]["agent"]
        assert {r["agent"] for r in ranks} == {agent}
        assert {p.pid for p in processes_mentioning(job_dir)} == {r["pid"] for r in ranks} | {agent}
        os.kill(agent, signal.SIGKILL)
        wait_progressing(
            lambda: session.value("jobs['orphans'].done"),
            lambda: (len(processes_mentioning(job_dir)), session.value("len(jobs['orphans'].events)")),
            "the job ending after its torchrun agent was killed",
        )
        assert processes_mentioning(job_dir) == [], "a process of the job outlived its end"
        assert session.value("jobs['orphans'].status") == "failed"
        reason = session.value("jobs['orphans'].exit_reason")
        assert reason == "the torchrun agent was killed by SIGKILL; its ranks were stopped", reason
        ended = "job 'orphans' failed after"
        wait_progressing(lambda: session.drain() or ended in session.text(cell), lambda: None, "the cell saying so")
        text = session.text(cell)  # each rank said why it left (on the agent's output, shown on failure)
        assert text.count("the torchrun agent is gone; exiting") == 2, text
        assert f"{reason}\n" in text.split(ended, 1)[1], text
        _runs_a_new_job(session)
    finally:
        session.shutdown()
