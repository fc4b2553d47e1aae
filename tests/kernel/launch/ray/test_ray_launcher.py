"""``--launcher ray`` from one notebook on a real two-node Ray cluster on loopback (two raylets
and a GCS started by the fixture): a job spans both nodes, each rank names its node, a rank
killed on the second node fails the job and tears the other node down, and nothing is left on
either node. Bad input (no cluster there, Ray missing, a channel the nodes cannot reach) is
refused before anything starts."""

import json
import os
import subprocess
import sys
import time

import pytest

from hotswitch.kernel.launch.ray import launcher as ray_launcher
from tests.kernel.kernel_session import (
    BELOW_AND_CRASH,
    CAP_S,
    cpu_seconds,
    hotswitch_json,
    hotswitch_kernel,
    processes_mentioning,
    wait_none_mentioning,
    wait_progressing,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_cluster_at_a_time")]  # tests/conftest.py

# Every Ray server binds loopback only: with clusters "disabled", Ray's default for laptops, it
# advertises and binds 127.0.0.1 instead of the machine's address. (Ray's CLI then refuses a
# second node on one machine; its test cluster, which starts raylets directly, does not.)
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}

# Step events and lines as fast as a rank can send them: none may be lost on the way.
ACROSS = """
import os, time
print(f"rank {job.rank} of {job.world_size} on node {os.environ['HOTSWITCH_NODE']}")
for step in range(3000):
    job.emit({"type": "step", "step": step, "loss": float(job.rank)})
    if step % 10 == 0:
        print(f"step {step}")
"""
KILLED = """
import os, signal, time
job.emit({"type": "step", "step": 0, "loss": 0.0})
time.sleep(1.0)
if job.rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
while True:
    time.sleep(0.1)
"""


@pytest.fixture(scope="module")
def ray_address():
    saved = {k: os.environ.get(k) for k in RAY_ENV}
    os.environ.update(RAY_ENV)
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=2)
        yield cluster.address
    finally:
        cluster.shutdown()
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


@pytest.fixture(scope="module")
def kernel(ray_address, tmp_path_factory):
    session = hotswitch_kernel(tmp_path_factory)
    yield session
    session.shutdown()


def _nothing_left(what: str) -> None:
    wait_none_mentioning("hotswitch-ray-", what)


def test_ray_job_spans_two_nodes_each_rank_naming_its_node(kernel, ray_address):
    cell = f"%%train --launcher ray --ray-address {ray_address} --nodes 2 -n 1 --wait --name across\n{ACROSS}"
    msg_id, reply = kernel.execute(cell, timeout=CAP_S)
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert kernel.value("jobs['across'].status") == "succeeded", kernel.text(msg_id)
    placement = kernel.value("{r: p['node'] for r, p in jobs['across'].placement.items()}")
    assert sorted(placement) == ["0", "1"] and placement["0"] != placement["1"]  # two Ray nodes
    for rank in (0, 1):  # every step event of both nodes arrived, in order
        steps = kernel.value(f"[e['step'] for e in jobs['across'].events_of('step', rank={rank})]")
        assert steps == list(range(3000))
    assert kernel.value("jobs['across'].channel_losses['total']") == 0
    text = kernel.text(msg_id)
    for rank in (0, 1):
        assert f"[stdout:{rank}] rank {rank} of 2 on node {placement[str(rank)]}" in text
        logs = kernel.value(f"jobs['across'].launcher.logs(jobs['across'].handle, {rank})")
        assert f"rank {rank} of 2 on node" in logs  # kept after the job's folders are gone
    assert kernel.value("jobs['across'].handle").startswith("ray:")
    _nothing_left("the processes of a finished Ray job ending")


def test_ray_rank_killed_on_the_second_node_fails_the_job_and_stops_the_first(kernel, ray_address):
    cell = f"%%train --launcher ray --ray-address {ray_address} --nodes 2 -n 1 --wait --name killed\n{KILLED}"
    msg_id, reply = kernel.execute(cell, timeout=CAP_S)
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert kernel.value("jobs['killed'].status") == "failed", kernel.text(msg_id)
    reason = kernel.value("jobs['killed'].exit_reason")
    assert "rank 1" in reason and "SIGKILL" in reason, reason
    _nothing_left("rank 0 on the first node ending after rank 1 was killed on the second")


def test_ray_writes_below_python_on_both_nodes_and_a_segfaults_last_lines_reach_the_cell(kernel, ray_address):
    cell = f"%%train --launcher ray --ray-address {ray_address} --nodes 2 -n 1 --wait --name below\n{BELOW_AND_CRASH}"
    msg_id, reply = kernel.execute(cell, timeout=CAP_S)
    assert reply["status"] == "ok", kernel.text(msg_id)
    text = kernel.text(msg_id)
    for rank in (0, 1):
        assert f"[stderr:{rank}] below python on rank {rank}" in text, text
        assert f"[stdout:{rank}] from a child of rank {rank}" in text, text
    assert "[stderr:1] last words below python" in text, text
    assert kernel.value("jobs['below'].status") == "failed"
    reason = kernel.value("jobs['below'].exit_reason")
    assert "rank 1" in reason and ("SIGSEGV" in reason or "signal 11" in reason), reason
    _nothing_left("rank 0 on the first node ending after rank 1 crashed on the second")


def test_ray_address_with_no_cluster_is_refused_within_seconds(kernel):
    jobs_before = kernel.value("len(jobs.names())")
    started = time.monotonic()
    msg_id, reply = kernel.execute("%%train --launcher ray --ray-address 127.0.0.1:1 --nodes 2\npass\n")
    assert reply["status"] == "error"
    assert "no Ray cluster answers at 127.0.0.1:1" in kernel.text(msg_id)
    assert time.monotonic() - started < 30  # the address is probed before Ray is even imported
    assert kernel.value("len(jobs.names())") == jobs_before


def test_ray_missing_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ValueError, match=r"--launcher ray needs Ray on this machine: pip install 'hotswitch\[ray\]'"):
        ray_launcher.import_ray()


def test_ray_refuses_a_loopback_channel_for_nodes_on_other_machines():
    nodes = [{"Alive": True, "NodeManagerAddress": "10.0.0.5"}]
    with pytest.raises(ValueError, match=r"--channel-host"):
        ray_launcher.check_channel_reachable("tcp://127.0.0.1:5555", nodes)
    ray_launcher.check_channel_reachable("tcp://127.0.0.1:5555", [{"Alive": True, "NodeManagerAddress": "127.0.0.1"}])
    ray_launcher.check_channel_reachable("tcp://10.0.0.1:5555", nodes)


def test_ray_headless_train_spans_both_nodes(ray_address, tmp_path):
    argv = ["train", "--launcher", "ray", "--ray-address", ray_address, "--nodes", "2", "-n", "1", "--plan", "dp2"]
    argv += ["--steps", "2", "--batch-size", "4", "--max-len", "64"]
    result = hotswitch_json(argv, tmp_path, CAP_S)
    assert result["status"] == "succeeded" and result["steps"] == 2
    _nothing_left("the headless Ray job's processes ending")


def test_ray_more_nodes_than_the_cluster_has_are_refused_naming_both(kernel, ray_address):
    msg_id, reply = kernel.execute(f"%%train --launcher ray --ray-address {ray_address} --nodes 3\npass\n")
    assert reply["status"] == "error"
    assert "--nodes 3 needs 3 Ray nodes; the cluster at" in kernel.text(msg_id) and "has 2" in kernel.text(msg_id)


PATIENT = """
import time
job.emit({"type": "step", "step": 0, "loss": float(job.rank)})
while True:
    time.sleep(0.1)
"""
BRIEF = """
job.emit({"type": "step", "step": 0, "loss": float(job.rank)})
print(f"rank {job.rank} done")
"""


AGENTS = "ray::NodeAgent"  # a node agent's process title


def _agents() -> list:
    return processes_mentioning(AGENTS)


def _detach_and_restart(kernel, cell: str, name: str) -> None:
    """Run ``cell`` (a detached job called ``name``) until both ranks have stepped, then restart
    the kernel, which forgets it."""
    msg_id, reply = kernel.execute(cell)
    assert reply["status"] == "ok", kernel.text(msg_id)
    wait_progressing(
        lambda: len(kernel.value(f"jobs['{name}'].events_of('step')")) == 2,
        lambda: (cpu_seconds(processes_mentioning("hotswitch-ray-")), cpu_seconds(_agents())),
        f"both ranks of the detached Ray job {name!r} starting",
    )
    assert len(_agents()) == 2  # what the tests below see go
    kernel.manager.restart_kernel(now=True)
    kernel.client.wait_for_ready(timeout=CAP_S)
    kernel.pid = kernel.manager.provisioner.process.pid


def _placements_held(ray_address: str) -> list[str]:
    """The placement groups the cluster still holds (asked from a process of its own)."""
    ask = (
        "import json, ray; ray.init(address=%r, log_to_driver=False); "
        "print(json.dumps([g['name'] for g in ray.util.placement_group_table().values() if g['state'] != 'REMOVED']))"
    )
    done = subprocess.run([sys.executable, "-c", ask % ray_address], capture_output=True, text=True, timeout=CAP_S)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_ray_detached_job_is_attached_again_after_a_kernel_restart(kernel, ray_address):
    cell = f"%%train --launcher ray --ray-address {ray_address} --nodes 2 -n 1 --detach --name kept\n{PATIENT}"
    _detach_and_restart(kernel, cell, "kept")
    assert processes_mentioning("hotswitch-ray-"), "the restart ended a detached Ray job"
    msg_id, reply = kernel.execute("%train_attach kept")
    assert reply["status"] == "ok" and "job 'kept' attached" in kernel.text(msg_id), kernel.text(msg_id)
    assert kernel.value("jobs['kept'].handle").startswith("ray:")
    assert kernel.value("jobs['kept'].stop()") == "stopped"
    _nothing_left("the attached Ray job ending once stopped")
    wait_none_mentioning(AGENTS, "the job's node agents being released")
    assert _placements_held(ray_address) == []


def test_ray_detached_job_nobody_attaches_to_releases_itself(kernel, ray_address):
    kernel.execute("import os; os.environ['HOTSWITCH_RAY_LINGER_S'] = '1'")  # not an hour
    cell = f"%%train --launcher ray --ray-address {ray_address} --nodes 2 -n 1 --detach --name alone\n{BRIEF}"
    _detach_and_restart(kernel, cell, "alone")
    wait_none_mentioning(AGENTS, "the forgotten job's agents releasing themselves")
    _nothing_left("the forgotten job's ranks")


POOL_BODY = """
import torch.distributed as dist
total = torch.ones(1)
dist.all_reduce(total)
job.emit({"type": "sum", "value": total.item()})
"""


def test_ray_pool_keeps_ranks_warm_on_both_nodes_and_stop_releases_them(kernel, ray_address):
    msg_id, reply = kernel.execute(f"%train_pool start far --launcher ray --ray-address {ray_address} --nodes 2 -n 1")
    assert reply["status"] == "ok" and "2 ranks ready" in kernel.text(msg_id), kernel.text(msg_id)
    msg_id, reply = kernel.execute(f"%%train --pool far --wait --name onfar\n{POOL_BODY}")
    assert kernel.value("jobs['onfar'].status") == "succeeded", kernel.text(msg_id)
    assert [e["value"] for e in kernel.value("jobs['onfar'].events_of('sum')")] == [2.0, 2.0]
    msg_id, reply = kernel.execute("%%ranks far\nimport os\nos.environ['HOTSWITCH_NODE'], total.item()")
    assert reply["status"] == "ok", kernel.text(msg_id)
    values = kernel.value("{r: v for r, v in _.items()}")
    assert values["0"][1] == values["1"][1] == 2.0  # what the job's body left, on each rank
    assert values["0"][0] != values["1"][0]  # one rank on each Ray node
    msg_id, reply = kernel.execute("%train_pool stop far")
    assert reply["status"] == "ok" and "stopped" in kernel.text(msg_id), kernel.text(msg_id)
    _nothing_left("the Ray pool's ranks ending once stopped")
    wait_none_mentioning(AGENTS, "the Ray pool's node agents being released")
    held = "[g['name'] for g in __import__('ray').util.placement_group_table().values() if g['state'] != 'REMOVED']"
    assert kernel.value(held) == []
