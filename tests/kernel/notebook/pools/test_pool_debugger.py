"""The debugger on a warm pool (a real kernel, a real pool of 2 ranks): ``breakpoint()`` in a
``%%ranks`` cell is driven from that cell; where a ``%%ranks`` cell or a ``%%train --pool`` body
raised, ``%train_debug`` opens pdb in the failing frame (post-mortem) and the pool goes on."""

import subprocess
import sys

import pytest

from tests.kernel.kernel_session import KernelSession

from ..cells.test_rank_debugger import answered

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("jupyter-prefix")
    cli = [sys.executable, "-m", "hotswitch.kernel.cli", "kernel", "install", "--prefix", str(prefix)]
    subprocess.run(cli, check=True, capture_output=True)
    session = KernelSession("hotswitch", prefix / "share" / "jupyter" / "kernels")
    msg_id, reply = session.execute("%train_pool start dbg -n 2", timeout=180)
    assert reply["status"] == "ok", session.text(msg_id)
    yield session
    session.execute("%train_pool stop dbg")
    session.shutdown()


def test_a_breakpoint_in_a_ranks_cell_is_driven_from_that_cell(kernel):
    cell = "%%ranks dbg\nx = 40 + rank\nif rank == 1:\n    breakpoint()\n    x = x * 2\nx"
    text, prompts, reply = answered(kernel, cell, ["p x", "n", "p x", "c"])
    assert reply["status"] == "ok", text
    assert prompts == ["(Pdb rank 1) "] * 4
    assert "[pdb:1] 41" in text and "[pdb:1] 82" in text, text
    assert kernel.value("pools['dbg'].status") == "idle"


def test_train_debug_opens_pdb_where_a_ranks_cell_raised(kernel):
    msg_id, reply = kernel.execute("%%ranks dbg\nscale = 3 - rank\ntotal = 10 / (scale - 2)")
    assert reply["status"] == "error" and "raised on 1 rank(s): rank 1: ZeroDivisionError" in kernel.text(msg_id)
    text, prompts, reply = answered(kernel, "%train_debug dbg", ["p scale, rank", "q"])
    assert reply["status"] == "ok", text
    assert "rank 1 of pool 'dbg': pdb where the last %%ranks cell raised" in text, text
    assert prompts == ["(Pdb rank 1) "] * 2
    assert "[pdb:1] (2, 1)" in text and "total = 10 / (scale - 2)" in text, text
    assert "[rank 1]     scale = 2" in kernel.text(msg_id)  # the traceback showed the frame's locals
    assert kernel.value("pools['dbg'].status") == "idle"


def test_train_debug_opens_pdb_where_a_pool_jobs_body_raised_and_the_pool_goes_on(kernel):
    body = "batch = [3, 1, 4]\nif job.rank == 0:\n    batch[7]\n"
    msg_id, reply = kernel.execute("%%train --pool dbg --wait --name broken\n" + body)
    assert kernel.value("jobs['broken'].status") == "failed", kernel.text(msg_id)
    text, prompts, reply = answered(kernel, "%train_debug broken", ["p len(batch)", "c"])
    assert reply["status"] == "ok", text
    assert prompts == ["(Pdb rank 0) "] * 2
    assert "rank 0 of pool 'dbg': pdb where job 'broken' raised" in text, text
    assert "[pdb:0] 3" in text and "batch[7]" in text, text
    msg_id, reply = kernel.execute("%%ranks dbg\nrank * 10")
    assert reply["status"] == "ok" and "10" in kernel.text(msg_id)  # the pool goes on


def test_a_rank_that_kept_no_failure_says_so(kernel):
    msg_id, reply = kernel.execute("%%ranks dbg\nrank")
    assert reply["status"] == "ok", kernel.text(msg_id)
    msg_id, reply = kernel.execute("%train_debug dbg")
    assert "the last %%ranks cell on pool 'dbg' raised on no rank: nothing to debug" in kernel.text(msg_id)
    msg_id, reply = kernel.execute("%train_debug dbg 1")
    text = kernel.text(msg_id)
    assert reply["status"] == "ok" and "rank 1 kept no failure to debug" in text, text
