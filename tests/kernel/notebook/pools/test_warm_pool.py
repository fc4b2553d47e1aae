"""Warm pools in a real kernel with real torchrun ranks: ``%train_pool``, ``%%train --pool`` as a
``Job``, ``%%ranks``, a namespace that lives across cells, failures that fail a cell and not the
pool, the bad inputs, and no process left once the pool or the kernel is gone."""

import os
import signal

import pytest

from hotswitch.backend.train.loop.events import read_events
from tests.kernel.kernel_session import (
    CAP_S,
    hotswitch_kernel,
    processes_mentioning,
    wait_none_mentioning,
    wait_progressing,
)

pytestmark = pytest.mark.slow

ALL_REDUCE = """
import torch.distributed as dist
x = 10 * job.rank
total = torch.ones(1)
dist.all_reduce(total)
job.emit({"type": "sum", "value": total.item()})
print("rank", job.rank, "done")
"""
FOREVER = "import time\nwhile True:\n    time.sleep(0.05)\n"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    session = hotswitch_kernel(tmp_path_factory)
    runs = tmp_path_factory.mktemp("runs")
    session.execute(f"import os; os.environ['HOTSWITCH_RUNS'] = {str(runs)!r}")
    yield session
    session.shutdown()


def run(session, code: str):
    """Run a cell; (its status, everything it showed)."""
    msg_id, reply = session.execute(code, timeout=CAP_S)
    return reply["status"], session.text(msg_id)


def ok(session, code: str) -> str:
    status, text = run(session, code)
    assert status == "ok", text
    return text


def refused(session, code: str, *phrases: str) -> None:
    status, text = run(session, code)
    assert status == "error", text
    for phrase in phrases:
        assert phrase in text, text


def test_cells_share_the_warm_ranks_and_their_namespace(kernel):
    assert "2 ranks ready" in ok(kernel, "%train_pool start warm -n 2")
    pids = kernel.value("sorted(p['pid'] for p in pools['warm'].job.placement.values())")
    text = ok(kernel, f"%%train --pool warm --wait --name first\n{ALL_REDUCE}")
    assert kernel.value("jobs['first'].status") == "succeeded", text
    assert [e["value"] for e in kernel.value("jobs['first'].events_of('sum')")] == [2.0, 2.0]
    assert "[stdout:1] rank 1 done" in text and "[stdout:0] rank 0 done" in text
    folder = text.split("events recorded in ", 1)[1].split()[0]
    assert [e["value"] for e in read_events(folder) if e["type"] == "sum"] == [2.0, 2.0]
    # %%ranks sees what the job's body left, and streams each rank's lines labelled
    text = ok(kernel, "%%ranks warm\nprint('x is', x)\nx + 1")
    assert "[stdout:0] x is 0" in text and "[stdout:1] x is 10" in text
    assert "Out[0]: 1" in text and "Out[1]: 11" in text
    assert ok(kernel, "r = _\nprint(dict(r))").strip().endswith("{0: 1, 1: 11}")
    assert "Out[1]: [10.0, 10.0]" in ok(kernel, "%%ranks warm\ntorch.full((2,), float(x))")
    # the same processes ran every cell
    assert kernel.value("sorted(p['pid'] for p in pools['warm'].job.placement.values())") == pids
    assert "warm        idle" in ok(kernel, "%train_pool")


def test_a_failing_cell_fails_alone_and_the_pool_goes_on(kernel):
    text = ok(kernel, "%%train --pool warm --wait --name bad\nraise ValueError('boom')")
    assert kernel.value("jobs['bad'].status") == "failed", text
    assert "ValueError: boom" in text
    refused(kernel, "%%ranks warm\n1 / (x - 10)", "raised on 1 rank(s): rank 1: ZeroDivisionError", "[rank 1] ")
    assert "Out[1]: 10" in ok(kernel, "%%ranks warm\nx")
    assert kernel.value("pools['warm'].status") == "idle"


def test_a_busy_pool_refuses_other_cells_until_its_job_is_stopped(kernel):
    ok(kernel, f"%%train --pool warm --name long\n{FOREVER}")
    refused(kernel, "%%ranks warm\nx", "pool 'warm' is busy running job 'long'", "%train_stop")
    refused(kernel, "%%train --pool warm --name other\nx", "busy running job 'long'")
    assert "stopped" in ok(kernel, "%train_stop long")
    assert "Out[0]: 0" in ok(kernel, "%%ranks warm\nx")


def test_bad_inputs_are_refused_with_what_to_do(kernel):
    refused(kernel, "%train_pool start warm -n 2", "a pool named 'warm' runs already")
    refused(kernel, "%%train --pool warm -n 4\nx", "has 2 ranks and this cell asks for 4", "%train_pool start")
    refused(kernel, "%train_pool start far --launcher ray", "--launcher ray needs the cluster's head: --ray-address")
    refused(kernel, "%train_pool start far --nodes 2", "--nodes 2 with --launcher local needs --rdzv-endpoint")
    refused(kernel, "%train_pool start gpus --device cuda -n 64", "--device cuda: ", "GPU")
    refused(kernel, "%train_pool attach far", "no detached pool named 'far'", "--detach")
    refused(kernel, "%train_pool start 'bad name'", "the pool name 'bad name' is not valid")
    refused(kernel, "%train_pool stop nosuchpool", "there is no pool named 'nosuchpool'", "its pools are 'warm'")
    refused(kernel, "%%train --pool warm --detach\nx", "drop --detach")
    refused(kernel, "%%train --pool warm --device cuda\nx", "the pool's ranks run on cpu", "drop --device")
    refused(kernel, "%train_pool start never -n 1 --idle-timeout -5", "--idle-timeout -5", "0 for never")
    refused(kernel, "%%train --pool warm --partition gpu\nx", "%%train --pool with --partition", "drop --partition")
    refused(kernel, "%%ranks nowhere\nx", "no pool named 'nowhere'", "%train_pool start nowhere")
    refused(kernel, "%%train --pool nowhere\nx", "no pool named 'nowhere'")
    refused(kernel, "%%ranks warm\nx +", "SyntaxError")
    ok(kernel, "big = b'x' * 5_000_000")
    too_big = "over what pool 'warm''s channel carries"
    refused(kernel, "%%train --pool warm --push big\nx", too_big, "--max-message-bytes")


def test_a_pool_whose_rank_died_says_how_and_how_to_start_again(kernel):
    ok(kernel, "fragile = %train_pool start fragile -n 2")
    job_dir = kernel.value("str(fragile.job.job_dir)")
    victim = kernel.value("fragile.job.placement[1]['pid']")
    os.kill(victim, signal.SIGKILL)
    wait_progressing(
        lambda: kernel.value("fragile.job.done"),
        lambda: len(processes_mentioning(job_dir)),
        "the pool ending after a rank was killed",
    )
    refused(kernel, "%%ranks fragile\n1", "pool 'fragile' is gone (failed", "%train_pool start fragile -n 2")
    assert processes_mentioning(job_dir) == []
    assert "2 ranks ready" in ok(kernel, "%train_pool start fragile -n 2")
    assert "stopped" in ok(kernel, "%train_pool stop fragile")
    wait_none_mentioning(job_dir, "the stopped pool's processes ending")


def test_shutting_the_kernel_down_leaves_no_process_of_a_pool(tmp_path_factory):
    session = hotswitch_kernel(tmp_path_factory)
    try:
        ok(session, "%train_pool start doomed -n 2")
        job_dir = session.value("str(pools['doomed'].job.job_dir)")
        ok(session, f"%%train --pool doomed --name spin\n{FOREVER}")
        assert len(processes_mentioning(job_dir)) == 3  # torchrun's agent and two ranks
    finally:
        session.shutdown()
    wait_none_mentioning(job_dir, "every process of the pool ending with the kernel")


def test_ranks_output_streams_while_the_cell_runs(kernel, tmp_path):
    flag = tmp_path / "go"
    code = (
        "%%ranks warm\nimport os, time\nprint('waiting', rank, flush=True)\n"
        f"while not os.path.exists({str(flag)!r}):\n    time.sleep(0.05)\nrank"
    )
    msg_id, _ = kernel.execute(code, wait=False)
    wait_progressing(
        lambda: kernel.drain() or kernel.text(msg_id).count("waiting") == 2,
        lambda: len(kernel.outputs[msg_id]),
        "both ranks' first line reaching the cell while it still runs",
    )
    assert "Out[" not in kernel.text(msg_id)
    flag.touch()
    reply = kernel.client.get_shell_msg(timeout=CAP_S)
    assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["status"] == "ok"
    kernel.drain(0.5)
    assert "Out[0]: 0" in kernel.text(msg_id) and "Out[1]: 1" in kernel.text(msg_id)


def test_a_ranks_cell_shows_what_its_ranks_write_below_python(kernel):
    code = "%%ranks warm\nimport os, subprocess\nos.write(2, b'below %d\\n' % rank)\n"
    code += "_ = subprocess.run(['echo', 'child'])"
    msg_id, reply = kernel.execute(code)
    assert reply["status"] == "ok", kernel.text(msg_id)
    kernel.drain(0.5)
    text = kernel.text(msg_id)
    for rank in (0, 1):
        assert f"[stderr:{rank}] below {rank}" in text and f"[stdout:{rank}] child" in text, text


def test_a_plan_for_another_world_size_fails_its_job_saying_so(kernel):
    body = (
        "from hotswitch.backend import get_config\nfrom hotswitch.backend.data import BatchStream, stdlib_documents\n"
        "from hotswitch.backend.train.loop.trainer import Trainer\n"
        "Trainer(get_config('tiny'), BatchStream(stdlib_documents(), 8, 256), {'plan': 'dp4'})\n"
    )
    text = ok(kernel, f"%%train --pool warm --wait --name wide\n{body}")
    assert kernel.value("jobs['wide'].status") == "failed", text
    assert "uses 4 devices but the cluster has 2" in text
    assert kernel.value("pools['warm'].status") == "idle"


@pytest.mark.parametrize("body", ["while True:\n    time.sleep(0.05)", "time.sleep(3600)"], ids=["loop", "blocking"])
def test_an_interrupt_ends_the_ranks_cell_and_the_pool_goes_on(kernel, body):
    """A blocking call too: the interrupt is a real SIGINT on the ranks."""
    msg_id, _ = kernel.execute(f"%%ranks warm\nimport time\nprint('running', flush=True)\n{body}", wait=False)
    wait_progressing(
        lambda: kernel.drain() or kernel.text(msg_id).count("running") == 2,
        lambda: len(kernel.outputs[msg_id]),
        "both ranks running",
    )
    kernel.manager.interrupt_kernel()
    reply = kernel.client.get_shell_msg(timeout=CAP_S)
    assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert kernel.value("pools['warm'].status") == "idle"
    assert "Out[1]: 10" in ok(kernel, "%%ranks warm\nx")


def test_train_stop_ends_a_pool_job_in_a_blocking_call_and_the_pool_goes_on(kernel):
    ok(kernel, "%%train --pool warm --name sleeper\nimport time\ntime.sleep(3600)")
    assert "stopped" in ok(kernel, "%train_stop sleeper")
    assert "Out[1]: 10" in ok(kernel, "%%ranks warm\nx")


def test_a_second_interrupt_of_a_body_that_will_not_end_ends_the_pool_saying_so(kernel):
    ok(kernel, "stubborn = %train_pool start stubborn -n 1")
    job_dir = kernel.value("str(stubborn.job.job_dir)")
    body = "import time\nprint('asleep', flush=True)\ntry:\n    time.sleep(3600)\nexcept KeyboardInterrupt:\n"
    msg_id, _ = kernel.execute(
        f"%%ranks stubborn\n{body}    print('ignored', flush=True)\n    time.sleep(3600)", wait=False
    )
    wait_progressing(lambda: kernel.drain() or "asleep" in kernel.text(msg_id), lambda: None, "the rank asleep")
    kernel.manager.interrupt_kernel()
    wait_progressing(lambda: kernel.drain() or "ignored" in kernel.text(msg_id), lambda: None, "the interrupt ignored")
    kernel.manager.interrupt_kernel()
    reply = kernel.client.get_shell_msg(timeout=CAP_S)
    assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["ename"] == "KeyboardInterrupt"
    wait_none_mentioning(job_dir, "the pool's processes ending")
    refused(kernel, "%%ranks stubborn\n1", "did not end on an interrupt; a second one ended the pool")


def test_an_idle_pool_stops_itself_and_says_so(kernel):
    ok(kernel, "sleepy = %train_pool start sleepy -n 1 --idle-timeout 1")
    job_dir = kernel.value("str(sleepy.job.job_dir)")
    wait_progressing(lambda: kernel.value("sleepy.job.done"), lambda: None, "the idle pool stopping")
    refused(kernel, "%%ranks sleepy\n1", "idle for 1 s (--idle-timeout)", "%train_pool start sleepy -n 1")
    wait_none_mentioning(job_dir, "the idle pool's processes ending")


def test_a_body_stuck_in_a_collective_after_its_peer_failed_takes_the_pool_down_saying_why(kernel):
    ok(kernel, "split = %train_pool start split -n 2")
    job_dir = kernel.value("str(split.job.job_dir)")
    body = (
        "import torch.distributed as dist\nif job.rank == 1:\n    raise ValueError('rank 1 fails')\n"
        "dist.all_reduce(torch.ones(1))"
    )
    text = ok(kernel, f"%%train --pool split --wait --name stuck\n{body}")
    assert kernel.value("jobs['stuck'].status") == "failed", text
    assert "ValueError: rank 1 fails" in text
    refused(
        kernel,
        "%%ranks split\n1",
        "did not end on an interrupt and was killed with the pool",
        "%train_pool start split",
    )
    wait_none_mentioning(job_dir, "the pool's processes ending")
    assert kernel.value("repr(split)") == "<Pool 'split' stopped, 2 ranks>"  # no longer "running job 'stuck'"
