"""A debugger for ranks, in the notebook (a real kernel, real ranks): ``breakpoint()`` on rank 1
of 2 is driven from the cell through the kernel's stdin and the job then finishes; a job not
waited on is driven by ``%train_debug``; a detached job's breakpoint continues saying why;
``%train_stacks`` shows what each rank waits on; a gone rank's traceback is shown."""

import subprocess
import sys

import pytest

from tests.kernel.kernel_session import KernelSession, wait_until

pytestmark = pytest.mark.slow

BREAKS = """
x = 41
if job.rank == 1:
    breakpoint()
    y = x + 1
print("after", job.rank, flush=True)
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("jupyter-prefix")
    cli = [sys.executable, "-m", "hotswitch.kernel.cli", "kernel", "install", "--prefix", str(prefix)]
    subprocess.run(cli, check=True, capture_output=True)
    session = KernelSession("hotswitch", prefix / "share" / "jupyter" / "kernels")
    yield session
    session.shutdown()


def answered(kernel, code: str, answers: list[str], timeout: float = 120) -> tuple[str, list[str], dict]:
    """Run ``code`` answering each input request in turn; its text, the prompts, its reply."""
    msg_id = kernel.client.execute(code, allow_stdin=True)
    prompts = []
    for line in answers:
        request = kernel.client.get_stdin_msg(timeout=timeout)
        prompts.append(request["content"]["prompt"])
        kernel.client.input(line)
    reply = kernel.client.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kernel.client.get_shell_msg(timeout=timeout)
    kernel.drain_until_idle(msg_id)
    return kernel.text(msg_id), prompts, reply["content"]


def test_a_breakpoint_on_rank_one_is_driven_from_the_waiting_cell(kernel):
    text, prompts, reply = answered(kernel, "%%train -n 2 --wait --name dbg\n" + BREAKS, ["p x", "n", "p x + 100", "c"])
    assert reply["status"] == "ok", text
    assert prompts == ["(Pdb rank 1) "] * 4
    assert "[pdb:1] 41" in text and "[pdb:1] 141" in text and "-> y = x + 1" in text, text
    assert "[stdout:0] after 0" in text and "[stdout:1] after 1" in text
    assert kernel.value("jobs['dbg'].status") == "succeeded"


def test_a_job_not_waited_on_is_driven_by_train_debug(kernel):
    msg_id, reply = kernel.execute("%%train -n 2 --name later\n" + BREAKS)
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert wait_until(lambda: kernel.drain() or "stopped at a breakpoint" in kernel.text(msg_id), timeout=120)
    assert "%train_debug later 1 drives it" in kernel.text(msg_id)
    text, prompts, reply = answered(kernel, "%train_debug later 1", ["p x * 2", "c"])
    assert prompts == ["(Pdb rank 1) "] * 2
    assert reply["status"] == "ok" and "[pdb:1] 82" in text, text
    assert kernel.value("jobs['later'].wait(120)") == "succeeded"


def test_train_stacks_shows_what_every_rank_waits_on(kernel):
    msg_id, reply = kernel.execute("%%train -n 2 --name sleepy\nimport time\ntime.sleep(120)\n")
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert wait_until(lambda: kernel.value("jobs['sleepy'].running_ranks()") == [0, 1], timeout=120)
    msg_id, reply = kernel.execute("%train_stacks sleepy")
    text = kernel.text(msg_id)
    assert reply["status"] == "ok" and "--- rank 0 ---" in text and "--- rank 1 ---" in text, text
    assert text.count("time.sleep(120)") == 2 and "hotswitch-heartbeat" in text, text
    kernel.execute("%train_stop sleepy")


def test_a_gone_ranks_traceback_is_what_train_debug_shows(kernel):
    body = "if job.rank == 1:\n    raise ValueError('the bad batch')\nimport time\ntime.sleep(60)\n"
    msg_id, reply = kernel.execute("%%train -n 2 --wait --name gone\n" + body)
    assert kernel.value("jobs['gone'].status") == "failed"
    msg_id, reply = kernel.execute("%train_debug gone 1")
    text = kernel.text(msg_id)
    assert reply["status"] == "ok", text
    assert "rank 1 of job 'gone' is gone (failed); its traceback:" in text and "ValueError: the bad batch" in text


def test_a_detached_jobs_breakpoint_continues_saying_why(kernel):
    msg_id, reply = kernel.execute("%%train -n 2 --detach --name away\n" + BREAKS)
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert kernel.value("jobs['away'].wait(120)") == "succeeded"
    kernel.drain(0.5)
    text = kernel.text(msg_id)
    assert "breakpoint() on rank 1 continues: a detached job has no kernel to answer it" in text, text


def test_an_interrupt_at_the_prompt_ends_the_session_and_the_job_cleanly(kernel):
    msg_id = kernel.client.execute("%%train -n 2 --wait --name halted\n" + BREAKS, allow_stdin=True)
    kernel.client.get_stdin_msg(timeout=120)  # rank 1 waits at its prompt
    kernel.manager.interrupt_kernel()
    reply = kernel.client.get_shell_msg(timeout=120)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kernel.client.get_shell_msg(timeout=120)
    assert reply["content"]["status"] == "error"  # the interrupt, raised in the cell
    assert kernel.value("jobs['halted'].wait(60)") == "stopped"
    assert kernel.value("jobs['halted'].pids()") == []


LATE = """
import time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
if job.rank == 1:
    time.sleep(8)  # rank 0 waits in the all_reduce meanwhile
total = torch.ones(1)
dist.all_reduce(total)
print("total", int(total), flush=True)
"""


def test_a_collective_waiting_past_its_limit_names_the_op_and_the_ranks_not_arrived(kernel):
    cell = "%%train -n 2 --wait --name late --collective-wait 1.5\n" + LATE
    msg_id, reply = kernel.execute(cell, timeout=180)
    text = kernel.text(msg_id)
    assert reply["status"] == "ok" and kernel.value("jobs['late'].status") == "succeeded", text
    assert "[hotswitch] job 'late': all_reduce over ranks 0, 1 has waited" in text, text
    assert "on rank(s) 0; not arrived: rank(s) 1 (rank(s) 1 still compute, or are stuck outside a collective)" in text
    assert "[stdout:0] total 2" in text
