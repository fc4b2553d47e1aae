"""Runs that outlive the kernel: a job started with ``--detach`` trains on through a kernel
restart, ``%train_attach NAME`` in the new kernel follows it again (its recorded events, new
ones, controls that reach rank 0), and a finished run attaches as a replay. Without
``--detach`` a restart still leaves nothing running (tests/kernel/notebook/test_kill_scenarios.py)."""

import json
import time
from pathlib import Path

import pytest

from tests.kernel.kernel_session import (
    CAP_S,
    cpu_seconds,
    hotswitch_kernel,
    processes_mentioning,
    wait_none_mentioning,
    wait_progressing,
)

pytestmark = pytest.mark.slow

# Trains until stopped: a step every 0.2 s; rank 0 echoes every control it receives.
TRAINS = """
import time
step = 0
while True:
    for control in job.control():
        job.emit({"type": "echo", "command": control["command"]})
    job.emit({"type": "step", "step": step, "loss": 1.0 / (step + 1)})
    step += 1
    time.sleep(0.2)
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    session = hotswitch_kernel(tmp_path_factory)
    yield session
    session.shutdown()


def _steps(session, name: str) -> int:
    return session.value(f"len(jobs[{name!r}].events_of('step'))")


def test_a_detached_job_trains_through_a_kernel_restart_and_attaches_again(kernel):
    msg_id, reply = kernel.execute(f"%%train -n 2 --detach --name outlives\n{TRAINS}")
    assert reply["status"] == "ok", kernel.text(msg_id)
    folder = Path(kernel.value("str(jobs['outlives'].spec.log_dir.parent)"))
    body = str(folder / "job" / "body.py")

    def progress():
        left = processes_mentioning(body)
        return len(left), cpu_seconds(left)

    wait_progressing(lambda: _steps(kernel, "outlives") >= 4, progress, "the detached job's first steps")
    ranks = {p.pid for p in processes_mentioning(body)}
    assert len(ranks) == 3  # the agent and two ranks
    assert json.loads((folder / "job.json").read_text())["detached"] is True
    kernel.manager.restart_kernel(now=False)
    kernel.client.wait_for_ready(timeout=CAP_S)
    kernel.pid = kernel.manager.provisioner.process.pid
    assert {p.pid for p in processes_mentioning(body)} == ranks, "the restart stopped a detached job"

    msg_id, reply = kernel.execute("%train_attach outlives")
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert "job 'outlives' attached" in kernel.text(msg_id)
    before = _steps(kernel, "outlives")
    assert before >= 4  # what the first kernel recorded
    wait_progressing(lambda: _steps(kernel, "outlives") > before + 3, progress, "new steps reaching the new kernel")
    kernel.execute("jobs['outlives'].pause()")  # a control from the new kernel reaches rank 0
    wait_progressing(
        lambda: kernel.value("jobs['outlives'].events_of('echo', command='pause')"), progress, "rank 0 hearing pause"
    )
    assert kernel.value("jobs['outlives'].stop()") == "stopped"
    wait_none_mentioning(body, "every process of the job ending")
    summary = json.loads((folder / "job.json").read_text())
    assert summary["status"] == "stopped" and "ended_at" in summary
    recorded = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    steps = [e["step"] for e in recorded if e["type"] == "step" and e["rank"] == 0]
    assert steps == sorted(set(steps)), "the run folder holds each step once, in order"


def test_a_detached_jobs_timeout_holds_with_no_kernel_following_it(kernel):
    """Its ranks keep the deadline: past it, with the kernel gone, rank 0 is asked to stop (this
    body reads the stop and echoes it, never ending) and every rank ends ``ENDING_S`` later."""
    msg_id, reply = kernel.execute(f"%%train -n 2 --detach --timeout 12 --name late\n{TRAINS}")
    assert reply["status"] == "ok", kernel.text(msg_id)
    folder = Path(kernel.value("str(jobs['late'].spec.log_dir.parent)"))
    kernel.manager.restart_kernel(now=False)  # within its 12 s: no kernel keeps its time now
    kernel.client.wait_for_ready(timeout=CAP_S)
    kernel.pid = kernel.manager.provisioner.process.pid
    summary = json.loads((folder / "job.json").read_text())
    assert summary["timeout"] == 12 and "ended_at" not in summary, "the first kernel ended it"
    body = str(folder / "job" / "body.py")
    wait_none_mentioning(body, "the detached job's ranks ending at its --timeout, with no kernel")
    assert time.time() >= summary["started_at"] + 12, "it ended before its --timeout"
    logs = "".join(p.read_text() for p in (folder / "logs").glob("*"))
    assert "the detached job's --timeout passed" in logs and "with no kernel following it" in logs, logs[-2000:]
    msg_id, reply = kernel.execute("%train_attach late")
    assert reply["status"] == "ok" and "job 'late' ended while no kernel followed it" in kernel.text(msg_id)


def test_a_finished_run_attaches_as_a_replay(kernel):
    msg_id, reply = kernel.execute("%%train -n 2 --wait --name short\njob.emit({'type': 'step', 'step': 0})\n")
    assert reply["status"] == "ok", kernel.text(msg_id)
    folder = kernel.value("str(jobs['short'].spec.log_dir.parent)")
    msg_id, reply = kernel.execute(f"replay = %train_attach {folder}")
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert "job 'short': succeeded; replaying" in kernel.text(msg_id)
    assert kernel.value("type(replay).__name__") == "Dashboard"


@pytest.mark.parametrize(
    "cell, message",
    [
        ("%%train --detach --wait\npass\n", "--detach with --wait"),
        ("%train_attach no-such-job", "no run of a job named 'no-such-job'"),
        ("%train_attach", "%train_attach takes a job name or a run folder"),
    ],
)
def test_bad_detach_and_attach_requests_are_refused(kernel, cell, message):
    msg_id, reply = kernel.execute(cell)
    assert reply["status"] == "error" and message in kernel.text(msg_id)


def test_a_detached_pool_outlives_its_kernel_and_attaches_again_with_its_state(kernel):
    msg_id, reply = kernel.execute("%train_pool start kept -n 2 --detach")
    assert reply["status"] == "ok" and "2 ranks ready" in kernel.text(msg_id), kernel.text(msg_id)
    job_dir = kernel.value("str(pools['kept'].job.job_dir)")
    msg_id, reply = kernel.execute("%%ranks kept\nx = 10 * rank")
    assert reply["status"] == "ok", kernel.text(msg_id)
    ranks = {p.pid for p in processes_mentioning(job_dir)}
    assert len(ranks) == 3  # the agent and two ranks
    kernel.manager.restart_kernel(now=False)
    kernel.client.wait_for_ready(timeout=CAP_S)
    kernel.pid = kernel.manager.provisioner.process.pid
    assert {p.pid for p in processes_mentioning(job_dir)} == ranks, "the restart stopped a detached pool"

    msg_id, reply = kernel.execute("%train_attach kept")  # a pool's name: %train_pool attach kept
    assert reply["status"] == "ok" and "pool 'kept' attached: 2 ranks, idle" in kernel.text(msg_id), kernel.text(msg_id)
    msg_id, reply = kernel.execute("%%ranks kept\nx + rank")
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert "Out[0]: 0" in kernel.text(msg_id) and "Out[1]: 11" in kernel.text(msg_id)
    body = "job.emit({'type': 'step', 'step': 0, 'loss': float(x)})\n"
    msg_id, reply = kernel.execute(f"%%train --pool kept --wait --name after\n{body}")
    assert kernel.value("jobs['after'].status") == "succeeded", kernel.text(msg_id)
    assert sorted(e["loss"] for e in kernel.value("jobs['after'].events_of('step')")) == [0.0, 10.0]
    msg_id, reply = kernel.execute("%train_pool stop kept")
    assert reply["status"] == "ok" and "stopped" in kernel.text(msg_id), kernel.text(msg_id)
    wait_none_mentioning(job_dir, "every process of the detached pool ending once stopped")
    msg_id, reply = kernel.execute("%train_pool attach kept")
    assert reply["status"] == "error" and "pool 'kept' has ended (stopped" in kernel.text(msg_id)


def test_a_detached_pool_nobody_follows_ends_itself_once_idle(kernel):
    msg_id, reply = kernel.execute("%train_pool start lonely -n 1 --detach --idle-timeout 2")
    assert reply["status"] == "ok", kernel.text(msg_id)
    job_dir = kernel.value("str(pools['lonely'].job.job_dir)")
    kernel.manager.restart_kernel(now=True)  # no kernel keeps its idle clock: the rank does
    kernel.client.wait_for_ready(timeout=CAP_S)
    kernel.pid = kernel.manager.provisioner.process.pid
    wait_none_mentioning(job_dir, "the detached pool's rank ending itself once idle")
    msg_id, reply = kernel.execute("%train_pool attach lonely")
    assert reply["status"] == "error" and "pool 'lonely' ended while no kernel followed it" in kernel.text(msg_id)
