"""``--launcher slurm`` from one notebook against a real Slurm (controller, node daemon and munge,
started on loopback by the fixture): a job runs as a batch job and reports its node, a failing
rank fails it with its traceback, a kernel that dies leaves no rank running (they hear no
heartbeat), and bad input (no controller, no Slurm commands) is refused within seconds."""

import os
import signal
import subprocess
import time

import pytest

from hotswitch.kernel.launch.slurm.launcher import SlurmLauncher
from hotswitch.kernel.worker.heartbeat import ENV_HEARTBEAT_TIMEOUT
from tests.kernel.kernel_session import (
    BELOW_AND_CRASH,
    CAP_S,
    cpu_seconds,
    hotswitch_json,
    hotswitch_kernel,
    processes_mentioning,
    wait_progressing,
)
from tests.kernel.launch.slurm.slurm_cluster import slurm_on_loopback

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_cluster_at_a_time")]  # tests/conftest.py

HEARTBEAT_TIMEOUT_S = "10"
# Step events and lines as fast as a rank can send them: none may be lost on the way.
STEPS = """
import os
print(f"rank {job.rank} in Slurm job {os.environ['SLURM_JOB_ID']}")
for step in range(3000):
    job.emit({"type": "step", "step": step, "loss": float(job.rank)})
    if step % 10 == 0:
        print(f"step {step}")
"""
FAILING = """
if job.rank == 1:
    raise ValueError("rank 1 cannot go on")
"""
FOREVER = """
import time
job.emit({"type": "step", "step": 0, "loss": 0.0})
while True:
    time.sleep(0.1)
"""


@pytest.fixture(scope="module")
def slurm_conf(tmp_path_factory):
    saved = {k: os.environ.get(k) for k in ("SLURM_CONF", ENV_HEARTBEAT_TIMEOUT)}
    with slurm_on_loopback(tmp_path_factory.mktemp("slurm")) as conf:
        os.environ.update({"SLURM_CONF": str(conf), ENV_HEARTBEAT_TIMEOUT: HEARTBEAT_TIMEOUT_S})
        try:
            yield conf
        finally:
            for key, value in saved.items():
                os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


@pytest.fixture(scope="module")
def kernel(slurm_conf, tmp_path_factory):
    session = hotswitch_kernel(tmp_path_factory)
    yield session
    session.shutdown()


def _queue() -> list[str]:
    return subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split()


def _rank_processes() -> list:
    return [p for p in processes_mentioning("hotswitch.kernel.worker") if "slurm" in " ".join(p.cmdline())]


def _nothing_left(what: str) -> None:
    def progress():
        left = _rank_processes()
        return len(left), cpu_seconds(left), tuple(_queue())

    wait_progressing(lambda: not _queue() and not _rank_processes(), progress, what)


def test_slurm_job_runs_as_a_batch_job_and_reports_its_node(kernel):
    msg_id, reply = kernel.execute(f"%%train --launcher slurm -n 2 --wait --name batch\n{STEPS}", timeout=CAP_S)
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert kernel.value("jobs['batch'].status") == "succeeded", kernel.text(msg_id)
    handle = kernel.value("jobs['batch'].handle")
    assert handle.startswith("slurm:")
    assert kernel.value("{r: p['node'] for r, p in jobs['batch'].placement.items()}") == {
        "0": "localhost",
        "1": "localhost",
    }
    for rank in (0, 1):  # every step event arrived, in order
        steps = kernel.value(f"[e['step'] for e in jobs['batch'].events_of('step', rank={rank})]")
        assert steps == list(range(3000))
    assert kernel.value("jobs['batch'].channel_losses['total']") == 0
    job_id = handle.removeprefix("slurm:")
    assert f"[stdout:1] rank 1 in Slurm job {job_id}" in kernel.text(msg_id)
    assert f"rank 0 in Slurm job {job_id}" in kernel.value("jobs['batch'].launcher.logs(jobs['batch'].handle, 0)")
    _nothing_left("the finished Slurm job leaving the queue")


def test_slurm_failing_rank_fails_the_job_with_its_traceback(kernel):
    msg_id, reply = kernel.execute(f"%%train --launcher slurm -n 2 --wait --name broken\n{FAILING}", timeout=CAP_S)
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert kernel.value("jobs['broken'].status") == "failed"
    text = kernel.text(msg_id)
    assert "[rank 1] failed on node localhost" in text and "[rank 1] ValueError: rank 1 cannot go on" in text
    _nothing_left("the failed Slurm job ending on its node")


def test_slurm_writes_below_python_and_a_segfaults_last_lines_reach_the_cell(kernel):
    cell = f"%%train --launcher slurm -n 2 --wait --name below\n{BELOW_AND_CRASH}"
    msg_id, reply = kernel.execute(cell, timeout=CAP_S)
    assert reply["status"] == "ok", kernel.text(msg_id)
    text = kernel.text(msg_id)
    for rank in (0, 1):
        assert f"[stderr:{rank}] below python on rank {rank}" in text, text
        assert f"[stdout:{rank}] from a child of rank {rank}" in text, text
    assert "[stderr:1] last words below python" in text, text
    assert kernel.value("jobs['below'].status") == "failed"
    reason = kernel.value("jobs['below'].exit_reason")
    assert "SIGSEGV" in reason or "signal 11" in reason, reason
    _nothing_left("the crashed Slurm job ending on its node")


def test_slurm_ranks_stop_when_their_kernel_is_killed(slurm_conf, tmp_path_factory):
    session = hotswitch_kernel(tmp_path_factory)
    try:
        session.execute(f"%%train --launcher slurm -n 2 --name orphaned\n{FOREVER}")
        wait_progressing(
            lambda: len(session.value("jobs['orphaned'].events_of('step')")) == 2,
            lambda: (cpu_seconds(_rank_processes()), tuple(_queue())),
            "both ranks of the Slurm job starting",
        )
        os.kill(session.pid, signal.SIGKILL)  # no stop, no cancel: only the heartbeat can tell
        _nothing_left("the ranks and the Slurm job ending after their kernel was killed")
    finally:
        session.shutdown()


def test_slurm_controller_that_does_not_answer_is_refused_within_seconds(slurm_conf, tmp_path, monkeypatch):
    dead = tmp_path / "slurm.conf"
    text = slurm_conf.read_text()
    port = next(line for line in text.splitlines() if line.startswith("SlurmctldPort="))
    dead.write_text(text.replace(port, "SlurmctldPort=1"))
    monkeypatch.setenv("SLURM_CONF", str(dead))
    started = time.monotonic()
    with pytest.raises(ValueError, match="the Slurm controller does not answer"):
        SlurmLauncher()
    assert time.monotonic() - started < 30


def test_slurm_commands_missing_are_named(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ValueError, match="needs Slurm's client commands on this machine"):
        SlurmLauncher()


def test_slurm_headless_train_runs_the_same_job(slurm_conf, tmp_path):
    argv = ["train", "--launcher", "slurm", "-n", "2", "--plan", "dp2", "--steps", "2", "--batch-size", "4"]
    argv += ["--max-len", "64"]
    result = hotswitch_json(argv, tmp_path, CAP_S)
    assert result["status"] == "succeeded" and result["steps"] == 2
    _nothing_left("the headless Slurm job leaving the queue")


def test_slurm_detached_job_is_attached_again_after_a_kernel_restart(kernel):
    msg_id, reply = kernel.execute(f"%%train --launcher slurm -n 2 --detach --name kept\n{FOREVER}")
    assert reply["status"] == "ok", kernel.text(msg_id)
    job_id = kernel.value("jobs['kept'].handle").removeprefix("slurm:")
    wait_progressing(
        lambda: len(kernel.value("jobs['kept'].events_of('step')")) == 2,
        lambda: (cpu_seconds(_rank_processes()), tuple(_queue())),
        "both ranks of the detached Slurm job starting",
    )
    kernel.manager.restart_kernel(now=True)
    kernel.client.wait_for_ready(timeout=CAP_S)
    kernel.pid = kernel.manager.provisioner.process.pid
    assert _queue() == [job_id], "the restart ended a detached Slurm job"
    msg_id, reply = kernel.execute("%train_attach kept")
    assert reply["status"] == "ok" and "job 'kept' attached" in kernel.text(msg_id), kernel.text(msg_id)
    assert kernel.value("jobs['kept'].handle") == f"slurm:{job_id}"
    assert kernel.value("jobs['kept'].stop()") == "stopped"
    _nothing_left("the attached Slurm job ending once stopped")


POOL_BODY = """
import torch.distributed as dist
total = torch.ones(1)
dist.all_reduce(total)
job.emit({"type": "sum", "value": total.item()})
"""


def test_slurm_pool_keeps_ranks_warm_in_one_batch_job_and_stop_cancels_it(kernel):
    msg_id, reply = kernel.execute("%train_pool start batch --launcher slurm -n 2")
    assert reply["status"] == "ok" and "2 ranks ready" in kernel.text(msg_id), kernel.text(msg_id)
    job_id = kernel.value("pools['batch'].job.handle").removeprefix("slurm:")
    assert _queue() == [job_id]
    msg_id, reply = kernel.execute(f"%%train --pool batch --wait --name onbatch\n{POOL_BODY}")
    assert kernel.value("jobs['onbatch'].status") == "succeeded", kernel.text(msg_id)
    assert [e["value"] for e in kernel.value("jobs['onbatch'].events_of('sum')")] == [2.0, 2.0]
    msg_id, reply = kernel.execute("%%ranks batch\nimport os\nos.environ['SLURM_JOB_ID'], total.item()")
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert kernel.value("{r: v for r, v in _.items()}") == {"0": [job_id, 2.0], "1": [job_id, 2.0]}
    msg_id, reply = kernel.execute("%train_pool stop batch")
    assert reply["status"] == "ok" and "stopped" in kernel.text(msg_id), kernel.text(msg_id)
    _nothing_left("the Slurm pool's job leaving the queue and its ranks ending")
