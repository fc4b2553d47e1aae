"""How a job's end is worded from what the kernel saw: a worker's own error from the agent's
output, a job whose every message was rejected, a body's failure."""

from hotswitch.kernel.channel.signing import ChannelStats
from hotswitch.kernel.notebook.job_outcome import ending, worker_errors
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
