"""How a job's end is worded from what the kernel saw: a worker's own error from the agent's
output, a job whose every message was rejected, a body's failure."""

from hotswitch.kernel.channel.signing import ChannelStats
from hotswitch.kernel.launch.local.forked_ranks import ended_line
from hotswitch.kernel.notebook.jobs.exit_reason import RankExit, observed_exits
from hotswitch.kernel.notebook.jobs.job_outcome import ending, worker_errors
from hotswitch.kernel.worker.entry import WORKER_ERROR_MARK

AGENT_OUTPUT = f"""\
some torchrun banner
{WORKER_ERROR_MARK} rank 1: ValueError: message of 310 bytes is over the channel limit of 10 bytes
[ERROR] failures:
  rank : 1 (local_rank: 1)
  exitcode : 1 (pid: 4242)
"""


def test_a_workers_own_error_is_the_reason_and_is_shown():
    assert worker_errors(AGENT_OUTPUT) == [
        "rank 1: ValueError: message of 310 bytes is over the channel limit of 10 bytes"
    ]
    status, reason, text = ending(1, None, AGENT_OUTPUT, ChannelStats())
    assert status == "failed"
    assert reason.startswith("rank 1 exit status 1: rank 1: ValueError: message of 310 bytes")
    assert "[hotswitch] worker error: rank 1: ValueError" in text


def test_a_job_whose_every_message_was_rejected_fails_saying_so():
    status, reason, text = ending(0, None, "", ChannelStats(forged=4))
    assert status == "failed"
    assert "rejected every message" in reason and "'forged': 4" in reason and "HOTSWITCH_" in reason
    assert reason in text


def test_a_clean_job_succeeds_and_a_rank_failure_names_the_rank():
    assert ending(0, None, "", ChannelStats(accepted=5, forged=1)) == ("succeeded", None, "")
    failure = {"rank": 1, "error": "ZeroDivisionError: division by zero", "traceback": ""}
    assert ending(1, failure, "", ChannelStats(accepted=3))[:2] == (
        "failed",
        "rank 1 raised ZeroDivisionError: division by zero",
    )


def test_a_signalled_agent_is_the_first_cause_before_the_errors_its_end_caused():
    failure = {"rank": 0, "error": "RuntimeError: Connection closed by peer", "traceback": ""}
    status, reason, _ = ending(-9, failure, "", ChannelStats(accepted=3))
    assert (status, reason) == (
        "failed",
        "the torchrun agent was killed by SIGKILL; its ranks were stopped; then rank 0 raised RuntimeError: "
        "Connection closed by peer",
    )


# torchrun's report as a 2-rank job ended after rank 1 was SIGKILLed while rank 0 waited on it
# in a collective: torchrun numbers failures in the order it saw them, [0] first, printed last.
KILLED_FIRST = """\
E1126 13:30:16.195000 10350 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) \
local_rank: 1 (pid: 10362) of binary: python
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
======================================================
worker FAILED
------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-26_13:30:16
  host      : node-a
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 10361)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 10361
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_13:30:16
  host      : node-a
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 10362)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 10362
======================================================
"""
RESET = {"rank": 0, "error": "RuntimeError: [pair.cc:537] Read error: Connection reset by peer", "traceback": ""}


def test_the_rank_torchrun_saw_end_first_without_a_word_comes_before_the_survivors_error():
    status, reason, _ = ending(1, RESET, KILLED_FIRST, ChannelStats(accepted=9), unreported=[1])
    assert status == "failed"
    assert reason == f"rank 1 killed by SIGKILL; then rank 0 raised {RESET['error']}"


def test_without_a_failure_on_the_channel_the_ranks_are_named_in_the_order_torchrun_saw_them():
    assert ending(1, None, KILLED_FIRST, ChannelStats(accepted=9), unreported=[0, 1])[1] == (
        "rank 1 killed by SIGKILL; then rank 0 killed by SIGTERM"
    )


def test_a_rank_that_reported_its_own_end_or_ended_after_the_raising_rank_is_not_a_first_cause():
    # rank 1 said "finished" (or its own error) on the channel: its exit is not a silent first cause
    reason = ending(1, RESET, KILLED_FIRST, ChannelStats(accepted=9), unreported=[])[1]
    assert reason == f"rank 0 raised {RESET['error']}"
    # torchrun saw the raising rank end first: the rest followed it
    raised_first = {**RESET, "rank": 1, "error": "ZeroDivisionError: division by zero"}
    reason = ending(1, raised_first, KILLED_FIRST, ChannelStats(accepted=9), unreported=[0])[1]
    assert reason == "rank 1 raised ZeroDivisionError: division by zero"


def _node_report(node: int, seen: str, rank: int, code: int) -> str:
    """One node's agent report of one failure, as a multi-node launcher gathers them."""
    return (
        f"[node {node}]\n[0]:\n  time      : {seen}\n  host      : n{node}\n"
        f"  rank      : {rank} (local_rank: 0)\n  exitcode  : {code} (pid: 1)\n"
    )


def test_reports_of_several_nodes_are_ordered_by_the_second_each_failure_was_seen():
    output = _node_report(0, "2026-11-26_13:30:18", 0, -15) + _node_report(1, "2026-11-26_13:30:16", 1, -11)
    assert observed_exits(output) == [RankExit(1, -11), RankExit(0, -15)]
    reason = ending(1, RESET, output, ChannelStats(), unreported=[1])[1]
    assert reason == f"rank 1 killed by SIGSEGV; then rank 0 raised {RESET['error']}"


def test_an_agent_that_forked_its_ranks_orders_their_ends_to_the_microsecond():
    # torchrun saw both at one poll and names rank 0 its first observed failure; the agent's own
    # lines, printed as each rank ended, say rank 1 went 3 ms before (and rank 2 ended well)
    report = KILLED_FIRST.replace("rank      : 1 (local_rank: 1)", "rank      : 9 (local_rank: 1)")
    lines = [ended_line("0", 1795770026.104, 1), ended_line("2", 1795770026.2, 0), ended_line("1", 1795770026.101, -9)]
    output = "\n".join([lines[0], "[rank 0] Traceback ...", *lines[1:], report])
    assert observed_exits(output) == [RankExit(1, -9), RankExit(0, 1)]
    reason = ending(1, RESET, output, ChannelStats(accepted=9), unreported=[1])[1]
    assert reason == f"rank 1 killed by SIGKILL; then rank 0 raised {RESET['error']}"
