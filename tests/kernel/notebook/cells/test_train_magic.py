"""``%%train`` in real kernel processes: events, rank output, control, failures, and no orphans."""

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from hotswitch.backend.train.loop.events import read_events
from tests.kernel.kernel_session import KernelSession, is_rank, processes_mentioning, train_body, wait_until

pytestmark = pytest.mark.slow

WAIT_FOR_CONTROL = """
import time
deadline = time.time() + 60
while job.rank == 0 and time.time() < deadline:
    received = job.control()
    if received:
        job.emit({"type": "echo", "control": received[0]})
        break
    time.sleep(0.05)
"""

RANK_ONE_FAILS = (
    'import time\nif job.rank == 1:\n    print("about to fail")\n    divisor = 0\n    1 / divisor\ntime.sleep(120)\n'
)

SLEEP = "import time\ntime.sleep(120)\n"


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("jupyter-prefix")
    cli = [sys.executable, "-m", "hotswitch.kernel.cli", "kernel", "install", "--prefix", str(prefix)]
    subprocess.run(cli, check=True, capture_output=True)
    return prefix


@pytest.fixture(scope="module")
def kernel(prefix):
    session = KernelSession("hotswitch", prefix / "share" / "jupyter" / "kernels")
    yield session
    session.shutdown()


def _workers(session):
    """The rank processes (not the torchrun agent)."""
    return [p for p in session.descendants() if is_rank(p)]


def test_kernelspec_is_listed_by_jupyter(prefix):
    env = {**os.environ, "JUPYTER_PATH": str(prefix / "share" / "jupyter")}
    out = subprocess.run(
        [sys.executable, "-m", "jupyter_client.kernelspecapp", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    spec = json.loads(out.stdout)["kernelspecs"]["hotswitch"]["spec"]
    assert spec["display_name"] == "Python 3 (hotswitch)"
    assert spec["argv"][1:3] == ["-m", "hotswitch.kernel"]
    from ipykernel.kernelspec import get_kernel_dict

    assert spec["kernel_protocol_version"] == get_kernel_dict()["kernel_protocol_version"]  # as the stock kernel's


def test_train_wait_delivers_every_step_event_and_labelled_rank_output(kernel):
    msg_id, reply = kernel.execute("%%train -n 2 --wait --name steps\n" + train_body(steps=3))
    assert reply["status"] == "ok", kernel.text(msg_id)
    text = kernel.text(msg_id)
    for rank in (0, 1):
        for step in range(3):
            assert f"[stdout:{rank}] step {step} loss " in text
    assert "job 'steps' succeeded" in text
    steps = kernel.value('[(e["rank"], e["step"]) for e in jobs["steps"].events if e["type"] == "step"]')
    assert sorted(map(tuple, steps)) == [(r, s) for r in (0, 1) for s in range(3)]
    losses = kernel.value('[e["loss"] for e in jobs["steps"].events]')
    assert all(isinstance(x, float) and x >= 0 for x in losses)
    assert kernel.value('jobs["steps"].status') == "succeeded"
    assert kernel.value('jobs["steps"].channel_stats.dropped') == 0
    assert _workers(kernel) == []
    folder = Path(re.search(r"job 'steps': events recorded in (\S+)", text).group(1))
    assert read_events(folder) == kernel.value('list(jobs["steps"].events)')
    summary = json.loads((folder / "job.json").read_text())
    assert (summary["status"], summary["handle"]) == ("succeeded", kernel.value('jobs["steps"].handle'))
    for rank in (0, 1):  # each rank's own output stays in the run folder, as the cell showed it
        kept = [x for x in (folder / "logs" / f"rank-{rank}.log").read_text().splitlines() if x.startswith("step ")]
        assert kept == [x.split("] ", 1)[1] for x in text.splitlines() if x.startswith(f"[stdout:{rank}] step ")]


BELOW_PYTHON = """
import os, subprocess
print("from python", flush=True)
os.write(2, b"below python on rank %d\\n" % job.rank)
subprocess.run(["sh", "-c", "echo from a child of rank $RANK"], check=True)
"""


def test_what_a_rank_writes_below_python_reaches_the_cell_and_its_log(kernel):
    msg_id, reply = kernel.execute("%%train -n 2 --wait --name below\n" + BELOW_PYTHON)
    assert reply["status"] == "ok", kernel.text(msg_id)
    text = kernel.text(msg_id)
    folder = Path(re.search(r"job 'below': events recorded in (\S+)", text).group(1))
    for rank in (0, 1):
        assert f"[stderr:{rank}] below python on rank {rank}" in text, text
        assert f"[stdout:{rank}] from a child of rank {rank}" in text, text
        kept = (folder / "logs" / f"rank-{rank}.log").read_text()
        assert f"below python on rank {rank}" in kept and f"from a child of rank {rank}" in kept
    assert kernel.value('jobs["below"].channel_stats.dropped') == 0


def test_cell_returns_at_once_and_switch_reaches_rank_zero(kernel):
    msg_id, reply = kernel.execute("%%train -n 2 --name switchy\n" + WAIT_FOR_CONTROL)  # no --wait
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert "<Job 'switchy'" in kernel.text(msg_id)
    assert wait_until(lambda: kernel.value('jobs["switchy"].status') == "running", timeout=60)
    kernel.execute('jobs["switchy"].switch("dp2")')
    assert kernel.value('jobs["switchy"].wait(60)') == "succeeded"
    echoes = kernel.value('[e for e in jobs["switchy"].events if e["type"] == "echo"]')
    assert echoes == [
        {"rank": 0, "type": "echo", "control": {"type": "control", "command": "switch", "strategy": "dp2"}}
    ]


def test_a_job_is_a_handle_to_subscribe_to_select_from_and_wait_on(kernel):
    kernel.execute("%%train -n 2 --name handle\n" + WAIT_FOR_CONTROL)
    kernel.execute('seen = []\nunsubscribe = jobs["handle"].on_event(seen.append)')
    assert wait_until(lambda: kernel.value('jobs["handle"].status') == "running", timeout=60)
    for request, reason in (
        ('"tp3"', "it uses 3 ranks but the job has 2"),
        ('"dp2tp"', "cannot parse strategy"),
        ('[["tp2", 64]]', "one of them 0"),
        ("42", "switch takes"),
    ):
        msg_id, reply = kernel.execute(f'jobs["handle"].switch({request})')
        assert reply["status"] == "error" and reason in kernel.text(msg_id), (request, kernel.text(msg_id))
    kernel.execute('jobs["handle"].switch([["tp2", 64], ["dp2", 0]])')
    echoes = kernel.value('jobs["handle"].wait_until(lambda: jobs["handle"].events_of("echo", rank=0), timeout=60)')
    assert echoes[0]["control"] == {"type": "control", "command": "switch", "strategy": [["tp2", 64], ["dp2", 0]]}
    assert kernel.value('jobs["handle"].wait(60)') == "succeeded"
    assert kernel.value('seen == jobs["handle"].events and len(seen) == 1')
    msg_id, reply = kernel.execute('jobs["handle"].wait_until(lambda: jobs["handle"].events_of("step"), timeout=60)')
    text = kernel.text(msg_id)
    assert (
        reply["status"] == "error" and "JobEnded" in text and "the job ended (succeeded) before that happened" in text
    )


def test_failing_rank_fails_the_job_with_its_traceback_and_tears_down_the_rest(kernel):
    began = time.monotonic()
    msg_id, reply = kernel.execute("%%train -n 2 --wait --name failing\n" + RANK_ONE_FAILS)
    assert reply["status"] == "ok"
    assert time.monotonic() - began < 40  # rank 0 would sleep 120 s if it were not torn down
    text = kernel.text(msg_id)
    assert "[stdout:1] about to fail" in text
    assert "[rank 1] Traceback (most recent call last):" in text
    assert "[rank 1] ZeroDivisionError: division by zero" in text
    assert "[rank 1] locals of <module> (body.py:5):" in text  # the failing frame's, short
    assert "[rank 1]     divisor = 0" in text and "[rank 1]     time = " not in text  # values, not modules
    assert kernel.value('jobs["failing"].status') == "failed"
    assert kernel.value('jobs["failing"].failure["rank"]') == 1
    job_dir = kernel.value('str(jobs["failing"].job_dir)')
    assert processes_mentioning(job_dir) == []


def test_syntax_error_launches_nothing(kernel):
    before = kernel.value("len(jobs)")
    msg_id, reply = kernel.execute("%%train -n 2\nfor i in range(3) print(i)\n")
    assert "SyntaxError" in kernel.text(msg_id)
    assert reply["status"] == "error"  # the cell fails, so Run All stops there
    assert kernel.value("len(jobs)") == before
    assert _workers(kernel) == []


def test_interrupt_during_wait_stops_the_job_and_leaves_no_process(kernel):
    msg_id, _ = kernel.execute("%%train -n 2 --wait --name sleepy\n" + SLEEP, wait=False)
    assert wait_until(lambda: len(_workers(kernel)) == 2, timeout=60), kernel.drain() or kernel.text(msg_id)
    kernel.manager.interrupt_kernel()
    reply = kernel.client.get_shell_msg(timeout=120)
    assert reply["parent_header"]["msg_id"] == msg_id
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
    assert kernel.value('jobs["sleepy"].status') == "stopped"
    assert wait_until(lambda: kernel.descendants() == [], timeout=60)
    assert processes_mentioning(kernel.value('str(jobs["sleepy"].job_dir)')) == []


def test_a_second_interrupt_while_stopping_leaves_no_process_either(kernel):
    msg_id, _ = kernel.execute("%%train -n 2 --wait --name twice\n" + SLEEP, wait=False)
    assert wait_until(lambda: len(_workers(kernel)) == 2, timeout=60), kernel.drain() or kernel.text(msg_id)
    kernel.manager.interrupt_kernel()
    time.sleep(0.3)  # within the second its stop gives a body that reads no controls
    kernel.manager.interrupt_kernel()
    reply = kernel.client.get_shell_msg(timeout=120)
    assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["ename"] == "KeyboardInterrupt"
    assert wait_until(lambda: kernel.value('jobs["twice"].done'), timeout=120)
    assert kernel.value('jobs["twice"].status') == "stopped"
    assert wait_until(lambda: kernel.descendants() == [], timeout=60)


def test_two_nodes_of_two_ranks_form_one_job_of_four(kernel):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    body = (
        'import torch.distributed as dist\ndist.init_process_group("gloo")\n'
        "total = torch.ones(1)\ndist.all_reduce(total)\n"
        'job.emit({"type": "world", "world_size": dist.get_world_size(), "total": total.item()})\n'
        "dist.destroy_process_group()\n"
    )
    common = f"--nodes 2 --rdzv-endpoint 127.0.0.1:{port} --rdzv-id t{port}"
    for node in (0, 1):
        _, reply = kernel.execute(f"%%train -n 2 {common} --node-rank {node} --name node{node}\n{body}")
        assert reply["status"] == "ok"
    assert kernel.value('[jobs["node0"].wait(120), jobs["node1"].wait(120)]') == ["succeeded", "succeeded"]
    seen = kernel.value('[e for n in ("node0", "node1") for e in jobs[n].events]')
    assert sorted(e["rank"] for e in seen) == [0, 1, 2, 3]
    assert {(e["world_size"], e["total"]) for e in seen} == {(4, 4.0)}


def test_stock_kernel_with_load_ext_and_shutdown_leaves_no_process():
    session = KernelSession("python3")
    try:
        _, reply = session.execute("%load_ext hotswitch.kernel")
        assert reply["status"] == "ok"
        msg_id, reply = session.execute("%%train -n 2 --name background\n" + SLEEP)
        assert reply["status"] == "ok", session.text(msg_id)
        assert wait_until(lambda: len(_workers(session)) == 2, timeout=60)
        job_dir = session.value('str(jobs["background"].job_dir)')
        assert processes_mentioning(job_dir)
    finally:
        session.shutdown()
    assert wait_until(lambda: processes_mentioning(job_dir) == [], timeout=60)
    assert not os.path.exists(job_dir)


HOT_SWITCH = """
from hotswitch.backend.train.run.recipe import run
run({"model": "tiny", "steps": 4, "batch_size": 6, "max_len": 96, "plan": [["tp2", 95], ["dp2", 0]]},
    job.emit, job.control)
"""


def test_a_hot_switch_training_reports_its_events_to_the_job(kernel):
    msg_id, reply = kernel.execute("%%train -n 2 --wait --name hot\n" + HOT_SWITCH)
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert kernel.value('jobs["hot"].status') == "succeeded", kernel.text(msg_id)
    kinds = kernel.value('[e["type"] for e in jobs["hot"].events]')
    assert kinds[:3] == ["data", "plan", "graphs"] and kinds[-1] == "done"  # what it trains on, first
    assert kinds.count("step") == 4 and "switch" in kinds
    assert kernel.value('jobs["hot"].plan["buckets"]') == [["dp1tp2pp1", 95], ["dp2tp1pp1", 0]]
    assert kernel.value('sorted(jobs["hot"].graphs["exec"])') == ["dp1tp2pp1", "dp2tp1pp1"]
    assert kernel.value('sorted({e["rank"] for e in jobs["hot"].events})') == [0]  # the trainer reports from rank 0


def test_a_hung_rank_ends_at_the_timeout_with_a_clear_message(kernel):
    msg_id, reply = kernel.execute("%%train -n 2 --wait --timeout 20 --name hung\n" + SLEEP)
    assert reply["status"] == "ok"
    assert kernel.value('jobs["hung"].status') == "timed out"
    assert "timed out after 20 s; stopping every rank. Raise --timeout" in kernel.text(msg_id)
    assert processes_mentioning(kernel.value('str(jobs["hung"].job_dir)')) == []


KILLED = """
import os, signal, time
if job.rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(60)
"""


def test_a_killed_worker_fails_the_job_with_the_reason(kernel):
    _, reply = kernel.execute("%%train -n 2 --wait --name killed\n" + KILLED)
    assert reply["status"] == "ok"
    assert kernel.value('jobs["killed"].status') == "failed"
    reason = kernel.value('jobs["killed"].exit_reason')
    assert "SIGKILL" in reason or "signal 9" in reason, reason
    assert processes_mentioning(kernel.value('str(jobs["killed"].job_dir)')) == []


FLOOD = "for i in range(50_000):\n    print(f'line {i}')\n"


def test_a_flood_reaches_the_cell_within_what_iopub_delivers_and_says_what_it_held_back(kernel):
    msg_id, reply = kernel.execute("%%train -n 1 --wait --name flood\n" + FLOOD, timeout=600)
    assert reply["status"] == "ok", kernel.text(msg_id)[-2000:]
    text = kernel.text(msg_id)
    shown = [x for x in text.splitlines() if x.startswith("[stdout:0] line ")]
    held = sum(int(n.replace(",", "")) for n in re.findall(r"\[hotswitch\] ([\d,]+) output lines held back", text))
    assert held > 0 and len(shown) + held == 50_000, (len(shown), held)  # every line shown or counted
    assert shown[0] == "[stdout:0] line 0" and "job 'flood' succeeded" in text


SEGFAULT = """
import os, signal, time
if job.rank == 1:
    os.write(2, b"last words below python\\n")
    print("last words from python", flush=True)
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGSEGV)
time.sleep(120)
"""


def test_a_rank_killed_by_a_signal_says_which_with_its_last_lines(kernel):
    msg_id, reply = kernel.execute("%%train -n 2 --wait --name crash\n" + SEGFAULT)
    assert reply["status"] == "ok"
    text = kernel.text(msg_id)
    assert kernel.value('jobs["crash"].status') == "failed"
    reason = kernel.value('jobs["crash"].exit_reason')
    assert "SIGSEGV" in reason or "signal 11" in reason, reason
    assert "[stderr:1] last words below python" in text and "[stdout:1] last words from python" in text, text
    crash = text.split("[hotswitch] a rank crashed:\n", 1)[1]  # the crash's trace, from the agent's log
    assert crash.startswith("Fatal Python error: Segmentation fault") and "in <module>" in crash, text
    listed, _ = kernel.execute("%jobs")
    line = next(x for x in kernel.text(listed).splitlines() if x.startswith("crash "))
    assert "failed" in line and "rank 1 killed by SIGSEGV" in line, kernel.text(listed)  # why, on its line
    assert processes_mentioning(kernel.value('str(jobs["crash"].job_dir)')) == []


# threads, and what every open file descriptor points at (the one listing them closes meanwhile)
RESOURCES_HELPER = """
import gc as _gc, os as _os, threading as _threading
def _resources():
    _gc.collect()  # what only waits for the collector is not a leak
    targets = []
    for fd in _os.listdir("/proc/self/fd"):
        try:
            targets.append(_os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:
            pass
    return [_threading.active_count(), targets]
"""
RESOURCES = "_resources()"
WARM_JOBS, JOBS = 3, 5


def _lasting(targets: list[str]) -> list[str]:
    """Descriptors that a leak would leave: not zmq's eventfd signalers, whose number in the
    kernel wanders with its own threads, nor IPython's history database journal. A job's
    channel that stayed open would show as its TCP socket."""
    return [t for t in targets if t != "anon_inode:[eventfd]" and ".ipython" not in t]


def test_many_jobs_in_a_row_leak_nothing(kernel):
    quick = "%%train -n 2 --wait --name q{}\njob.emit({{'type': 'step', 'step': 0, 'loss': 0.0}})\n"
    kernel.execute(RESOURCES_HELPER)
    for i in range(WARM_JOBS):  # the kernel's own descriptors settle (history journal, zmq signalers)
        kernel.execute(quick.format(f"warm{i}"))
    pid = kernel.value("__import__('os').getpid()")
    before = kernel.value(RESOURCES)
    for i in range(JOBS):
        msg_id, reply = kernel.execute(quick.format(i))
        assert reply["status"] == "ok" and kernel.value(f'jobs["q{i}"].status') == "succeeded", kernel.text(msg_id)
    after = kernel.value(RESOURCES)
    assert after[0] <= before[0], f"threads grew from {before[0]} to {after[0]}"
    opened = sorted((Counter(_lasting(after[1])) - Counter(_lasting(before[1]))).elements())
    assert len(opened) <= 1, f"open files grew from {len(before[1])} to {len(after[1])}: {opened}"
    assert kernel.descendants() == [] and pid
