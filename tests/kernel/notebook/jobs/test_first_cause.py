"""A job's exit reason names the rank that stopped first and how, then what that caused: a real
2-rank job on local torchrun ranks whose rank 1 SIGKILLs itself while rank 0 waits for it in a
gloo collective (rank 0 then fails with a connection error, a symptom, not the cause)."""

import pytest

from hotswitch.kernel.cli.headless import follow
from tests.kernel.kernel_session import processes_mentioning

pytestmark = pytest.mark.slow

LIMIT_S = 600  # generous: the machine's cores are shared

# Both ranks pass a barrier; rank 1 then kills itself while rank 0 is inside the all-reduce.
KILLED_MID_COLLECTIVE = """
import os, signal
import torch.distributed as dist

dist.init_process_group("gloo")
dist.barrier()
if job.rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
dist.all_reduce(torch.zeros(4))
"""


def test_the_rank_killed_first_is_named_before_the_survivor_it_broke():
    job = follow("first-cause", KILLED_MID_COLLECTIVE, 2, lambda events: None, LIMIT_S).job
    assert job.status == "failed"
    assert job.exit_reason.startswith("rank 1 killed by SIGKILL"), job.exit_reason
    # what followed is rank 0's end: the error it raised, or torchrun stopping it first
    caused = job.exit_reason.removeprefix("rank 1 killed by SIGKILL")
    assert caused.startswith("; then rank 0 raised RuntimeError") or caused == "; then rank 0 killed by SIGTERM", caused
    assert processes_mentioning(str(job.job_dir)) == []
